"""Devices held by pods the engine does not manage show as used and get no pod."""

from scheduler import Engine
from scheduler.engine import FOREIGN

from .helpers import a100_cluster, gang, nodes_of, placed, rack, vc, waiting


def engine_of_two_nodes():
    return Engine(a100_cluster(rack("r1", "n1", "n2")), [vc("team", ("A100-NODE", 2))])


def test_devices_held_by_others_show_as_used_and_get_no_pod():
    engine = engine_of_two_nodes()
    engine.set_node_foreign_use("n1", 3)

    used = engine.node_status("n1").used
    assert [(u.index, u.job_id) for u in used] == [(5, FOREIGN), (6, FOREIGN), (7, FOREIGN)]
    # A whole node only fits on n2; then 5 devices are left on n1, and 6 do not fit anywhere.
    result = engine.schedule([gang("whole", "team", (1, 8)), gang("five", "team", (1, 5), at=1),
                              gang("more", "team", (1, 1), at=2)], now=0)
    assert nodes_of(result, "whole") == ["n2"]
    assert placed(result, "five")[("r0", 0)] == ("n1", (0, 1, 2, 3, 4))
    assert "more" in waiting(result)
    assert all(u.job_id != FOREIGN or u.index >= 5 for u in engine.node_status("n1").used)


def test_others_leaving_frees_the_devices_and_a_shortfall_is_taken_as_jobs_leave():
    engine = engine_of_two_nodes()
    result = engine.schedule([gang("six", "team", (1, 6))], now=0)
    node = nodes_of(result, "six")[0]
    # Others now hold 4 devices of that node: only the 2 free ones can be theirs for now.
    engine.set_node_foreign_use(node, 4)
    assert sum(u.job_id == FOREIGN for u in engine.node_status(node).used) == 2
    engine.release("six")
    assert sum(u.job_id == FOREIGN for u in engine.node_status(node).used) == 4
    assert len(engine.node_status(node).used) == 4
    # They leave: every device is free again, and a whole-node gang fits there.
    engine.set_node_foreign_use(node, 0)
    assert engine.node_status(node).used == ()
    other = "n2" if node == "n1" else "n1"
    engine.set_node_foreign_use(other, 1)
    assert nodes_of(engine.schedule([gang("whole", "team", (1, 8))], now=1), "whole") == [node]
