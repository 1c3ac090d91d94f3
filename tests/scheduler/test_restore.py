"""Restart and reconfiguration: the engine rebuilds its state from persisted placements."""

import gc
from dataclasses import replace

from scheduler import Engine, RestoreIssue

from .helpers import a100_cluster, gang, rack, status, vc


def busy_engine(vcs):
    engine = Engine(a100_cluster(rack("r1", "n1", "n2"), rack("r2", "n3", "n4")), vcs)
    engine.schedule([
        gang("a-prod", "a", (1, 8), priority=100, at=0),
        gang("a-test", "a", (2, 2), at=1),
        gang("b-sw", "b", (1, 2), at=2),
        gang("opp", "b", (1, 1), priority=-1, at=3),
        gang("borrow", "b", (1, 8), at=4),
    ], now=10)
    return engine


VCS = [vc("a", ("A100-NODE", 3), cohort="c"), vc("b", ("A100-SWITCH", 2), cohort="c")]


def snapshot(engine):
    return (
        engine.allocations(),
        {name: engine.vc_status(name) for name in ("a", "b")},
        {n: engine.node_status(n) for n in ("n1", "n2", "n3", "n4")},
    )


def test_restore_of_own_allocations_rebuilds_identical_state_and_decisions():
    engine = busy_engine(VCS)
    assert any(p.lent_by == "a" for a in engine.allocations() for p in a.pods)

    fresh = Engine(a100_cluster(rack("r1", "n1", "n2"), rack("r2", "n3", "n4")), VCS)
    report = fresh.restore(engine.allocations())

    assert (report.restored, report.demoted, report.dropped) == (5, (), ())
    assert snapshot(fresh) == snapshot(engine)
    queue = [gang("next", "a", (1, 8), at=20), gang("n2", "b", (1, 2), at=21)]
    assert fresh.schedule(queue, now=30) == engine.schedule(queue, now=30)


def test_restore_after_quota_cut_demotes_what_no_longer_fits():
    engine = busy_engine(VCS)
    smaller = [vc("a", ("A100-NODE", 1)), vc("b", ("A100-SWITCH", 2))]
    fresh = Engine(a100_cluster(rack("r1", "n1", "n2"), rack("r2", "n3", "n4")), smaller)

    report = fresh.restore(engine.allocations())

    # Without the cohort "b" can no longer borrow, and the higher-priority job of "a"
    # keeps the one node "a" still has.
    assert [issue.job_id for issue in report.demoted] == ["a-test", "borrow"]
    assert "no longer lend" in dict((i.job_id, i.reason) for i in report.demoted)["borrow"]
    allocs = {a.job_id: a for a in fresh.allocations()}
    assert allocs["a-test"].opportunistic and not allocs["a-prod"].opportunistic
    # Demoted jobs keep their devices.
    assert allocs["a-test"].pods == tuple(
        replace(p, vc_cell=None, lent_by=None, vc_entry=None)
        for p in next(a for a in engine.allocations() if a.job_id == "a-test").pods
    )
    assert status(fresh, "a") == {"A100-NODE": (1, 1, 0, 0, 0, 0)}


def test_restore_after_borrowing_limit_cut_demotes_the_borrower():
    engine = busy_engine(VCS)
    tighter = [vc("a", ("A100-NODE", 3), cohort="c"), vc("b", ("A100-SWITCH", 2), cohort="c", borrowing_limit=4)]
    fresh = Engine(a100_cluster(rack("r1", "n1", "n2"), rack("r2", "n3", "n4")), tighter)

    report = fresh.restore(engine.allocations())

    assert report.demoted == (RestoreIssue("borrow", "pod r0[0]: VC 'b' may borrow only 4 leaf cells"),)


def test_restore_drops_placements_on_nodes_that_are_gone():
    engine = busy_engine(VCS)
    where = {a.job_id: {p.node for p in a.pods} for a in engine.allocations()}
    smaller_cluster = a100_cluster(rack("r1", "n1", "n2"))
    fresh = Engine(smaller_cluster, [vc("a", ("A100-NODE", 1)), vc("b", ("A100-SWITCH", 2))])

    report = fresh.restore(engine.allocations())

    gone = sorted(job for job, nodes in where.items() if nodes & {"n3", "n4"})
    assert [i.job_id for i in report.dropped] == gone
    assert all("no longer exists" in i.reason for i in report.dropped)
    assert {a.job_id for a in fresh.allocations()} == set(where) - set(gone)


def test_building_and_restoring_leave_the_garbage_collector_as_they_found_it():
    assert gc.isenabled()
    engine = busy_engine(VCS)
    engine.restore(engine.allocations())
    assert gc.isenabled()
    gc.disable()
    try:
        busy_engine(VCS).restore(())
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_restore_keeps_a_gang_whose_node_vanished_on_the_nodes_that_remain():
    engine = Engine(a100_cluster(rack("r1", "n1", "n2")), [vc("team", ("A100-NODE", 2))])
    engine.schedule([gang("pair", "team", (2, 8))], now=0)
    assert sorted(p.node for p in engine.allocations()[0].pods) == ["n1", "n2"]
    # n2 renamed n3: the pod on n1 still runs.
    renamed = a100_cluster(rack("r1", "n1", "n3"))
    fresh = Engine(renamed, [vc("team", ("A100-NODE", 2))])

    report = fresh.restore(engine.allocations())

    assert (report.restored, report.dropped, report.demoted) == (1, (), ())
    assert report.partial == (RestoreIssue("pair", "node 'n2' no longer exists"),)
    [alloc] = fresh.allocations()
    assert [(p.node, p.devices, p.vc_cell) for p in alloc.pods] == [("n1", tuple(range(8)), "n1")]
    assert [u.job_id for u in fresh.node_status("n1").used] == ["pair"] * 8
    assert status(fresh, "team") == {"A100-NODE": (2, 1, 1, 0, 0, 0)}
    # Its devices stay taken until the job ends.
    blocked = fresh.schedule([gang("next", "team", (2, 8), at=1)], now=10)
    assert blocked.placements == ()
    fresh.release("pair")
    assert len(fresh.schedule([gang("next", "team", (2, 8), at=1)], now=20).placements) == 1
