"""Preemption scenarios: whole-gang victims, priorities, lazy preemption, grace."""

from dataclasses import replace

from scheduler import Engine, Preemption

from .helpers import a100_cluster, gang, mixed_cluster, nodes_of, placed, rack, settle, status, vc, waiting


def two_node_team(**kw):
    return Engine(a100_cluster(rack("r1", "n1", "n2")), [vc("team", ("A100-NODE", 2), **kw)])


def test_guaranteed_job_preempts_whole_opportunistic_gang():
    engine = two_node_team()
    engine.schedule([gang("opp", "team", (2, 8), priority=-1)], now=0)  # both nodes, one gang

    result = settle(engine, [gang("prod", "team", (1, 8), priority=100)], now=10)

    assert result.preemptions == (Preemption("opp", lazy=False, by_job="prod"),)
    assert len(placed(result, "prod")) == 1
    # The victim is gone as a whole, not just the pod that was in the way.
    assert [a.job_id for a in engine.allocations()] == ["prod"]
    assert engine.node_status("n2").used == () or engine.node_status("n1").used == ()


def test_preemption_prefers_fewest_then_lowest_priority_then_most_recent_victims():
    engine = two_node_team()
    engine.schedule([gang("old", "team", (1, 4), priority=5)], now=0)
    engine.schedule([gang("new", "team", (1, 4), priority=5)], now=5)  # fills n1
    engine.schedule([gang("low", "team", (1, 4), priority=1)], now=6)
    engine.schedule([gang("big", "team", (1, 4), priority=50)], now=7)  # fills n2
    assert {a.job_id: a.pods[0].node for a in engine.allocations()} == {
        "old": "n1", "new": "n1", "low": "n2", "big": "n2"}

    result = settle(engine, [gang("urgent", "team", (1, 4), priority=100)], now=10)
    assert result.preemptions == (Preemption("low", lazy=False, by_job="urgent"),)

    result = settle(engine, [gang("urgent2", "team", (1, 4), priority=100)], now=11)
    assert result.preemptions == (Preemption("new", lazy=False, by_job="urgent2"),)


def test_one_victim_is_preferred_to_several_of_lower_priority():
    engine = two_node_team()
    engine.schedule([gang("one", "team", (1, 8), priority=1)], now=0)
    engine.schedule([gang(f"opp{i}", "team", (1, 2), priority=-1, at=i) for i in range(4)], now=1)
    assert {a.pods[0].node for a in engine.allocations() if a.job_id.startswith("opp")} == {"n2"}

    result = settle(engine, [gang("prod", "team", (1, 8), priority=100)], now=10)

    assert result.preemptions == (Preemption("one", lazy=False, by_job="prod"),)


def test_no_victim_while_a_placement_without_preemption_exists():
    engine = two_node_team()
    engine.schedule([gang("low", "team", (1, 4), priority=1)], now=0)

    result = settle(engine, [gang("high", "team", (1, 8), priority=100)], now=1)

    assert result.preemptions == ()
    assert nodes_of(result, "high") == ["n2"]


def test_equal_priority_preemptors_do_not_cancel_each_other():
    engine = two_node_team()
    engine.schedule([gang("low", "team", (2, 8), priority=1)], now=0)

    first = settle(engine, [gang("a", "team", (2, 8), priority=50, at=1)], now=10)
    second = settle(engine, [gang("b", "team", (2, 8), priority=50, at=2)], now=11)

    assert first.preemptions == (Preemption("low", lazy=False, by_job="a"),)
    assert second.preemptions == ()
    assert [a.job_id for a in engine.allocations()] == ["a"]
    assert "16 A100 are used by its jobs of equal or higher priority" in waiting(second)["b"]


def test_job_only_preempts_lower_priority_jobs_of_its_own_vc():
    engine = Engine(a100_cluster(rack("r1", "n1", "n2")), [vc("a", ("A100-NODE", 1)), vc("b", ("A100-NODE", 1))])
    engine.schedule([gang("b-low", "b", (1, 8), priority=1)], now=0)
    engine.schedule([gang("a-low", "a", (1, 8), priority=1)], now=0)

    result = settle(engine, [gang("b-high", "b", (1, 8), priority=100)], now=1)

    assert result.preemptions == (Preemption("b-low", lazy=False, by_job="b-high"),)
    assert "a-low" in [a.job_id for a in engine.allocations()]


def test_lazy_victim_is_demoted_and_keeps_running_when_other_cells_suffice():
    engine = Engine(
        a100_cluster(rack("r1", "n1", "n2"), rack("r2", "n3", "n4")),
        [vc("team", ("A100-NODE", 2)), vc("other", ("A100-NODE", 1))],
    )
    engine.schedule([gang("lazy", "team", (1, 8), priority=1, lazy_preemption=True)], now=0)
    engine.schedule([gang("mid", "team", (1, 4), priority=50)], now=1)
    lazy_node = engine.allocations()[0].pods[0].node

    result = settle(engine, [gang("prod", "team", (1, 8), priority=100)], now=10)

    assert result.preemptions == (Preemption("lazy", lazy=True, by_job="prod"),)
    # The VC's quota went to prod on another node; the demoted job runs on as
    # opportunistic until its cells are really needed.
    assert nodes_of(result, "prod") != [lazy_node]
    alloc = {a.job_id: a for a in engine.allocations()}
    assert alloc["lazy"].opportunistic and alloc["lazy"].lazy_preempted
    assert alloc["lazy"].pods[0].node == lazy_node
    assert status(engine, "team") == {"A100-NODE": (2, 2, 0, 0, 0, 0)}
    assert engine.vc_status("team").opportunistic_leaf_cells == (("A100", 8),)


def test_lazy_victim_is_killed_when_its_devices_are_needed():
    engine = two_node_team()
    engine.schedule([gang("lazy", "team", (2, 8), priority=1, lazy_preemption=True)], now=0)

    result = settle(engine, [gang("prod", "team", (1, 8), priority=100)], now=10)

    assert result.preemptions == (Preemption("lazy", lazy=False, by_job="prod"),)
    assert [a.job_id for a in engine.allocations()] == ["prod"]


def test_lazy_demotion_reverts_when_the_preemptor_cannot_be_placed():
    engine = Engine(mixed_cluster(), [vc("team", ("A100-NODE", 1), ("V100-NODE", 1)), vc("other", ("V100-NODE", 1))])
    engine.schedule([gang("lazy", "team", (1, 8), priority=1, lazy_preemption=True)], now=0)
    engine.schedule([gang("v100", "team", (1, 16), sku="V100", priority=500)], now=0)
    before = engine.allocations()
    # Its V100 part cannot fit: the VC's only V100 node runs a higher-priority job.
    v100_part = gang("x", "team", (1, 4, "v"), sku="V100").pods
    preemptor = replace(gang("prod", "team", (1, 8), priority=100), pods=gang("x", "team", (1, 8)).pods + v100_part)

    result = settle(engine, [preemptor], now=10)

    assert result.preemptions == ()
    assert engine.allocations() == before
    assert "has 0 of 8 A100 free" in waiting(result)["prod"]
    assert not engine.allocations()[0].opportunistic


def test_minimum_runtime_protects_a_victim_until_it_has_run_long_enough():
    engine = two_node_team()
    engine.schedule([gang("young", "team", (2, 8), priority=-1, min_runtime=600)], now=0)

    early = settle(engine, [gang("prod", "team", (1, 8), priority=100)], now=300)
    late = settle(engine, [gang("prod", "team", (1, 8), priority=100)], now=600)

    assert early.preemptions == ()
    assert "1 job it could preempt is within the minimum runtime until ~00:10 UTC (in 5 min)" in waiting(early)["prod"]
    assert late.preemptions == (Preemption("young", lazy=False, by_job="prod"),)


def test_owner_reclaims_a_lazy_borrower_by_demoting_it():
    engine = Engine(
        a100_cluster(rack("r1", "n1", "n2"), rack("r2", "n3", "n4")),
        [vc("owner", ("A100-NODE", 2), cohort="c"), vc("borrower", ("A100-NODE", 1), cohort="c"),
         vc("other", ("A100-NODE", 1))],
    )
    engine.schedule([gang("mine", "borrower", (1, 8)), gang("lent", "borrower", (1, 8), at=1, lazy_preemption=True),
                     gang("own", "owner", (1, 8), at=2)], now=0)
    assert {p.lent_by for a in engine.allocations() if a.job_id == "lent" for p in a.pods} == {"owner"}

    result = settle(engine, [gang("back", "owner", (1, 8))], now=10)

    # The borrowed node goes back to the owner's quota; with a free node left in the
    # cluster the demoted borrower keeps running there as opportunistic.
    assert result.preemptions == (Preemption("lent", lazy=True, by_job="back"),)
    lent = next(a for a in engine.allocations() if a.job_id == "lent")
    assert lent.opportunistic and lent.lazy_preempted
    assert status(engine, "owner") == {"A100-NODE": (2, 2, 0, 0, 0, 0)}
    assert status(engine, "borrower") == {"A100-NODE": (1, 1, 0, 0, 0, 0)}
