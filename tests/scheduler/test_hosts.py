"""Cells below the node level named in the configuration (a pinned pair of GPUs), and
hosts carrying two SKUs (each SKU's node holds a range of the host's devices)."""

from __future__ import annotations

import pytest

from scheduler import CellTypeSpec, ClusterSpec, ConfigurationError, Engine, PhysicalCellSpec, SkuSpec

from .helpers import A100, A100_TYPES, gang, nodes_of, placed, settle, status, vc, waiting

T4 = SkuSpec("T4", gpu=1, cpu=4, memory_mb=16_000)
# 4 A100 (2 pairs) and 4 T4 on each host.
TWO_SKU_TYPES = (
    CellTypeSpec("A100-PAIR", "A100", 2),
    CellTypeSpec("A100-NODE4", "A100-PAIR", 2, is_node=True),
    CellTypeSpec("T4-NODE4", "T4", 4, is_node=True),
)


def pinned_pair_cluster(*inside: PhysicalCellSpec) -> ClusterSpec:
    """Rack r1 of a1 (with ``inside`` listed under it) and a2."""
    return ClusterSpec(
        skus=(A100,),
        cell_types=A100_TYPES,
        physical_cells=(
            PhysicalCellSpec("A100-RACK", "r1", (
                PhysicalCellSpec("A100-NODE", "a1", inside), PhysicalCellSpec("A100-NODE", "a2"),
            )),
        ),
    )


PAIR = PhysicalCellSpec("A100-SWITCH", "a1/2-3", pinned_id="pair")


def two_sku_hosts(*extra: PhysicalCellSpec) -> ClusterSpec:
    """Hosts h1 and h2: A100 devices 0-3, T4 devices 4-7 (h2's A100 node named by the host alone)."""
    return ClusterSpec(
        skus=(A100, T4),
        cell_types=TWO_SKU_TYPES,
        physical_cells=(
            PhysicalCellSpec("A100-NODE4", "h1/0-3"),
            PhysicalCellSpec("T4-NODE4", "h1/4-7"),
            PhysicalCellSpec("A100-NODE4", "h2"),
            PhysicalCellSpec("T4-NODE4", "h2/4-7"),
            *extra,
        ),
    )


def devices_in_use(engine: Engine) -> list[tuple[str, int]]:
    return sorted((p.node, d) for a in engine.allocations() for p in a.pods for d in p.devices)


def test_a_pinned_pair_inside_a_node_runs_its_owners_jobs_and_idles_for_opportunistic_ones():
    engine = Engine(pinned_pair_cluster(PAIR), [
        vc("vision", pinned_cells=("pair",)), vc("speech", ("A100-NODE", 1)), vc("small", ("A100-SWITCH", 3)),
    ])

    result = engine.schedule([
        gang("mine", "vision", (1, 2), pinned="pair", at=1),
        gang("node", "speech", (1, 8), at=2),
        gang("pairs", "small", (3, 2), at=3),
    ], now=5)

    assert placed(result, "mine") == {("r0", 0): ("a1", (2, 3))}
    assert nodes_of(result, "node") == ["a2"]
    # The rest of a1 is the other VCs': three pairs, none of them the pinned one.
    assert sorted(d for _, ds in placed(result, "pairs").values() for d in ds) == [0, 1, 4, 5, 6, 7]
    assert engine.vc_status("vision").pinned_cells == ("pair",)
    alloc = engine.allocation("mine")
    assert alloc.pods[0].vc_cell == "a1/2-3" and alloc.pods[0].cell_chain == ("r1", "a1", "a1/2-3")
    # Restored, the pinned pair is the owner's again.
    copy = Engine(pinned_pair_cluster(PAIR), [
        vc("vision", pinned_cells=("pair",)), vc("speech", ("A100-NODE", 1)), vc("small", ("A100-SWITCH", 3)),
    ])
    report = copy.restore(engine.allocations())
    assert report.demoted == () and report.dropped == ()
    assert copy.allocations() == engine.allocations()

    # Idle, the pair runs an opportunistic job (everything else is busy), which the owner preempts.
    engine.release("mine")
    result = engine.schedule([gang("opp", "speech", (1, 2), priority=-1, at=6)], now=6)
    assert placed(result, "opp") == {("r0", 0): ("a1", (2, 3))}
    result = settle(engine, [gang("again", "vision", (1, 2), pinned="pair", at=7)], now=7)
    assert [p.job_id for p in result.preemptions] == ["opp"]
    assert placed(result, "again") == {("r0", 0): ("a1", (2, 3))}


def test_a_pinned_pair_is_no_quota_of_others_and_takes_no_job_not_naming_it():
    engine = Engine(pinned_pair_cluster(PAIR), [vc("vision", pinned_cells=("pair",)), vc("big", ("A100-NODE", 1))])
    # One whole node is left for quotas: a second one is refused, naming the shortfall.
    with pytest.raises(ConfigurationError, match="A100-NODE"):
        Engine(pinned_pair_cluster(PAIR), [vc("vision", pinned_cells=("pair",)), vc("big", ("A100-NODE", 2))])

    result = engine.schedule([gang("n", "big", (1, 8)), gang("plain", "vision", (1, 2), at=1)], now=1)

    assert nodes_of(result, "n") == ["a2"]
    # A job of the pair's owner that does not name it has no quota to run on.
    assert [(r.job_id, r.message) for r in result.rejected] == [
        ("plain", "a pod needs 2 A100 in one cell but the largest A100 cell VC 'vision' can use holds 0")
    ]
    assert status(engine, "big") == {"A100-NODE": (1, 1, 0, 0, 0, 0)}


@pytest.mark.parametrize("inside, message", [
    ((PhysicalCellSpec("A100-SWITCH", "a1/1-2", pinned_id="x"),),
     r"physical cell 'a1/1-2' is no cell of 'a1': its A100-SWITCH cells are a1/0-1, a1/2-3, a1/4-5, a1/6-7"),
    ((PhysicalCellSpec("A100", "a1/2", pinned_id="x"),), r"'a1/2' is no cell of 'a1': its A100-SWITCH cells are"),
    ((PhysicalCellSpec("A100", "a1/2-3", pinned_id="x"),),
     r"'a1/2-3' is a 'A100' but sits where a 'A100-SWITCH' belongs"),
    ((PhysicalCellSpec("A100-SWITCH", "a1/2-3", (PhysicalCellSpec("A100", "a1/5", pinned_id="x"),)),),
     r"'a1/5' is no cell of 'a1/2-3': its A100 cells are a1/2, a1/3"),
    ((PAIR, PhysicalCellSpec("A100-SWITCH", "a1/4-5", pinned_id="pair")), r"pinned cell id 'pair' is used twice"),
])
def test_a_cell_below_the_node_level_must_be_one_its_parent_holds(inside, message):
    with pytest.raises(ConfigurationError, match=message):
        Engine(pinned_pair_cluster(*inside), [vc("team", ("A100-SWITCH", 1))])


def test_a_cell_below_the_node_level_is_listed_under_its_node():
    cluster = ClusterSpec(skus=(A100,), cell_types=A100_TYPES,
                          physical_cells=(PhysicalCellSpec("A100-SWITCH", "a1/2-3", pinned_id="pair"),))
    with pytest.raises(ConfigurationError, match="'a1/2-3' is below the node level: list it under its node"):
        Engine(cluster, [])


def test_each_sku_of_a_host_gets_its_own_devices_of_that_host():
    engine = Engine(two_sku_hosts(), [vc("a", ("A100-NODE4", 2)), vc("t", ("T4-NODE4", 2))])

    result = engine.schedule([
        gang("big-a", "a", (2, 4)),
        gang("t4s", "t", (2, 4), sku="T4", at=1),
        gang("pair", "a", (1, 2), at=2),
    ], now=3)

    # Placements name the host and its device indices.
    assert placed(result, "big-a") == {("r0", 0): ("h1", (0, 1, 2, 3)), ("r0", 1): ("h2", (0, 1, 2, 3))}
    assert placed(result, "t4s") == {("r0", 0): ("h1", (4, 5, 6, 7)), ("r0", 1): ("h2", (4, 5, 6, 7))}
    assert "VC 'a' has 0 of 8 A100 free" in waiting(result)["pair"]
    used = devices_in_use(engine)
    assert used == sorted({(h, d) for h in ("h1", "h2") for d in range(8)})
    alloc = engine.allocation("t4s")
    assert [p.cell_chain for p in alloc.pods] == [("h1/4-7",), ("h2/4-7",)]
    assert engine.node_status("h1/4-7").host == "h1"
    assert [u.index for u in engine.node_status("h2/4-7").used] == [4, 5, 6, 7]
    assert [u.index for u in engine.node_status("h2").used] == [0, 1, 2, 3]
    assert status(engine, "t") == {"T4-NODE4": (2, 2, 0, 0, 0, 0)}

    copy = Engine(two_sku_hosts(), [vc("a", ("A100-NODE4", 2)), vc("t", ("T4-NODE4", 2))])
    report = copy.restore(engine.allocations())
    assert report.demoted == () and report.dropped == () and report.partial == ()
    assert copy.allocations() == engine.allocations()
    assert copy.node_status("h1/4-7") == engine.node_status("h1/4-7")
    # A device beyond the host's ranges is no device of it.
    stray = engine.allocation("t4s")
    stray = type(stray)(**{**stray.__dict__, "job_id": "stray", "pods": (
        type(stray.pods[0])(**{**stray.pods[0].__dict__, "devices": (8,)}),
    )})
    assert [i.job_id for i in Engine(two_sku_hosts(), []).restore([stray]).dropped] == ["stray"]


def test_a_hosts_health_and_foreign_use_reach_each_of_its_skus():
    engine = Engine(two_sku_hosts(), [vc("a", ("A100-NODE4", 1)), vc("t", ("T4-NODE4", 1))])

    engine.set_node_health("h1", False)
    result = engine.schedule([gang("a1", "a", (1, 4)), gang("t1", "t", (1, 4), sku="T4", at=1)], now=1)
    assert nodes_of(result, "a1") == ["h2"] and nodes_of(result, "t1") == ["h2"]
    assert not engine.node_status("h1/0-3").healthy and not engine.node_status("h1/4-7").healthy
    engine.set_node_health("h1", True)

    # Others' pods hold 6 devices of h1: taken from its highest range down.
    engine.set_node_foreign_use("h1", 6)
    assert [u.index for u in engine.node_status("h1/4-7").used] == [4, 5, 6, 7]
    assert [u.index for u in engine.node_status("h1/0-3").used] == [2, 3]
    engine.set_node_foreign_use("h1", 0)
    assert engine.node_status("h1/0-3").used == () and engine.node_status("h1/4-7").used == ()
    with pytest.raises(ValueError, match="unknown node 'h9'"):
        engine.set_node_health("h9", False)


@pytest.mark.parametrize("extra, message", [
    ((PhysicalCellSpec("T4-NODE4", "h1/2-5"),),
     r"nodes 'h1/0-3' \(A100, devices 0-3\) and 'h1/2-5' \(T4, devices 2-5\) of host 'h1' share devices"),
    ((PhysicalCellSpec("T4-NODE4", "h2/0-3"),),
     r"nodes 'h2' \(A100, devices 0-3\) and 'h2/0-3' \(T4, devices 0-3\) of host 'h2' share devices"),
    ((PhysicalCellSpec("T4-NODE4", "h3/4-6"),), r"node 'h3/4-6' names 3 devices of host 'h3', a T4-NODE4 has 4"),
    ((PhysicalCellSpec("T4-NODE4", "h3/x-4"),), r"node 'h3/x-4' is no node name nor a host's device range"),
    ((PhysicalCellSpec("T4-NODE4", "h3/7-4"),), r"'h3/7-4': the range's last device comes before its first"),
])
def test_a_hosts_device_ranges_fit_their_node_type_and_do_not_overlap(extra, message):
    with pytest.raises(ConfigurationError, match=message):
        Engine(two_sku_hosts(*extra), [])
