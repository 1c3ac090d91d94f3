"""Chains (HiveD's top-level cell types): quota entries bound to a chain, gangs kept
inside one chain, bad cells counted per VC, unused cell types, leaf-level quotas."""

import re

import pytest

from scheduler import (
    Allocation,
    CellTypeSpec,
    ClusterSpec,
    ConfigurationError,
    Engine,
    PhysicalCellSpec,
    PodPlacement,
    SkuSpec,
    validate_configuration,
)

from .helpers import gang, nodes_of, vc, waiting

G = SkuSpec("G", gpu=1, cpu=8, memory_mb=64_000)
# 16-device nodes, in racks of 3 and of 4, and standalone.
G_TYPES = (
    CellTypeSpec("G-NODE", "G", 16, is_node=True),
    CellTypeSpec("RACK3", "G-NODE", 3),
    CellTypeSpec("RACK4", "G-NODE", 4),
)


def node(name):
    return PhysicalCellSpec("G-NODE", name)


def rack_of(kind, name, *nodes):
    return PhysicalCellSpec(kind, name, tuple(node(n) for n in nodes))


def four_chains():
    """Two standalone nodes s1 s2, a 3-node rack r1..r3, a 4-node rack q1..q4."""
    return ClusterSpec(
        skus=(G,),
        cell_types=G_TYPES,
        physical_cells=(
            node("s1"), node("s2"), rack_of("RACK3", "rack3", "r1", "r2", "r3"),
            rack_of("RACK4", "rack4", "q1", "q2", "q3", "q4"),
        ),
    )


def one_rack():
    return ClusterSpec(skus=(G,), cell_types=G_TYPES, physical_cells=(rack_of("RACK3", "rack3", "r1", "r2", "r3"),))


def rows(engine, name):
    """{(chain, cell type): (guaranteed, used, free, bad)}"""
    return {(r.chain, r.cell_type): (r.guaranteed, r.used, r.free, r.bad) for r in engine.vc_status(name).cells}


def test_an_entry_naming_its_chain_binds_only_cells_of_that_chain():
    vcs = [vc("vc1", ("RACK3.G-NODE", 2)), vc("vc2", ("RACK3.G-NODE", 1)), vc("pool", ("G-NODE", 4))]
    engine = Engine(four_chains(), vcs)
    # The pool's jobs arrive first and would take the rack's nodes if nothing held them.
    first = engine.schedule([gang(f"p{i}", "pool", (1, 16), sku="G", at=i) for i in range(4)], now=0)
    assert len(first.placements) == 4

    result = engine.schedule(
        [gang("a", "vc1", (1, 16), sku="G"), gang("b", "vc1", (1, 16), sku="G", at=1), gang("c", "vc2", (1, 16), sku="G", at=2)],
        now=10,
    )

    assert {n for j in ("a", "b", "c") for n in nodes_of(result, j)} == {"r1", "r2", "r3"}
    assert rows(engine, "vc1") == {("RACK3", "G-NODE"): (2, 2, 0, 0)}
    alloc = {a.job_id: a for a in engine.allocations()}
    assert alloc["a"].pods[0].vc_entry == "RACK3.G-NODE"
    assert alloc["p0"].pods[0].vc_entry == "G-NODE"


def test_a_chain_cannot_back_more_than_it_holds():
    with pytest.raises(ConfigurationError) as caught:
        validate_configuration(four_chains(), [vc("vc1", ("RACK3.G-NODE", 3)), vc("vc2", ("RACK3.G-NODE", 1))])
    assert str(caught.value) == (
        "VC 'vc1' and others need 4 cells of G-NODE (level 2, chain RACK3 of G) but the cluster can supply 3: short by 1"
    )
    # Entries naming no chain are backed by what the chains' own entries leave.
    with pytest.raises(ConfigurationError, match="short by 1"):
        validate_configuration(four_chains(), [vc("a", ("RACK4.G-NODE", 4)), vc("b", ("G-NODE", 6))])
    validate_configuration(four_chains(), [vc("a", ("RACK4.G-NODE", 4)), vc("b", ("G-NODE", 5))])
    validate_configuration(four_chains(), [vc("a", ("RACK4.RACK4", 1)), vc("b", ("RACK3", 1)), vc("c", ("G-NODE", 2))])


@pytest.mark.parametrize(
    "entry, message",
    [
        ("RACK5.G-NODE", "chain 'RACK5', which is not a top-level cell type of SKU G (its chains: G-NODE, RACK3, RACK4)"),
        ("RACK3.RACK4", "chain 'RACK3' has no RACK4 cells (its types: RACK3, G-NODE, G)"),
        ("RACK3.NODE", "unknown cell type 'NODE'"),
    ],
)
def test_entries_naming_a_wrong_chain_are_refused(entry, message):
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        Engine(four_chains(), [vc("a", (entry, 1))])


def test_bad_cells_of_a_chain_show_in_the_vcs_that_named_it():
    engine = Engine(four_chains(), [vc("vc1", ("RACK3.G-NODE", 2)), vc("vc2", ("RACK3.G-NODE", 1))])
    for name in ("r1", "r2", "r3"):
        engine.set_node_health(name, False)

    # The standalone nodes and the 4-node rack are healthy, but not where these VCs' cells come from.
    assert rows(engine, "vc1") == {("RACK3", "G-NODE"): (2, 0, 0, 2)}
    assert rows(engine, "vc2") == {("RACK3", "G-NODE"): (1, 0, 0, 1)}


def test_bad_cells_are_counted_for_each_vc_on_its_own():
    engine = Engine(one_rack(), [vc("vc1", ("G-NODE", 2)), vc("vc2", ("G-NODE", 1))])
    engine.schedule([gang("job", "vc1", (1, 16), sku="G")], now=0)
    assert nodes_of_alloc(engine, "job") == ["r1"]

    engine.set_node_health("r2", False)

    # One healthy free node (r3) backs each VC's one free cell.
    assert rows(engine, "vc1") == {(None, "G-NODE"): (2, 1, 1, 0)}
    assert rows(engine, "vc2") == {(None, "G-NODE"): (1, 0, 1, 0)}
    engine.set_node_health("r3", False)
    assert rows(engine, "vc1") == {(None, "G-NODE"): (2, 1, 0, 1)}
    assert rows(engine, "vc2") == {(None, "G-NODE"): (1, 0, 0, 1)}


def nodes_of_alloc(engine, job_id):
    return sorted({p.node for a in engine.allocations() if a.job_id == job_id for p in a.pods})


def running_on(job_id, vc_name, node_name, priority=10, devices=16):
    """A running one-pod job's persisted placement, for restore."""
    return Allocation(
        job_id=job_id, vc=vc_name, user="u", priority=priority, opportunistic=priority < 0, lazy_preempted=False,
        started_at=0.0,
        pods=(PodPlacement("r0", 0, node_name, tuple(range(devices)), (node_name,)),),
    )


def test_a_gang_stays_inside_one_chain():
    engine = Engine(four_chains(), [vc("team", ("G-NODE", 9))])
    # Idle: r3 (the 3-node rack's last node), q3 and q4.
    report = engine.restore([running_on(f"f-{n}", "team", n) for n in ("s1", "s2", "r1", "r2", "q1", "q2")])
    assert report.restored == 6

    opportunistic = engine.schedule([gang("opp", "team", (2, 16), sku="G", priority=-1)], now=2)
    engine.release("opp")
    guaranteed = engine.schedule([gang("gua", "team", (2, 16), sku="G", at=3)], now=3)

    # Not r3 + q3: each gang goes to the chain that can hold all of it.
    assert nodes_of(opportunistic, "opp") == ["q3", "q4"]
    assert nodes_of(guaranteed, "gua") == ["q3", "q4"]

    # A gang that no one chain can hold waits, even though two chains together could.
    engine.release("f-r2")
    result = engine.schedule([gang("wide", "team", (3, 16), sku="G", priority=-1, at=4)], now=4)
    assert result.placements == () and "wide" in waiting(result)
    result = engine.schedule([gang("wide", "team", (2, 16), sku="G", priority=-1, at=4)], now=5)
    assert nodes_of(result, "wide") == ["r2", "r3"]


def test_an_unused_cell_type_is_ignored_with_a_warning():
    types = (
        CellTypeSpec("G-NODE", "G", 16, is_node=True),
        CellTypeSpec("G-HALF", "G", 8),  # left over from when a node was 2 × G-HALF
        CellTypeSpec("RACK3", "G-NODE", 3),
    )
    cluster = ClusterSpec(skus=(G,), cell_types=types, physical_cells=(rack_of("RACK3", "rack3", "r1", "r2", "r3"),))

    engine = Engine(cluster, [vc("team", ("G-NODE", 2))])

    assert engine.warnings == (
        "cell type 'G-HALF' is ignored: it is neither above nor inside the node type 'G-NODE' of SKU G, "
        "and no physical cell uses it",
    )
    assert validate_configuration(cluster, [vc("team", ("G-NODE", 2))]) == engine.warnings
    result = engine.schedule([gang("j", "team", (1, 16), sku="G")], now=0)
    assert len(result.placements) == 1
    with pytest.raises(ConfigurationError, match="unknown cell type 'G-HALF' \\(cell type 'G-HALF' is ignored"):
        Engine(cluster, [vc("team", ("G-HALF", 1))])


def test_a_quota_may_be_counted_in_leaf_cells():
    engine = Engine(one_rack(), [vc("tiny", ("G", 2)), vc("big", ("G-NODE", 2))])

    result = engine.schedule([gang(f"one{i}", "tiny", (1, 1), sku="G", at=i) for i in range(3)], now=0)

    assert [a.job_id for a in result.placements] == ["one0", "one1"]
    assert "VC 'tiny' has 0 of 2 G free" in waiting(result)["one2"]
    assert rows(engine, "tiny") == {(None, "G"): (2, 2, 0, 0)}
    assert [(p.node, p.devices) for a in result.placements for p in a.pods] == [("r1", (0,)), ("r1", (1,))]
    with pytest.raises(Exception, match="the largest G cell VC 'tiny' can use holds 1"):
        engine.check_request(gang("two", "tiny", (1, 2), sku="G"))
