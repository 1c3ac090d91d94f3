"""Placement scenarios: packing, topology, opportunistic jobs, pinned cells, SKUs."""

import pytest

from scheduler import CellTypeSpec, ClusterSpec, ConfigurationError, Engine, GangRequest, PhysicalCellSpec, PodRequest

from .helpers import A100, A100_TYPES, a100_cluster, gang, mixed_cluster, nodes_of, placed, rack, settle, status, vc, waiting


def test_small_jobs_pack_onto_one_node_and_lowest_common_switch():
    engine = Engine(a100_cluster(rack("r1", "n1", "n2")), [vc("team", ("A100-NODE", 2))])

    result = engine.schedule([gang("j1", "team", (1, 1), at=1), gang("j2", "team", (1, 2), at=2),
                              gang("j3", "team", (1, 1), at=3)], now=10)

    assert placed(result, "j1") == {("r0", 0): ("n1", (0,))}
    # Two GPUs under one PCIe switch rather than the lone free GPU 1 plus another.
    assert placed(result, "j2") == {("r0", 0): ("n1", (2, 3))}
    assert placed(result, "j3") == {("r0", 0): ("n1", (1,))}
    assert status(engine, "team") == {"A100-NODE": (2, 1, 1, 0, 0, 0)}
    j2 = next(a for a in result.placements if a.job_id == "j2").pods[0]
    # What the database stores: the path down to the smallest cell holding the devices,
    # and the physical cell the VC's virtual node cell is bound to.
    assert (j2.cell_chain, j2.vc_cell, j2.lent_by) == (("r1", "n1", "n1/2-3"), "n1", None)


def test_multi_pod_gang_goes_to_one_node_that_holds_it_all():
    engine = Engine(a100_cluster(rack("r1", "n1", "n2")), [vc("team", ("A100-NODE", 2))])
    engine.schedule([gang("a", "team", (1, 5)), gang("b", "team", (1, 4), at=1)], now=0)
    assert status(engine, "team") == {"A100-NODE": (2, 2, 0, 0, 0, 0)}  # 3 and 4 GPUs left

    result = engine.schedule([gang("g", "team", (1, 2), (2, 1))], now=1)

    # Tightest fit for the first pod alone would be the node with 3 left, and split the gang.
    assert nodes_of(result, "g") == [nodes_of_job(engine, "b")]


def test_multi_node_gang_stays_in_one_rack():
    engine = Engine(
        a100_cluster(rack("r1", "n1", "n2"), rack("r2", "n3", "n4")),
        [vc("big", ("A100-NODE", 3)), vc("other", ("A100-NODE", 1))],
    )
    engine.schedule([gang("first", "other", (1, 8))], now=0)  # takes n1, splitting r1

    result = engine.schedule([gang("pair", "big", (2, 8))], now=1)

    assert nodes_of(result, "pair") == ["n3", "n4"]


def test_eight_gpu_job_avoids_node_where_it_would_need_preemption():
    engine = Engine(a100_cluster(rack("r1", "n1", "n2")), [vc("team", ("A100-NODE", 2))])
    engine.schedule([gang("opp", "team", (1, 1), priority=-1)], now=0)
    assert placed_nodes(engine, "opp") == ["n1"]

    result = engine.schedule([gang("whole", "team", (1, 8))], now=1)

    assert placed(result, "whole") == {("r0", 0): ("n2", tuple(range(8)))}
    assert result.preemptions == ()


def placed_nodes(engine, job_id):
    return sorted({p.node for a in engine.allocations() if a.job_id == job_id for p in a.pods})


def nodes_of_job(engine, job_id):
    (node,) = placed_nodes(engine, job_id)
    return node


def test_opportunistic_jobs_avoid_nodes_with_guaranteed_pods_and_pack_together():
    engine = Engine(a100_cluster(rack("r1", "n1", "n2"), rack("r2", "n3", "n4")), [vc("team", ("A100-NODE", 4))])
    engine.schedule([gang("g", "team", (1, 1))], now=0)  # n1

    result = engine.schedule([gang("o1", "team", (1, 2), priority=-1, at=1),
                              gang("o2", "team", (1, 1), priority=-1, at=2)], now=1)

    assert nodes_of(result, "o1") == ["n2"]
    assert nodes_of(result, "o2") == ["n2"]  # joins the node already running opportunistic work
    alloc = next(a for a in result.placements if a.job_id == "o1")
    assert alloc.opportunistic and alloc.pods[0].vc_cell is None
    # Opportunistic use is outside the VC's accounting.
    assert status(engine, "team") == {"A100-NODE": (4, 1, 3, 0, 0, 0)}


def test_pinned_cell_runs_only_jobs_naming_it():
    engine = Engine(mixed_cluster(), [vc("vision", ("A100-NODE", 1), pinned_cells=("pin-a5",)),
                                      vc("speech", ("A100-NODE", 3))])

    result = engine.schedule([
        gang("pinned", "vision", (1, 4), pinned="pin-a5", at=1),
        gang("plain", "vision", (1, 8), at=2),
        gang("other", "speech", (3, 8), at=3),
        gang("opp", "speech", (1, 1), priority=-1, at=4),
    ], now=5)

    assert nodes_of(result, "pinned") == ["a5"]
    assert "a5" not in nodes_of(result, "plain")
    assert "a5" not in nodes_of(result, "other")
    # Every unpinned A100 node is taken; as in HiveD, an opportunistic job may use the
    # pinned node's idle devices (its owner preempts it when it needs them).
    assert nodes_of(result, "opp") == ["a5"]
    assert engine.vc_status("vision").pinned_cells == ("pin-a5",)


def test_an_opportunistic_job_on_an_idle_pinned_cell_gives_way_to_the_cells_owner():
    engine = Engine(mixed_cluster(), [vc("vision", ("A100-NODE", 1), pinned_cells=("pin-a5",)),
                                      vc("speech", ("A100-NODE", 3))])
    engine.schedule([gang("plain", "vision", (1, 8)), gang("other", "speech", (3, 8), at=1)], now=1)
    # Only the pinned node is idle: the opportunistic gang runs there, outside any quota.
    result = engine.schedule([gang("opp", "speech", (1, 8), priority=-1, at=2)], now=2)
    assert nodes_of(result, "opp") == ["a5"]
    assert status(engine, "vision") == {"A100-NODE": (1, 1, 0, 0, 0, 0)}
    # The owner's job naming the cell preempts it.
    result = settle(engine, [gang("mine", "vision", (1, 8), pinned="pin-a5", at=4)], now=4)
    assert [p.job_id for p in result.preemptions] == ["opp"]
    assert nodes_of(result, "mine") == ["a5"]


def test_sixteen_gpu_nodes_and_cpu_nodes_form_their_own_chains():
    engine = Engine(mixed_cluster(), [
        vc("nlp", ("V100-SOCKET", 1), ("V100-SWITCH", 2), ("CPU-NODE", 1)),
        vc("vision", ("V100-NODE", 1)),
    ])

    result = engine.schedule([
        gang("socket", "nlp", (1, 8), sku="V100", at=1),
        gang("pair", "nlp", (1, 2), sku="V100", at=2),
        gang("cpu", "nlp", (2, 3), sku="CPU", at=3),
        gang("node", "vision", (1, 16), sku="V100", at=4),
    ], now=5)

    socket_node, socket_devices = placed(result, "socket")[("r0", 0)]
    assert socket_devices == tuple(range(8)) or socket_devices == tuple(range(8, 16))
    pair_node, pair_devices = placed(result, "pair")[("r0", 0)]
    assert len(pair_devices) == 2 and pair_devices[1] == pair_devices[0] + 1 and pair_devices[0] % 2 == 0
    assert nodes_of(result, "cpu") == ["c1"]
    # The switches come out of the node the socket split, so vision's node stays whole.
    assert pair_node == socket_node
    assert placed(result, "node")[("r0", 0)] == ("v2" if socket_node == "v1" else "v1", tuple(range(16)))
    assert status(engine, "nlp") == {
        "V100-SWITCH": (2, 1, 1, 0, 0, 0), "V100-SOCKET": (1, 1, 0, 0, 0, 0), "CPU-NODE": (1, 1, 0, 0, 0, 0),
    }


def test_job_without_sku_runs_on_a_fitting_sku_of_its_vc():
    engine = Engine(mixed_cluster(), [vc("nlp", ("V100-NODE", 1), ("CPU-NODE", 1), ("A100-NODE", 1))])
    gpu_job = GangRequest("gpu", "nlp", "alice", 10, (PodRequest("w", 0, None, 0, gpu=2, cpu=10),), 0.0)
    cpu_job = GangRequest("cpu", "nlp", "alice", 10, (PodRequest("w", 0, None, 0, cpu=10, memory_mb=1000),), 0.0)

    result = engine.schedule([gpu_job, cpu_job], now=1)

    # A100 comes first in the cluster's SKU order; 10 cpu is within 2 A100 leaves (24 cpu).
    # No VC owns pin-a5, so it is an ordinary free node, taken before splitting a rack.
    assert placed(result, "gpu")[("w", 0)] == ("a5", (0, 1))
    assert placed(result, "cpu")[("w", 0)] == ("c1", (0, 1, 2))  # ceil(10 / 4) CPU leaves


def test_job_without_sku_falls_back_to_next_sku_when_first_is_full():
    engine = Engine(mixed_cluster(), [vc("nlp", ("V100-NODE", 1), ("A100-NODE", 1))])
    engine.schedule([gang("fill", "nlp", (1, 8))], now=0)
    job = GangRequest("any", "nlp", "alice", 10, (PodRequest("w", 0, None, 1, gpu=1),), 0.0)

    result = engine.schedule([job], now=1)

    assert nodes_of(result, "any") == ["v1"]


def test_one_cycle_admits_every_gang_that_fits_from_every_vc():
    engine = Engine(
        a100_cluster(rack("r1", "n1", "n2"), rack("r2", "n3", "n4")),
        [vc(f"vc{i}", ("A100-NODE", 1)) for i in range(4)],
    )
    queue = [gang(f"vc{i}-{j}", f"vc{i}", (1, 2), at=j) for i in range(4) for j in range(4)]

    result = engine.schedule(queue, now=10)

    assert len(result.placements) == 16 and result.waiting == ()


def test_racks_of_different_sizes_share_a_chain():
    cluster = ClusterSpec(
        skus=(A100,),
        cell_types=A100_TYPES + (CellTypeSpec("A100-RACK3", "A100-NODE", 3),),
        physical_cells=(
            rack("r2", "n1", "n2"),
            PhysicalCellSpec("A100-RACK3", "r3", tuple(PhysicalCellSpec("A100-NODE", f"m{i}") for i in range(3))),
        ),
    )
    engine = Engine(cluster, [vc("wide", ("A100-RACK3", 1)), vc("narrow", ("A100-NODE", 2))])

    result = engine.schedule([gang("w", "wide", (3, 8)), gang("n", "narrow", (2, 8), at=1)], now=0)

    assert nodes_of(result, "w") == ["m0", "m1", "m2"]
    assert nodes_of(result, "n") == ["n1", "n2"]
    assert [(r.cell_type, r.level, r.used) for r in engine.vc_status("wide").cells] == [("A100-RACK3", 4, 1)]


def test_cell_type_graph_errors_are_refused():
    bad_types = A100_TYPES + (CellTypeSpec("A100-PAIR", "A100", 2),)  # a second line below the node
    with pytest.raises(ConfigurationError, match="'A100-PAIR' of chain A100 is neither above nor inside"):
        Engine(ClusterSpec((A100,), bad_types, (PhysicalCellSpec("A100-PAIR", "p1"), rack("r1", "n1", "n2"))), [])
    two_nodes = A100_TYPES + (CellTypeSpec("A100-BIG", "A100-NODE", 2, is_node=True),)
    with pytest.raises(ConfigurationError, match="exactly one node-level cell type, its cells use 2"):
        Engine(ClusterSpec((A100,), two_nodes, (PhysicalCellSpec("A100-BIG", "b1"), rack("r1", "n1", "n2"))), [])
    with pytest.raises(ConfigurationError, match="needs 2 children, has 1"):
        Engine(a100_cluster(rack("r1", "n1")), [])
    with pytest.raises(ConfigurationError, match="node 'n1' is defined twice|address 'n1' is used twice"):
        Engine(a100_cluster(rack("r1", "n1", "n2"), rack("r2", "n1", "n3")), [])
