"""Preemption that waits for its victims: planned, committed, then placed once the
victims' pods are gone; re-decided or abandoned on the way; rebuilt by restore. And
victims chosen locally: fewest and cheapest, all inside the preemptor's placement."""

from scheduler import Allocation, CellTypeSpec, ClusterSpec, Engine, PhysicalCellSpec, PodPlacement, Preemption, SkuSpec

from .helpers import a100_cluster, gang, nodes_of, rack, settle, vc, waiting

G = SkuSpec("G", gpu=1, cpu=8, memory_mb=64_000)


def pair():
    """One pair of 16-device nodes n1/n2 (a rack of two), with spare standalone node s1."""
    return ClusterSpec(
        skus=(G,),
        cell_types=(CellTypeSpec("G-NODE", "G", 16, is_node=True), CellTypeSpec("PAIR", "G-NODE", 2)),
        physical_cells=(
            PhysicalCellSpec("PAIR", "p", (PhysicalCellSpec("G-NODE", "n1"), PhysicalCellSpec("G-NODE", "n2"))),
            PhysicalCellSpec("G-NODE", "s1"),
        ),
    )


def g(job_id, *roles, **kw):
    return gang(job_id, "team", *roles, sku="G", **kw)


def team_with_a_running():
    engine = Engine(pair(), [vc("team", ("PAIR.G-NODE", 2)), vc("other", ("G-NODE", 1))])
    engine.schedule([g("A", (2, 16), priority=1)], now=0)
    assert sorted(p.node for p in engine.allocations()[0].pods) == ["n1", "n2"]
    return engine


def states(engine):
    return {a.job_id: a.state for a in engine.allocations()}


def test_the_preemptor_waits_for_its_victims_and_no_one_takes_their_cells_meanwhile():
    engine = team_with_a_running()
    b = g("B", (1, 16), priority=2, at=1)

    planned = engine.schedule([b], now=10)
    # Decided, not yet carried out: A runs on, B holds a reservation and waits.
    assert planned.preemptions == () and planned.placements == ()
    [reservation] = planned.reservations
    assert (reservation.job_id, reservation.kind, reservation.victims, reservation.committed) == (
        "B", "preemption", ("A",), False)
    assert waiting(planned)["B"] == (
        f"preempting job A to run on {reservation.nodes[0]}: they are told to stop at the next cycle if that still makes room"
    )
    assert states(engine) == {"A": "running", "B": "preempting"}

    c = g("C", (1, 16), priority=1, at=2)
    committed = engine.schedule([b, c], now=20)
    assert committed.preemptions == (Preemption("A", lazy=False, by_job="B"),)
    assert committed.placements == ()
    assert states(engine) == {"A": "terminating", "B": "preempting"}
    # A keeps every device until its pods are gone; C (equal priority to A) waits.
    assert len(engine.node_status("n1").used) == len(engine.node_status("n2").used) == 16
    still = engine.schedule([b, c], now=30)
    assert still.placements == () and still.preemptions == ()
    assert waiting(still)["B"].startswith("preempting: holds its cells on ")

    engine.release("A")  # its pods are gone
    done = engine.schedule([b, c], now=40)

    assert [a.job_id for a in done.placements] == ["B", "C"]
    assert nodes_of(done, "B") == list(reservation.nodes)
    assert done.reservations == ()


def test_cancelling_the_preemptor_before_the_commit_leaves_the_victim_running():
    engine = team_with_a_running()
    engine.schedule([g("B", (1, 16), priority=2, at=1)], now=10)

    result = engine.schedule([], now=20)  # B was cancelled

    assert result.preemptions == () and result.reservations == ()
    assert states(engine) == {"A": "running"}
    assert engine.allocations()[0].priority == 1


def test_cancelling_the_preemptor_after_the_commit_frees_its_quota():
    engine = team_with_a_running()
    b = g("B", (1, 16), priority=2, at=1)
    engine.schedule([b], now=10)
    engine.schedule([b], now=20)
    assert states(engine) == {"A": "terminating", "B": "preempting"}

    engine.release("B")  # deleted while preempting

    assert states(engine) == {"A": "terminating"}
    engine.release("A")
    assert len(engine.schedule([g("D", (2, 16), at=3)], now=30).placements) == 1


def test_a_reserved_node_going_bad_makes_the_preemptor_decide_again():
    engine = team_with_a_running()
    b = g("B", (1, 16), priority=2, at=1)
    first = engine.schedule([b], now=10).reservations[0].nodes[0]
    other = "n2" if first == "n1" else "n1"

    engine.set_node_health(first, False)
    again = engine.schedule([b], now=20)

    # Still preempting A (it holds the other node too), now planned on the healthy node.
    assert again.preemptions == ()
    assert [(r.nodes, r.committed) for r in again.reservations] == [((other,), False)]


def test_room_appearing_elsewhere_places_the_preemptor_without_preempting():
    engine = Engine(pair(), [vc("team", ("G-NODE", 2)), vc("other", ("G-NODE", 1))])
    engine.schedule([g("A", (1, 16), priority=1), gang("O", "other", (1, 16), sku="G", at=1)], now=0)
    engine.schedule([g("A2", (1, 16), priority=1, at=2)], now=1)
    b = g("B", (1, 16), priority=2, at=3)
    assert engine.schedule([b], now=10).reservations[0].victims in (("A",), ("A2",))

    engine.release("A2")  # ended on its own before the preemption was carried out
    result = engine.schedule([b], now=20)

    assert result.preemptions == ()
    assert [a.job_id for a in result.placements] == ["B"]
    assert states(engine) == {"A": "running", "B": "running", "O": "running"}


def test_a_higher_priority_gang_takes_over_a_lower_preemptors_reservation():
    engine = team_with_a_running()
    b = g("B", (1, 16), priority=2, at=1)
    engine.schedule([b], now=10)

    urgent = g("U", (2, 16), priority=50, at=2)
    result = engine.schedule([b, urgent], now=20)

    # U needs both nodes: it plans to preempt A itself; B's plan is abandoned and B waits.
    assert result.preemptions == ()
    assert [(r.job_id, r.victims) for r in result.reservations] == [("U", ("A",))]
    assert "B" in waiting(result)


def test_restore_rebuilds_preemptions_in_progress():
    for cycles in (1, 2):
        engine = team_with_a_running()
        b, c = g("B", (1, 16), priority=2, at=1), g("C", (1, 16), priority=1, at=2)
        for i in range(cycles):
            engine.schedule([b], now=10 + i)
        copy = Engine(pair(), [vc("team", ("PAIR.G-NODE", 2)), vc("other", ("G-NODE", 1))])

        report = copy.restore(engine.allocations())

        assert (report.dropped, report.demoted) == ((), ())
        assert copy.allocations() == engine.allocations()
        assert copy.vc_status("team") == engine.vc_status("team")
        assert copy.schedule([b, c], now=30) == engine.schedule([b, c], now=30)
        copy.release("A")
        engine.release("A")
        assert copy.schedule([b, c], now=40) == engine.schedule([b, c], now=40)


def test_the_victim_is_the_one_job_on_a_node_rather_than_many_recent_ones_elsewhere():
    engine = Engine(a100_cluster(rack("r1", "n1", "n2"), rack("r2", "n3", "n4")), [vc("team", ("A100-NODE", 4))])
    engine.schedule([gang("old", "team", (1, 8), priority=-1)], now=0)
    # Newer opportunistic jobs on every other node, a few GPUs each.
    engine.schedule([gang(f"new{i}", "team", (1, 2), priority=-1, at=i) for i in range(12)], now=100)
    assert len(engine.allocations()) == 13  # the cluster is full

    result = settle(engine, [gang("prod", "team", (1, 8), priority=100)], now=200)

    assert result.preemptions == (Preemption("old", lazy=False, by_job="prod"),)
    assert len(result.placements) == 1


def opportunistic_on(job_id, *pods, started_at=0.0):
    """A running opportunistic job's persisted placement: pods as (node, first device, count)."""
    return Allocation(
        job_id=job_id, vc="team", user="u", priority=-1, opportunistic=True, lazy_preempted=False,
        started_at=started_at,
        pods=tuple(
            PodPlacement("r0", i, node, tuple(range(first, first + count)), (node,)) for i, (node, first, count) in enumerate(pods)
        ),
    )


def test_a_gang_spanning_nodes_preempts_inside_one_rack_and_only_jobs_in_its_way():
    engine = Engine(a100_cluster(rack("r1", "n1", "n2"), rack("r2", "n3", "n4")), [vc("team", ("A100-NODE", 4))])
    engine.restore([
        # r1: two jobs per node, the most recently started of all.
        *(opportunistic_on(f"a{i}", (n, first, 4), started_at=50.0) for i, (n, first) in
          enumerate([("n1", 0), ("n1", 4), ("n2", 0), ("n2", 4)])),
        # r2: one job per node and a wide gang over both nodes' other halves.
        opportunistic_on("b0", ("n3", 0, 4)),
        opportunistic_on("b1", ("n4", 0, 4)),
        opportunistic_on("wide", ("n3", 4, 4), ("n4", 4, 4)),
    ])

    result = settle(engine, [gang("prod", "team", (2, 8), priority=100)], now=100)

    # r2 costs three gangs, r1 four (though more recent ones): r2, and nothing of r1 is touched.
    assert sorted(p.job_id for p in result.preemptions) == ["b0", "b1", "wide"]
    assert nodes_of(result, "prod") == ["n3", "n4"]


def test_a_gang_whose_cells_the_preemptor_does_not_use_is_never_killed():
    engine = Engine(a100_cluster(rack("r1", "n1", "n2"), rack("r2", "n3", "n4")), [vc("team", ("A100-NODE", 4))])
    engine.restore([
        # A wide gang with one pod on each rack, alone on n1; n2 is busy, r2 full.
        opportunistic_on("wide", ("n1", 0, 2), ("n3", 0, 2)),
        opportunistic_on("n2-job", ("n2", 0, 8)),
        opportunistic_on("n3-rest", ("n3", 2, 6)),
        opportunistic_on("n4-job", ("n4", 0, 8)),
    ])

    result = settle(engine, [gang("prod", "team", (1, 8), priority=100)], now=100)

    # One victim on n1 (wide) frees the node; its pod on n3 is in no one's way but goes with it (a gang).
    assert [p.job_id for p in result.preemptions] == ["wide"]
    assert nodes_of(result, "prod") == ["n1"]
