"""Invariants over random event sequences: submits, cycles, completions, node failures
and recoveries on a small cluster of three chains, with a pinned cell inside a node
(a1's last switch) and a host carrying two SKUs (v1: 16 V100 and 8 CPU leaf cells)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scheduler import ClusterSpec, Engine, GangRequest, PhysicalCellSpec, PodRequest

from .helpers import A100, A100_TYPES, CPU, CPU_TYPES, V100, V100_TYPES, rack, settle, vc

CLUSTER = ClusterSpec(
    skus=(A100, V100, CPU),
    cell_types=A100_TYPES + V100_TYPES + CPU_TYPES,
    physical_cells=(
        PhysicalCellSpec("A100-RACK", "r1", (
            PhysicalCellSpec("A100-NODE", "a1", (PhysicalCellSpec("A100-SWITCH", "a1/6-7", pinned_id="pin-a1"),)),
            PhysicalCellSpec("A100-NODE", "a2"),
        )),
        rack("r2", "a3", "a4"),
        PhysicalCellSpec("V100-NODE", "v1"),
        PhysicalCellSpec("V100-NODE", "v2", pinned_id="pin-v2"),
        PhysicalCellSpec("CPU-NODE", "v1/16-23"),
    ),
)
NODES = ("a1", "a2", "a3", "a4", "v1", "v2")  # hosts
ADDRESSES = ("a1", "a2", "a3", "a4", "v1", "v2", "v1/16-23")  # their nodes, one per SKU
VCS = (
    # A short starvation threshold, so that starving gangs hold reservations in these runs.
    vc("a", ("A100-NODE", 1), ("A100-SWITCH", 2), cohort="c", max_leaf_cells_per_user=12, starvation_threshold=15.0,
       pinned_cells=("pin-a1",)),
    vc("b", ("A100-RACK", 1), cohort="c", lending_limit=8),
    vc("c", ("V100-SOCKET", 1), ("V100-SWITCH", 1), ("CPU-NODE", 1), pinned_cells=("pin-v2",), starvation_threshold=15.0),
)
SKUS = {"a": ("A100",), "b": ("A100",), "c": ("V100", "CPU")}
# A guaranteed cell as pods: (SKU, pods, leaf cells per pod).
CELL_PODS = {
    "A100-RACK": ("A100", 2, 8), "A100-NODE": ("A100", 1, 8), "A100-SWITCH": ("A100", 1, 2),
    "V100-SOCKET": ("V100", 1, 8), "V100-SWITCH": ("V100", 1, 2), "CPU-NODE": ("CPU", 1, 8),
}


@st.composite
def submit(draw):
    name = draw(st.sampled_from(sorted(SKUS)))
    sku = draw(st.sampled_from(SKUS[name]))
    roles = draw(st.lists(st.tuples(st.integers(1, 3), st.sampled_from((1, 2, 4, 8))), min_size=1, max_size=2))
    priority = draw(st.sampled_from((-1, 1, 10, 100)))
    pin = {"V100": "pin-v2", "A100": "pin-a1" if name == "a" else None}.get(sku)
    pinned = pin is not None and priority >= 0 and draw(st.booleans())
    return (
        "submit",
        name,
        sku,
        tuple(roles),
        priority,
        draw(st.booleans()),
        draw(st.sampled_from((0.0, 50.0))),
        draw(st.sampled_from((None, 30.0))),
        draw(st.sampled_from(("u1", "u2"))),
        pin if pinned else None,
    )


# A production gang the size of one of the VC's cells: it preempts when the VC is busy.
URGENT = {"a": ("A100", ((1, 8),)), "b": ("A100", ((2, 8),)), "c": ("V100", ((1, 8),))}

EVENTS = st.lists(
    st.one_of(
        submit(),
        st.just(("cycle",)),
        st.tuples(st.just("release"), st.integers(0, 50)),
        st.tuples(st.just("health"), st.sampled_from(NODES), st.booleans()),
        st.tuples(st.just("urgent"), st.sampled_from(sorted(URGENT))),
        st.tuples(st.just("fill"), st.sampled_from(sorted(URGENT)), st.sampled_from((-1, 1)), st.booleans()),
        st.tuples(st.just("gone"), st.integers(0, 50)),
    ),
    min_size=1,
    max_size=25,
)


def make_gang(n: int, event, now: float) -> GangRequest:
    _, name, sku, roles, priority, lazy, min_runtime, max_runtime, user, pinned = event
    pods = tuple(
        PodRequest(f"r{i}", j, sku, leaves, pinned_cell=pinned)
        for i, (count, leaves) in enumerate(roles)
        for j in range(count)
    )
    return GangRequest(
        f"j{n:03d}", name, user, priority, pods, now,
        lazy_preemption=lazy, min_runtime=min_runtime, max_runtime=max_runtime,
    )


def run(events, queues: list | None = None):
    """Play the events; return the engine, the gangs submitted and every cycle's result.
    ``queues`` receives the waiting gangs (a dictionary the run keeps current)."""
    engine = Engine(CLUSTER, VCS)
    queue: dict[str, GangRequest] = {}
    if queues is not None:
        queues.append(queue)
    submitted: dict[str, GangRequest] = {}
    results = []
    now = 0.0
    for n, event in enumerate(events):
        now += 10.0
        if event[0] in ("submit", "urgent", "fill"):
            kind = event[0]
            if kind != "submit":
                # A gang the size of a cell of the VC: a low-priority one that fills it
                # (placed at once), or an urgent one, which then gets the two cycles a
                # preemption takes (plan, then commit).
                sku, roles = URGENT[event[1]]
                priority, lazy = (100, False) if kind == "urgent" else event[2:]
                event = ("submit", event[1], sku, roles, priority, lazy, 0.0, None, f"u-{kind}", None)
            gang = make_gang(n, event, now)
            submitted[gang.job_id] = queue[gang.job_id] = gang
            for i in range({"submit": 0, "fill": 1, "urgent": 2}[kind]):
                cycle(engine, queue, results, now + i + 1)
        elif event[0] == "cycle":
            cycle(engine, queue, results, now)
        elif event[0] == "release":
            running = sorted(a.job_id for a in engine.allocations())
            if running:
                engine.release(running[event[1] % len(running)])
        elif event[0] == "gone":
            # A preempted job's pods are gone: the worker releases it.
            stopping = sorted(a.job_id for a in engine.allocations() if a.state == "terminating")
            if stopping:
                engine.release(stopping[event[1] % len(stopping)])
        else:
            engine.set_node_health(event[1], event[2])
        yield engine, submitted, results


def cycle(engine: Engine, queue: dict[str, GangRequest], results: list, now: float) -> None:
    before = {a.job_id: a for a in engine.allocations()}
    result = engine.schedule(list(queue.values()), now)
    for done in list(result.placements) + list(result.rejected):
        queue.pop(done.job_id)
    results.append(result)
    check_cycle(before, {a.job_id: a for a in engine.allocations()}, result)


def check_cycle(before: dict, after: dict, result) -> None:
    """Every change to the jobs is one the cycle reports, and every victim it stops
    holds devices its preemptor's placement uses."""
    stopped = {p.job_id for p in result.preemptions if not p.lazy}
    demoted = {p.job_id for p in result.preemptions if p.lazy}
    placed = {a.job_id for a in result.placements}
    reserving = {r.job_id for r in result.reservations if r.kind == "preemption"}
    for job_id in set(before) - set(after):
        # Gone in a cycle: expired, or a preemption abandoned (its gang placed elsewhere or re-deciding).
        assert job_id in result.expired or before[job_id].state == "preempting", job_id
    for job_id in set(after) - set(before):
        assert job_id in placed | reserving, job_id
    for job_id in placed:
        assert after[job_id].state == "running"
    for job_id in stopped:
        assert before[job_id].state == "running" and after[job_id].state == "terminating"
    for job_id in demoted - stopped:
        assert after[job_id].opportunistic and after[job_id].lazy_preempted
        assert not before[job_id].opportunistic
    for job_id in set(before) & set(after) - stopped - demoted - placed - reserving:
        assert after[job_id] == before[job_id]
    for p in result.preemptions:
        preemptor = after[p.by_job]
        assert p.by_job in placed or (preemptor.state == "preempting" and not preemptor.planned)
        if not p.lazy:
            assert p.job_id in preemptor.victims
            uses = {(pod.node, d) for pod in preemptor.pods for d in pod.devices}
            assert any((pod.node, d) in uses for pod in after[p.job_id].pods for d in pod.devices), p


def check_state(engine: Engine, submitted: dict[str, GangRequest]) -> None:
    """All or nothing; no device used by two live gangs (running, terminating); a
    preempting gang's devices are free or used by its own victims only, and reserved by
    no other gang."""
    seen: dict[tuple[str, int], str] = {}
    allocs = {a.job_id: a for a in engine.allocations()}
    for alloc in allocs.values():
        gang = submitted[alloc.job_id]
        assert sorted((p.task_role, p.index, len(p.devices)) for p in alloc.pods) == sorted(
            (p.task_role, p.index, p.leaf_cells) for p in gang.pods
        )
        for pod in alloc.pods:
            assert len(set(pod.devices)) == len(pod.devices)
            if alloc.state == "preempting":
                continue
            for d in pod.devices:
                assert (pod.node, d) not in seen, f"device {pod.node}/{d} used twice"
                seen[(pod.node, d)] = alloc.job_id
            assert (pod.vc_cell is None) == (alloc.opportunistic or alloc.state == "terminating")
    reserved: dict[tuple[str, int], str] = {}
    for alloc in allocs.values():
        if alloc.state != "preempting":
            continue
        for pod in alloc.pods:
            for d in pod.devices:
                assert (pod.node, d) not in reserved, f"device {pod.node}/{d} reserved twice"
                reserved[(pod.node, d)] = alloc.job_id
                assert seen.get((pod.node, d)) in (None, *alloc.victims), (alloc.job_id, pod.node, d, seen.get((pod.node, d)))
        for victim in alloc.victims:
            assert allocs[victim].state == ("running" if alloc.planned else "terminating")
    for node in ADDRESSES:
        status = engine.node_status(node)
        for use in status.used:
            assert seen.pop((status.host, use.index)) == use.job_id
    assert seen == {}
    for name in sorted(SKUS):
        for row in engine.vc_status(name).cells:
            assert row.used + row.lent <= row.guaranteed
            assert row.free >= 0 and row.bad >= 0


def clone(engine: Engine) -> Engine:
    copy = Engine(CLUSTER, VCS)
    report = copy.restore(engine.allocations())
    assert report.demoted == () and report.dropped == ()
    return copy


def check_guarantees(engine: Engine) -> None:
    """Each VC, alone at top priority, can still get all of its guaranteed cells as whole
    cells (preempting only what it may preempt): nothing broke its safety."""
    for spec in VCS:
        copy = clone(engine)
        # Preempted jobs hold their devices until their pods are gone; then the VC's
        # cells must all be obtainable.
        for alloc in copy.allocations():
            if alloc.state == "terminating":
                copy.release(alloc.job_id)
        pods = []
        for cell_type, count in spec.cells:
            sku, per_cell, leaves = CELL_PODS[cell_type]
            pods += [PodRequest(cell_type, i, sku, leaves) for i in range(count * per_cell)]
        probe = GangRequest("probe", spec.name, "probe", 1000, tuple(pods), 0.0)
        result = settle(copy, [probe], now=10_000.0)
        assert [a.job_id for a in result.placements] == ["probe"], result.waiting
        running = {a.job_id: a for a in engine.allocations()}
        for victim in result.preemptions:
            alloc = running[victim.job_id]
            lent_from_here = any(p.lent_by == spec.name for p in alloc.pods)
            assert alloc.opportunistic or alloc.vc == spec.name or lent_from_here


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EVENTS)
# A borrowing gang (b's, priority 100) took over a preemption b's priority-1 gang planned that cycle: reserved twice.
@example([
    ("submit", "c", "CPU", ((1, 1), (1, 1)), 10, True, 0.0, None, "u2", None),
    ("submit", "b", "A100", ((2, 1), (1, 8)), -1, True, 50.0, None, "u1", None), ("urgent", "a"), ("release", 8),
    ("submit", "b", "A100", ((1, 2),), 10, False, 0.0, 30.0, "u2", None),
    ("submit", "b", "A100", ((2, 2), (2, 8)), 100, False, 50.0, 30.0, "u2", None),
    ("submit", "b", "A100", ((3, 1), (1, 8)), 1, False, 0.0, 30.0, "u1", None), ("fill", "b", 1, False),
])
# a's gang planned to stop the job b's lower gang had planned to stop, which then told it: a planned victim terminating.
@example([
    ("submit", "b", "A100", ((1, 2), (3, 2)), 10, False, 0.0, None, "u2", None), ("urgent", "a"), ("fill", "b", -1, False),
    ("submit", "b", "A100", ((1, 2),), 1, True, 0.0, None, "u1", None), ("cycle",),
    ("submit", "a", "A100", ((2, 2),), 100, True, 0.0, None, "u2", None), ("cycle",),
])
def test_invariants_hold_after_every_event(events):
    for engine, submitted, _ in run(events):
        check_state(engine, submitted)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EVENTS)
# VC a lent its node to b's urgent gang (a1 is bad): a's probe reclaims it, preempting
# the borrower, its own lower-priority job and an opportunistic one in its cell.
@example([
    ("submit", "a", "A100", ((1, 1),), 1, False, 0.0, None, "u1", None), ("health", "a1", False),
    ("submit", "a", "A100", ((1, 1),), -1, False, 0.0, None, "u1", None), ("urgent", "b"),
])
# a's lower-priority jobs hold one of its switch cells on an otherwise idle rack: the
# devices are there, the quota is not, and the probe preempts them.
@example([
    ("submit", "a", "A100", ((1, 1),), -1, False, 0.0, None, "u1", None),
    ("submit", "a", "A100", ((1, 1),), 1, False, 0.0, None, "u1", None),
    ("submit", "a", "A100", ((1, 1),), 1, False, 0.0, None, "u1", None), ("cycle",), ("release", 0),
])
@example([
    ("fill", "a", -1, False), ("submit", "a", "A100", ((1, 1),), 1, False, 0.0, None, "u1", "pin-a1"),
    ("urgent", "a"),
])
# An opportunistic pod on a cell a lent to b (its other devices on a's pinned cell) was no candidate victim for a.
@example([
    ("submit", "b", "A100", ((3, 8),), 1, False, 0.0, None, "u2", None), ("urgent", "c"),
    ("submit", "b", "A100", ((3, 1),), 100, True, 50.0, None, "u2", None),
    ("submit", "b", "A100", ((2, 2), (3, 2)), 10, False, 0.0, 30.0, "u2", None), ("cycle",),
    ("submit", "b", "A100", ((2, 4),), -1, True, 50.0, None, "u2", None), ("urgent", "a"), ("gone", 18), ("urgent", "c"),
])
# a reclaims a switch it lent to b for its probe: the borrower is a victim only if the probe runs in that switch.
@example([
    ("urgent", "a"), ("fill", "b", -1, True), ("submit", "b", "A100", ((1, 2), (1, 1)), -1, True, 50.0, None, "u2", None),
    ("fill", "c", 1, True), ("submit", "b", "A100", ((2, 8),), 100, True, 0.0, None, "u1", None),
    ("submit", "b", "A100", ((2, 1),), 10, True, 50.0, None, "u1", None), ("urgent", "a"),
])
# c's probe stops its lazy victims after all: demoted first, their cells were lost and the commit missed the plan's.
@example([
    ("submit", "c", "V100", ((1, 1), (2, 2)), 10, True, 50.0, None, "u2", None),
    ("submit", "c", "V100", ((1, 1), (2, 2)), 1, True, 50.0, None, "u2", None), ("urgent", "b"),
])
def test_vc_safety_is_never_broken(events):
    for engine, _, _ in run(events):
        check_guarantees(engine)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EVENTS)
def test_restore_of_allocations_rebuilds_the_same_state(events):
    for engine, _, _ in run(events):
        copy = clone(engine)
        for node in NODES:
            copy.set_node_health(node, engine.node_status(node).healthy)
        assert copy.allocations() == engine.allocations()
        for name in sorted(SKUS):
            assert copy.vc_status(name) == engine.vc_status(name)
        for node in ADDRESSES:
            assert copy.node_status(node) == engine.node_status(node)
    # ... and so the same decisions from then on.
    probe = [
        make_gang(900 + i, ("submit", name, sku, ((1, k),), priority, False, 0.0, None, "u3", None), 1000.0)
        for i, (name, sku, k, priority) in enumerate(
            [("a", "A100", 1, 10), ("a", "A100", 8, 100), ("b", "A100", 4, 10), ("c", "V100", 2, 10),
             ("c", "CPU", 8, 1), ("b", "A100", 2, -1), ("a", "A100", 2, -1)]
        )
    ]
    assert copy.schedule(probe, 2000.0) == engine.schedule(probe, 2000.0)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EVENTS)
# At the commit, demoting c's lazy victim freed a socket elsewhere: the other victim, told to stop, held none of its devices.
@example([
    ("submit", "c", "V100", ((1, 4),), 10, False, 0.0, None, "u1", None),
    ("submit", "c", "V100", ((1, 2), (1, 2)), 1, True, 0.0, None, "u2", None), ("urgent", "c"),
])
# A victim re-took devices over two of a's switch cells, only the first filed as full: a restored copy placed otherwise.
@example([
    ("submit", "b", "A100", ((1, 4),), 1, True, 50.0, None, "u2", None), ("fill", "b", -1, True),
    ("submit", "a", "A100", ((2, 1),), 10, False, 50.0, None, "u1", None),
    ("submit", "a", "A100", ((3, 1),), 100, True, 50.0, 30.0, "u1", None), ("urgent", "c"),
])
def test_restore_after_any_prefix_gives_the_same_next_cycle(events):
    """After every event, an engine restored from the persisted allocations decides the
    next cycle exactly as the running one: placements, preemptions, reasons and the
    reservations (preemptions in progress and starving gangs')."""
    queues: list = []
    for step, (engine, submitted, _) in enumerate(run(events, queues)):
        copy = clone(engine)
        for node in NODES:
            copy.set_node_health(node, engine.node_status(node).healthy)
        queue = list(queues[0].values())
        now = 10.0 * (step + 1) + 5.0
        expected = engine.schedule(queue, now)
        assert copy.schedule(queue, now) == expected
        assert copy.allocations() == engine.allocations()
        for done in list(expected.placements) + list(expected.rejected):
            queues[0].pop(done.job_id, None)
        for p in expected.preemptions:
            assert p.job_id in {a.job_id for a in engine.allocations()}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EVENTS)
def test_same_events_give_the_same_decisions(events):
    first = second = None
    for first in run(events):
        pass
    for second in run(events):
        pass
    assert first[2] == second[2]
    assert first[0].allocations() == second[0].allocations()


REPLAY = """
import random, sys
sys.path.insert(0, {root!r})
from tests.scheduler.test_properties import run
rng = random.Random(7)
events = []
for n in range(60):
    kind = rng.random()
    if kind < 0.55:
        name = rng.choice(["a", "b", "c"])
        sku = rng.choice({{"a": ["A100"], "b": ["A100"], "c": ["V100", "CPU"]}}[name])
        roles = ((rng.randint(1, 3), rng.choice([1, 2, 4, 8])),)
        events.append(("submit", name, sku, roles, rng.choice([-1, 1, 10, 100]), rng.random() < 0.5,
                       rng.choice([0.0, 50.0]), rng.choice([None, 30.0]), rng.choice(["u1", "u2"]), None))
    elif kind < 0.8:
        events.append(("cycle",))
    elif kind < 0.9:
        events.append(("release", rng.randrange(50)))
    else:
        events.append(("health", rng.choice(["a1", "a2", "a3", "a4", "v1", "v2"]), rng.random() < 0.6))
for engine, _, results in run(events):
    pass
print(repr(results))
print(repr(engine.allocations()))
"""


def test_decisions_do_not_depend_on_hash_order():
    """Same events in processes with different string hashing give the same output."""
    root = str(Path(__file__).resolve().parents[2])
    outputs = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", REPLAY.format(root=root)], env=env, capture_output=True, text=True, check=True
        )
        outputs.add(done.stdout)
    assert len(outputs) == 1
    assert "Allocation(" in outputs.pop()
