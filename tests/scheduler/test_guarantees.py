"""VC guarantees: configuration checks, safety, bad nodes, borrowing, fair sharing,
per-user caps."""

import pytest

from scheduler import ConfigurationError, Engine, validate_configuration

from .helpers import a100_cluster, gang, mixed_cluster, nodes_of, placed, rack, settle, status, vc, waiting


def test_configuration_beyond_the_cluster_is_refused_naming_level_and_shortfall():
    cluster = a100_cluster(rack("r1", "n1", "n2"), rack("r2", "n3", "n4"))

    with pytest.raises(ConfigurationError) as caught:
        validate_configuration(cluster, [vc("vision", ("A100-NODE", 3)), vc("speech", ("A100-NODE", 2))])

    error = caught.value
    assert (error.cell_type, error.level, error.shortfall, error.chain) == ("A100-NODE", 3, 1, "A100")
    assert str(error) == (
        "VC 'vision' and others need 5 cells of A100-NODE (level 3, chain A100) but the cluster can supply 4: "
        "short by 1"
    )


def test_configuration_counts_cells_split_for_lower_levels():
    cluster = a100_cluster(rack("r1", "n1", "n2"))
    # One whole rack plus one switch cannot come out of one rack.
    with pytest.raises(ConfigurationError) as caught:
        validate_configuration(cluster, [vc("a", ("A100-RACK", 1)), vc("b", ("A100-SWITCH", 1))])
    assert (caught.value.cell_type, caught.value.shortfall) == ("A100-SWITCH", 1)
    validate_configuration(cluster, [vc("a", ("A100-NODE", 1)), vc("b", ("A100-SWITCH", 4))])


@pytest.mark.parametrize(
    "vcs, message",
    [
        ([vc("a", ("H100-NODE", 1))], "unknown cell type 'H100-NODE'"),
        ([vc("a", pinned_cells=("nope",))], "unknown pinned cell 'nope'"),
        ([vc("a", pinned_cells=("pin-a5",)), vc("b", pinned_cells=("pin-a5",))], "owned by both VC 'a' and VC 'b'"),
        ([vc("a"), vc("a")], "VC 'a' is defined twice"),
        ([vc("a", weight=0)], "positive weight"),
    ],
)
def test_invalid_vc_configurations_are_refused(vcs, message):
    with pytest.raises(ConfigurationError, match=message):
        Engine(mixed_cluster(), vcs)


def test_placement_that_would_break_another_vcs_guarantee_is_refused_even_with_free_cells():
    engine = Engine(
        a100_cluster(rack("r1", "n1", "n2")),
        [vc("nodes", ("A100-NODE", 1), cohort="c", lending_limit=4),
         vc("switches", ("A100-SWITCH", 4), cohort="c")],
    )
    engine.schedule([gang(f"s{i}", "switches", (1, 2), at=i) for i in range(4)], now=0)
    assert {a.pods[0].node for a in engine.allocations()} == {"n1"}

    # n2 has 8 idle GPUs and "nodes" lends up to 4 leaf cells, but a 2-GPU pod there
    # would leave "nodes" without the whole node it was promised.
    result = engine.schedule([gang("more", "switches", (1, 2))], now=1)

    assert result.placements == ()
    assert engine.node_status("n2").used == ()
    reason = waiting(result)["more"]
    assert "VC 'switches' has 0 of 8 A100 free" in reason
    assert "cohort 'c' has 4 unused A100 it could lend" in reason


def test_vc_preempts_rather_than_split_a_cell_another_vc_is_promised():
    engine = Engine(
        a100_cluster(rack("r1", "n1", "n2"), rack("r2", "n3", "n4")),
        [vc("racks", ("A100-RACK", 1)), vc("x", ("A100-NODE", 1)), vc("y", ("A100-NODE", 1))],
    )
    engine.schedule([gang("x1", "x", (1, 8))], now=0)  # splits r1: x gets n1
    engine.schedule([gang("opp", "x", (1, 1), priority=-1)], now=1)  # idle n2
    assert {a.job_id: a.pods[0].node for a in engine.allocations()} == {"x1": "n1", "opp": "n2"}

    # Taking idle n3 would split r2, the only rack left for "racks".
    result = settle(engine, [gang("y1", "y", (1, 8))], now=2)

    assert [p.job_id for p in result.preemptions] == ["opp"]
    assert nodes_of(result, "y1") == ["n2"]


def test_a_vcs_first_cell_goes_elsewhere_when_the_emptiest_rack_is_another_vcs_promise():
    engine = Engine(
        a100_cluster(rack("r1", "n1", "n2"), rack("r2", "n3", "n4")),
        [vc("racks", ("A100-RACK", 1)), vc("x", ("A100-NODE", 1)), vc("y", ("A100-SWITCH", 1))],
    )
    engine.schedule([gang("y1", "y", (1, 2))], now=0)  # splits r1: y gets a switch of n1
    assert {a.job_id: a.pods[0].node for a in engine.allocations()} == {"y1": "n1"}

    # r2 is the emptiest rack, but it is the one "racks" was promised; n2 is free.
    result = engine.schedule([gang("x1", "x", (1, 8))], now=1)

    assert nodes_of(result, "x1") == ["n2"]


def test_a_free_cell_with_an_opportunistic_pod_is_bound_rather_than_preempting_it():
    engine = Engine(
        a100_cluster(rack("r1", "n1", "n2"), rack("r2", "n3", "n4")),
        [vc("racks", ("A100-RACK", 1)), vc("x", ("A100-NODE", 1)), vc("y", ("A100-SWITCH", 1))],
    )
    engine.schedule([gang("y1", "y", (1, 2))], now=0)  # n1
    engine.schedule([gang("opp", "racks", (1, 1), priority=-1)], now=1)  # n2, the last free node
    assert {a.job_id: a.pods[0].node for a in engine.allocations()} == {"y1": "n1", "opp": "n2"}

    # Splitting idle r2 would break the promise to "racks"; n2 has room beside the pod.
    result = settle(engine, [gang("x1", "x", (1, 2))], now=2)

    assert result.preemptions == ()
    assert nodes_of(result, "x1") == ["n2"]


def test_bad_node_gets_no_pods_shows_as_bad_capacity_and_recovers():
    engine = Engine(a100_cluster(rack("r1", "n1", "n2")), [vc("team", ("A100-NODE", 2))])
    engine.schedule([gang("running", "team", (1, 4))], now=0)  # n1
    engine.set_node_health("n1", False)
    engine.set_node_health("n2", False)

    result = engine.schedule([gang("whole", "team", (1, 8)), gang("small", "team", (1, 2), at=1)], now=1)

    assert result.placements == ()
    # The running job keeps its placement on the bad node.
    assert engine.node_status("n1").used[0].job_id == "running"
    assert status(engine, "team") == {"A100-NODE": (2, 1, 0, 1, 0, 0)}
    assert "nodes n1, n2 are not Ready" in waiting(result)["whole"]

    engine.set_node_health("n2", True)
    assert status(engine, "team") == {"A100-NODE": (2, 1, 1, 0, 0, 0)}
    result = engine.schedule([gang("whole", "team", (1, 8)), gang("small", "team", (1, 2), at=1)], now=2)
    assert nodes_of(result, "whole") == ["n2"]
    assert "small" in waiting(result)


def test_vc_borrows_idle_cohort_cells_within_limits_and_owner_reclaims_them():
    engine = Engine(
        a100_cluster(rack("r1", "n1", "n2"), rack("r2", "n3", "n4")),
        [vc("owner", ("A100-NODE", 2), cohort="c"), vc("borrower", ("A100-NODE", 2), cohort="c", borrowing_limit=8)],
    )
    result = engine.schedule([gang("mine", "borrower", (2, 8), at=0), gang("extra", "borrower", (1, 8), at=1),
                              gang("too-much", "borrower", (1, 8), at=2)], now=0)

    assert len(placed(result, "extra")) == 1
    extra = next(a for a in result.placements if a.job_id == "extra")
    assert extra.pods[0].lent_by == "owner"
    assert "it borrows 8 of at most 8 leaf cells" in waiting(result)["too-much"]
    assert status(engine, "owner") == {"A100-NODE": (2, 0, 1, 0, 0, 1)}
    assert status(engine, "borrower") == {"A100-NODE": (2, 2, 0, 0, 1, 0)}

    result = settle(engine, [gang("back", "owner", (2, 8), priority=10)], now=5)

    assert [p.job_id for p in result.preemptions] == ["extra"]
    assert len(placed(result, "back")) == 2
    assert status(engine, "owner") == {"A100-NODE": (2, 2, 0, 0, 0, 0)}


def test_lending_limit_caps_what_a_vc_lends():
    engine = Engine(
        a100_cluster(rack("r1", "n1", "n2"), rack("r2", "n3", "n4")),
        [vc("owner", ("A100-NODE", 2), cohort="c", lending_limit=8), vc("borrower", ("A100-NODE", 2), cohort="c")],
    )
    result = engine.schedule([gang("mine", "borrower", (2, 8)), gang("b1", "borrower", (1, 8), at=1),
                              gang("b2", "borrower", (1, 8), at=2)], now=0)
    assert {a.job_id for a in result.placements} == {"mine", "b1"}
    assert "cohort 'c' has 0 unused A100 it could lend" in waiting(result)["b2"]


def test_idle_capacity_goes_to_the_vc_with_the_lowest_weighted_borrowed_share():
    engine = Engine(
        a100_cluster(rack("r1", "n1", "n2"), rack("r2", "n3", "n4")),
        [vc("lender", ("A100-NODE", 4), cohort="c"), vc("heavy", ("A100-SWITCH", 0), cohort="c", weight=1),
         vc("light", ("A100-SWITCH", 0), cohort="c", weight=3)],
    )
    heavy = [gang(f"h{i}", "heavy", (1, 8), at=i) for i in range(4)]
    light = [gang(f"l{i}", "light", (1, 8), at=10 + i) for i in range(4)]

    result = engine.schedule(heavy + light, now=20)

    # With weights 1 : 3 the four idle nodes split 1 : 3, although heavy's jobs are older.
    assert sorted(a.job_id for a in result.placements) == ["h0", "l0", "l1", "l2"]


def test_per_user_cap_inside_a_vc():
    engine = Engine(a100_cluster(rack("r1", "n1", "n2")), [vc("team", ("A100-NODE", 2), max_leaf_cells_per_user=8)])

    result = engine.schedule([gang("a1", "team", (1, 6), user="ann"), gang("a2", "team", (1, 4), user="ann", at=1),
                              gang("b1", "team", (1, 8), user="bob", at=2)], now=0)

    assert {a.job_id for a in result.placements} == {"a1", "b1"}
    assert waiting(result)["a2"] == (
        "user 'ann' already uses 6 of the 8 leaf cells allowed per user in VC 'team'; the job needs 4 more"
    )


def test_borrower_preempts_opportunistic_jobs_on_idle_lender_cells():
    engine = Engine(
        a100_cluster(rack("r1", "n1", "n2")),
        [vc("owner", ("A100-NODE", 1), cohort="c"), vc("borrower", ("A100-NODE", 1), cohort="c")],
    )
    engine.schedule([gang("mine", "borrower", (1, 8)), gang("opp", "owner", (1, 4), priority=-1, at=1)], now=0)

    result = settle(engine, [gang("extra", "borrower", (1, 8))], now=1)

    assert [(p.job_id, p.lazy) for p in result.preemptions] == [("opp", False)]
    assert next(a for a in result.placements if a.job_id == "extra").pods[0].lent_by == "owner"
