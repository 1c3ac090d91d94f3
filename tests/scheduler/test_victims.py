"""Few victims: a VC's cells stay together, and a gang that must preempt may span the
racks of one chain when that stops fewer gangs than any one rack would."""

from .helpers import a100_cluster, gang, nodes_of, rack, settle, vc
from scheduler import Engine


def test_a_vcs_new_cells_go_next_to_its_others_and_vcs_start_apart():
    engine = Engine(a100_cluster(rack("r1", "a1", "a2"), rack("r2", "a3", "a4")),
                    [vc("x", ("A100-NODE", 2)), vc("y", ("A100-NODE", 2))])
    where = {}
    for n, name in enumerate(["x1", "y1", "x2", "y2"]):
        result = engine.schedule([gang(name, name[0], (1, 8), at=n)], now=n)
        where[name] = nodes_of(result, name)[0]
    # First fit would interleave them (x on a1 and a3, y on a2 and a4).
    assert {where["x1"], where["x2"]} == {"a1", "a2"}
    assert {where["y1"], where["y2"]} == {"a3", "a4"}


def test_a_gang_spans_the_racks_of_its_chain_when_that_stops_fewer_gangs():
    engine = Engine(a100_cluster(rack("r1", "a1", "a2"), rack("r2", "a3", "a4")), [vc("v", ("A100-NODE", 4))])
    # One 8-GPU job and eight 1-GPU jobs in each rack.
    queue = [gang("big1", "v", (1, 8), at=0)] + [gang(f"s1-{i}", "v", (1, 1), at=1 + i) for i in range(8)]
    queue += [gang("big2", "v", (1, 8), at=10)] + [gang(f"s2-{i}", "v", (1, 1), at=11 + i) for i in range(8)]
    for g in queue:
        engine.schedule([g], now=g.submitted_at)
    nodes = {a.job_id: a.pods[0].node for a in engine.allocations()}
    assert nodes["big1"] == "a1" and nodes["big2"] == "a3"
    assert {nodes[f"s1-{i}"] for i in range(8)} == {"a2"} and {nodes[f"s2-{i}"] for i in range(8)} == {"a4"}

    result = settle(engine, [gang("prod", "v", (2, 8), priority=100, at=100)], now=100)

    # Inside one rack it would stop 9 gangs; across the two racks, 2.
    assert sorted(p.job_id for p in result.preemptions) == ["big1", "big2"]
    assert sorted({p.node for a in result.placements for p in a.pods}) == ["a1", "a3"]
