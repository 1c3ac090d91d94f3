"""What the cluster holds, per SKU, chain and cell type (`scheduler.capacity`), and what a
refused quota asks beyond what is free (`scheduler.quota_shortages`).

The spare of every row is checked against the engine's own refusal
(`validate_configuration`): one more entry of `spare` cells is accepted, of `spare + 1`
refused. That is what an admin reads the table for.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler import ConfigurationError, TypeCapacity, capacity, quota_shortages, validate_configuration

from .helpers import mixed_cluster, vc
from .test_chains import four_chains


def table(result):
    """{(sku, chain): {cell type: (cells, guaranteed, pinned, spare)}}"""
    return {
        (c.sku, c.chain): {t.cell_type: (t.cells, t.guaranteed, t.pinned, t.spare) for t in c.types} for c in result
    }


def accepts(cluster, vcs):
    try:
        validate_configuration(cluster, vcs)
    except ConfigurationError:
        return False
    return True


def assert_spares_exact(cluster, vcs):
    for chain in capacity(cluster, vcs):
        for row in chain.types:
            entry = row.cell_type if chain.chain is None else f"{chain.chain}.{row.cell_type}"
            if row.spare:
                assert accepts(cluster, [*vcs, vc("probe", (entry, row.spare))]), (chain.chain, row)
            assert not accepts(cluster, [*vcs, vc("probe", (entry, row.spare + 1))]), (chain.chain, row)


def test_the_pool_and_each_chain_count_cells_guarantees_pinned_cells_and_spares():
    vcs = [
        vc("a", ("A100-NODE", 2), ("A100-SWITCH", 3), pinned_cells=("pin-a5",)),
        vc("b", ("V100-SOCKET", 1), ("CPU-NODE", 1)),
        vc("c", ("A100-SWITCH", 1)),
    ]
    result = capacity(mixed_cluster(), vcs)
    # Per SKU, the pool first, then the chains by name; cell types from the top down.
    assert [(c.sku, c.chain) for c in result] == [
        ("A100", None), ("A100", "A100-NODE"), ("A100", "A100-RACK"),
        ("CPU", None), ("CPU", "CPU-NODE"),
        ("V100", None), ("V100", "V100-NODE"),
    ]
    rows = table(result)
    # Two racks of two nodes and the pinned node a5: 5 nodes, 4 of them free to back
    # entries. a holds 2 nodes and 3 switches, c 1 switch: 3 nodes' worth, 1 left.
    assert rows[("A100", None)] == {
        "A100-RACK": (2, (), (), 0),
        "A100-NODE": (5, (("a", 2),), (("a", 1),), 1),
        "A100-SWITCH": (20, (("a", 3), ("c", 1)), (), 4),
        "A100": (40, (), (), 8),
    }
    # The standalone node is a chain of its own, owned outright by a.
    assert rows[("A100", "A100-NODE")]["A100-NODE"] == (1, (), (("a", 1),), 0)
    assert rows[("A100", "A100-RACK")]["A100-NODE"] == (4, (), (), 1)
    assert rows[("V100", None)]["V100-NODE"] == (2, (), (), 1)
    assert rows[("V100", None)]["V100-SOCKET"] == (4, (("b", 1),), (), 3)
    assert rows[("CPU", None)] == {"CPU-NODE": (2, (("b", 1),), (), 1), "CPU": (16, (), (), 8)}
    assert all(isinstance(t, TypeCapacity) for c in result for t in c.types)


def test_entries_naming_a_chain_are_counted_in_that_chain_and_its_spare_guards_the_pool():
    # s1 s2 standalone; rack3: r1..r3; rack4: q1..q4.
    vcs = [vc("a", ("RACK3.G-NODE", 2), ("G-NODE", 5)), vc("b", ("RACK4.G", 16))]
    rows = table(capacity(four_chains(), vcs))
    assert rows[("G", "RACK3")]["G-NODE"] == (3, (("a", 2),), (), 1)
    # 2 + 5 + 1 = 8 of the 9 nodes are guaranteed: one node (16 G) is left, anywhere.
    assert rows[("G", "RACK4")]["G"] == (64, (("b", 16),), (), 16)
    assert rows[("G", None)]["G-NODE"] == (9, (("a", 5),), (), 1)
    assert rows[("G", None)]["RACK4"][3] == 0
    assert_spares_exact(four_chains(), vcs)


@pytest.mark.parametrize(
    "vcs",
    [
        [],
        [vc("a", ("A100-NODE", 2), ("A100-SWITCH", 3), pinned_cells=("pin-a5",))],
        [vc("a", ("A100-RACK", 1)), vc("b", ("A100-SWITCH", 5)), vc("c", ("V100-SWITCH", 7), ("CPU", 9))],
        [vc("a", ("A100-RACK.A100-NODE", 3)), vc("b", ("A100-NODE.A100", 3), ("A100-SWITCH", 2))],
    ],
)
def test_every_spare_is_exactly_what_one_more_entry_may_take(vcs):
    assert_spares_exact(mixed_cluster(), vcs)


_entries = st.lists(
    st.tuples(
        st.sampled_from(["G-NODE", "G", "RACK3", "RACK4", "RACK3.G-NODE", "RACK4.G", "G-NODE.G", "RACK3.G"]),
        st.integers(1, 40),
    ),
    min_size=1, max_size=3, unique_by=lambda e: e[0],
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_entries, min_size=1, max_size=3))
def test_spares_and_shortages_agree_with_the_engine_for_any_quotas(quotas):
    cluster = four_chains()
    vcs = [vc(f"v{i}", *entries) for i, entries in enumerate(quotas)]
    others, last = vcs[:-1], vcs[-1]
    if not accepts(cluster, others):
        return
    shortages = quota_shortages(cluster, others, last)
    assert (not shortages) == accepts(cluster, vcs)
    # Granting each short entry only what was free makes the quota fit.
    cut = {s.cell_type if s.chain is None else f"{s.chain}.{s.cell_type}": s.free for s in shortages}
    trimmed = vc(last.name, *((entry, cut.get(entry, count)) for entry, count in last.cells))
    assert accepts(cluster, [*others, trimmed])
    assert_spares_exact(cluster, vcs if not shortages else [*others, trimmed])


def test_a_refused_quota_names_what_it_asks_and_what_was_free():
    others = [vc("a", ("A100-NODE", 2))]
    shortages = quota_shortages(mixed_cluster(), others, vc("x", ("A100-RACK", 2), ("A100-NODE", 1)))
    # a's two nodes go on the standalone node and one rack's node: one whole rack is free.
    [short] = shortages
    assert (short.sku, short.chain, short.cell_type, short.level, short.asked, short.free, short.short) == (
        "A100", None, "A100-RACK", 4, 2, 1, 1,
    )
    assert quota_shortages(mixed_cluster(), others, vc("x", ("A100-RACK", 1), ("A100-NODE", 1))) == ()


def test_an_overcommitted_configuration_shows_no_spare_where_it_runs_short():
    # More than the cluster has (refused by validation, but a cluster can shrink under
    # its VCs): the table still reads, with nothing spare in that SKU.
    vcs = [vc("a", ("CPU-NODE", 3))]
    assert not accepts(mixed_cluster(), vcs)
    rows = table(capacity(mixed_cluster(), vcs))
    assert rows[("CPU", None)]["CPU-NODE"] == (2, (("a", 3),), (), 0)
    assert rows[("CPU", None)]["CPU"][3] == 0
    assert rows[("V100", None)]["V100-NODE"][3] == 2


def test_the_same_configuration_gives_the_same_table_whatever_the_order():
    vcs = [vc("b", ("A100-SWITCH", 3)), vc("a", ("A100-SWITCH", 3)), vc("c", ("CPU-NODE", 1))]
    assert capacity(mixed_cluster(), vcs) == capacity(mixed_cluster(), list(reversed(vcs)))
    assert table(capacity(mixed_cluster(), vcs))[("A100", None)]["A100-SWITCH"][1] == (("a", 3), ("b", 3))


def test_a_configuration_error_before_the_safety_check_is_raised():
    with pytest.raises(ConfigurationError, match="unknown cell type"):
        capacity(mixed_cluster(), [vc("a", ("H100-NODE", 1))])
