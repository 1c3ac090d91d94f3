"""Benchmark of the scheduling engine alone, on generated clusters.

    python benchmarks/bench_engine.py [--quick] [--sizes 100,1000,4000] [--seed 1]

Each cluster size runs in its own child process (so peak memory and timings do not
mix): nodes of 8 GPUs (4 PCIe switches of 2) in racks of 4 to 16 nodes, two SKUs, 20
VCs holding 90 % of the nodes (two cohorts of five may borrow from each other), and a
queue kept at 10,000 gangs of 1, 2, 4, 8, 16, 32 and 64 GPUs in the proportions of the
Microsoft ITP traces (10 % opportunistic). Cycles run until the cluster is full; then
one more cycle over the 10,000 waiting gangs measures how cheap it is to say no, and a
cycle of 200 production gangs measures preemption (the cycles it takes: plan, stop the
victims, place once they are gone). The start-up figure builds a fresh engine and restores placements covering 90 % of the
cluster's GPUs. A second scenario fills a fresh cluster to about 90 % with the same
gangs and lets production gangs arrive one by one (100 sized like the trace, then, on
another fresh cluster, 20 of 4 × 8 GPUs): each preempts, the victims' pods are taken
as gone at once (``release``), and the benchmark prints how many gangs and GPUs each
preemption stopped and the utilisation at the end. Not a test:
it prints figures.

Times are CPU time of the benchmark process (``time.process_time``), so that other
work on a shared machine does not inflate them; the load average is printed with them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scheduler import (  # noqa: E402
    CellTypeSpec,
    ClusterSpec,
    Engine,
    GangRequest,
    PhysicalCellSpec,
    PodRequest,
    SkuSpec,
    VirtualClusterSpec,
)

# GPUs per job over all ten clusters of Microsoft's ITP GPU-cluster job traces (MIT licence;
# jobs above 16 GPUs split by their exact sizes).
TRACE_GPU_COUNTS = {1: 57_682, 2: 1_483, 4: 2_371, 8: 7_009, 16: 381, 32: 353, 64: 72}
QUEUE = 10_000
PREEMPTORS = 200
FILL = 0.9  # share of the GPUs the preemption scenario fills before production gangs arrive
ARRIVALS = 20  # production gangs of 4 × 8 GPUs arriving at the filled cluster
TRACE_ARRIVALS = 100  # production gangs sized like the trace arriving at the filled cluster
VCS = 20
SKUS = (SkuSpec("A100", 1, 12, 110_000), SkuSpec("V100", 1, 6, 60_000))
SKU_SHARE = {"A100": 0.6, "V100": 0.4}


def generate_cluster(nodes: int, rng: random.Random) -> ClusterSpec:
    cell_types: list[CellTypeSpec] = []
    physical: list[PhysicalCellSpec] = []
    for sku in SKUS:
        name = sku.name
        cell_types += [
            CellTypeSpec(f"{name}-SWITCH", name, 2),
            CellTypeSpec(f"{name}-NODE", f"{name}-SWITCH", 4, is_node=True),
        ]
        left = round(nodes * SKU_SHARE[name])
        sizes = set()
        r = 0
        while left > 0:
            size = min(left, rng.randint(4, 16))
            sizes.add(size)
            members = tuple(PhysicalCellSpec(f"{name}-NODE", f"{name.lower()}-{r:03d}-{i:02d}") for i in range(size))
            physical.append(PhysicalCellSpec(f"{name}-RACK{size}", f"{name.lower()}-rack-{r:03d}", members))
            left -= size
            r += 1
        cell_types += [CellTypeSpec(f"{name}-RACK{size}", f"{name}-NODE", size) for size in sorted(sizes)]
    return ClusterSpec(skus=SKUS, cell_types=tuple(cell_types), physical_cells=tuple(physical))


def generate_vcs(nodes: int) -> list[VirtualClusterSpec]:
    vcs = []
    for i in range(VCS):
        cells = []
        for sku in SKUS:
            per_vc = int(nodes * SKU_SHARE[sku.name] * 0.9) // VCS
            if per_vc:
                cells.append((f"{sku.name}-NODE", per_vc))
            cells.append((f"{sku.name}-SWITCH", 1))
        cohort = f"cohort-{i // 5}" if i < 10 else None
        vcs.append(
            VirtualClusterSpec(f"vc{i:02d}", tuple(cells), cohort=cohort, borrowing_limit=64 if cohort else None)
        )
    return vcs


class GangSource:
    """An endless, seeded stream of gangs shaped like the trace."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.sizes = list(TRACE_GPU_COUNTS)
        self.weights = list(TRACE_GPU_COUNTS.values())
        self.count = 0

    def next(self) -> GangRequest:
        rng = self.rng
        gpus = rng.choices(self.sizes, self.weights)[0]
        pods, per_pod = (1, gpus) if gpus <= 8 else (gpus // 8, 8)
        sku = "A100" if rng.random() < SKU_SHARE["A100"] else "V100"
        priority = -1 if rng.random() < 0.1 else 10
        self.count += 1
        return GangRequest(
            job_id=f"job-{self.count:07d}",
            vc=f"vc{rng.randrange(VCS):02d}",
            user=f"user{rng.randrange(200)}",
            priority=priority,
            pods=tuple(PodRequest("worker", i, sku, per_pod) for i in range(pods)),
            submitted_at=float(self.count),
        )


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def timed_decisions(engine: Engine, samples: list[tuple[float, bool]]) -> None:
    """Time each gang decision (one admission attempt, placed or not) by wrapping the
    engine's two admission steps; the decisions themselves are unchanged."""
    for name in ("_admit_guaranteed", "_admit_opportunistic"):
        original = getattr(engine, name)

        def wrapper(*args, _original=original, **kwargs):
            start = time.process_time()
            outcome = _original(*args, **kwargs)
            samples.append((time.process_time() - start, hasattr(outcome, "job")))  # an admission
            return outcome

        setattr(engine, name, wrapper)


def _gpus(alloc) -> int:
    return sum(len(p.devices) for p in alloc.pods)


def run_arrivals(nodes: int, seed: int, shape: str) -> dict:
    """Fill a fresh cluster to about 90 %, then production gangs arrive one at a time:
    ``shape`` "4x8" (4 pods of 8 GPUs) or "trace" (sized like the trace).

    Each arrival gets cycles until it runs (at most ten): the victims a cycle tells to
    stop are released at once, as if their pods were gone by the next cycle."""
    rng = random.Random(seed + 1)
    cluster = generate_cluster(nodes, rng)
    engine = Engine(cluster, generate_vcs(nodes))
    gpus = nodes * 8
    source = GangSource(rng)
    now, submitted = 0.0, 0
    while submitted < FILL * gpus:
        batch = []
        while submitted < FILL * gpus and len(batch) < QUEUE:
            gang = source.next()
            batch.append(gang)
            submitted += sum(p.leaf_cells for p in gang.pods)
        now += 10.0
        engine.schedule(batch, now)
    filled = sum(_gpus(a) for a in engine.allocations()) / gpus
    victims, victim_gpus, preempting, placed, cycles = 0, 0, 0, 0, 0
    decision_time = 0.0
    arrivals = ARRIVALS if shape == "4x8" else TRACE_ARRIVALS
    for i in range(arrivals):
        if shape == "4x8":
            sku = "A100" if rng.random() < SKU_SHARE["A100"] else "V100"
            gang = GangRequest(
                job_id=f"prod-{i:03d}", vc=f"vc{rng.randrange(VCS):02d}", user="prod", priority=100,
                pods=tuple(PodRequest("worker", j, sku, 8) for j in range(4)), submitted_at=now,
            )
        else:
            gang = dataclasses.replace(source.next(), job_id=f"prod-{i:03d}", priority=100, submitted_at=now)
        killed_here = 0
        for _ in range(10):
            now += 10.0
            running = {a.job_id: a for a in engine.allocations() if a.state == "running"}
            start = time.process_time()
            result = engine.schedule([gang], now)
            decision_time += time.process_time() - start
            cycles += 1
            for p in result.preemptions:
                if not p.lazy:
                    killed_here += 1
                    victim_gpus += _gpus(running[p.job_id])
                    engine.release(p.job_id)
            if result.placements or result.rejected:
                placed += len(result.placements)
                break
        if killed_here:
            preempting += 1
            victims += killed_here
    used = sum(_gpus(a) for a in engine.allocations() if a.state == "running")
    return {
        "shape": shape,
        "arrivals": arrivals,
        "filled": filled,
        "arrivals_placed": placed,
        "preempting": preempting,
        "victims_per_preemption": victims / preempting if preempting else 0.0,
        "victim_gpus_per_preemption": victim_gpus / preempting if preempting else 0.0,
        "final_utilisation": used / gpus,
        "arrival_ms": decision_time / max(1, cycles) * 1000,
    }


def run_size(nodes: int, seed: int) -> dict:
    rng = random.Random(seed)
    cluster = generate_cluster(nodes, rng)
    vcs = generate_vcs(nodes)
    gpus = nodes * 8

    start = time.process_time()
    engine = Engine(cluster, vcs)
    build = time.process_time() - start

    source = GangSource(rng)
    queue = {g.job_id: g for g in (source.next() for _ in range(QUEUE))}
    samples: list[tuple[float, bool]] = []
    timed_decisions(engine, samples)
    placed = rejected = 0
    fill_time = 0.0
    cycles = 0
    now = 0.0
    while True:
        now += 10.0
        start = time.process_time()
        result = engine.schedule(list(queue.values()), now)
        fill_time += time.process_time() - start
        cycles += 1
        placed += len(result.placements)
        rejected += len(result.rejected)
        for done in result.placements + result.rejected:
            del queue[done.job_id]
        while len(queue) < QUEUE:
            gang = source.next()
            queue[gang.job_id] = gang
        if not result.placements:
            break
    used = sum(len(p.devices) for a in engine.allocations() for p in a.pods)

    start = time.process_time()
    result = engine.schedule(list(queue.values()), now + 10.0)
    no_fit = time.process_time() - start
    assert not result.placements and not result.rejected and len(result.waiting) == QUEUE

    # Preemption: production gangs arrive at the full cluster and push test and
    # opportunistic jobs out.
    # A preemption takes cycles: one plans it, the next tells the victims to stop, and
    # the gang is placed in the first cycle after they are gone (released here at once).
    urgent = {g.job_id: g for g in (dataclasses.replace(source.next(), priority=100) for _ in range(PREEMPTORS))}
    preempt_time, preempt_placed, victims = 0.0, 0, 0
    for i in range(6):
        start = time.process_time()
        result = engine.schedule(list(urgent.values()), now + 20.0 + i)
        preempt_time += time.process_time() - start
        preempt_placed += len(result.placements)
        for done in result.placements + result.rejected:
            del urgent[done.job_id]
        for p in result.preemptions:
            if not p.lazy:
                victims += 1
                engine.release(p.job_id)
        if not urgent or not (result.placements or result.preemptions or result.reservations):
            break

    allocations = sorted((a for a in engine.allocations() if a.state == "running"), key=lambda a: a.job_id)
    subset, covered = [], 0
    for alloc in allocations:
        if covered >= 0.9 * gpus:
            break
        subset.append(alloc)
        covered += sum(len(p.devices) for p in alloc.pods)
    start = time.process_time()
    fresh = Engine(cluster, vcs)
    report = fresh.restore(subset)
    startup = time.process_time() - start
    assert not report.dropped

    return {
        "nodes": nodes,
        "gpus": gpus,
        "build_s": build,
        "cycles": cycles,
        "placed": placed,
        "rejected": rejected,
        "fill_s": fill_time,
        "placements_per_s": placed / fill_time,
        "decisions": len(samples),
        "p50_ms": percentile([t for t, _ in samples], 0.50) * 1000,
        "p99_ms": percentile([t for t, _ in samples], 0.99) * 1000,
        "placed_p50_ms": percentile([t for t, ok in samples if ok], 0.50) * 1000,
        "placed_p99_ms": percentile([t for t, ok in samples if ok], 0.99) * 1000,
        "utilisation": used / gpus,
        "no_fit_s": no_fit,
        "preempt_ms": preempt_time / PREEMPTORS * 1000,
        "preempt_placed": preempt_placed,
        "victims": victims,
        "startup_s": startup,
        "restored": report.restored,
        "restored_gpus": covered,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "arrivals": [run_arrivals(nodes, seed, shape) for shape in ("trace", "4x8")],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="only 100 and 1,000 nodes")
    parser.add_argument("--sizes", help="comma-separated node counts (default 100,1000,4000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_size(args.child, args.seed)))
        return
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else ([100, 1000] if args.quick else [100, 1000, 4000])
    print(f"load average before: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    rows = []
    wall = time.perf_counter()
    for nodes in sizes:
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(nodes), "--seed", str(args.seed)],
            check=True, capture_output=True, text=True,
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        r = rows[-1]
        print(
            f"{r['nodes']:>5} nodes: {r['placed']:>6} gangs placed in {r['cycles']} cycles "
            f"({r['rejected']} refused as larger than their VC could ever hold), "
            f"{r['utilisation']:.1%} of {r['gpus']} GPUs used; then {r['preempt_placed']} of "
            f"{PREEMPTORS} prod gangs placed by preempting {r['victims']} jobs, "
            f"{r['preempt_ms']:.1f} ms per gang",
            flush=True,
        )
    print()
    print(f"production gangs (priority 100) arriving one by one at a fresh cluster filled to ~{FILL:.0%}:")
    for r in rows:
        for a in r["arrivals"]:
            label = "sized like the trace" if a["shape"] == "trace" else "of 4 × 8 GPUs"
            print(
                f"{r['nodes']:>6} nodes, {a['arrivals']} {label}: filled {a['filled']:.1%}; {a['arrivals_placed']} placed, "
                f"{a['preempting']} by preempting; victims per preemption {a['victims_per_preemption']:.2f} gangs, "
                f"{a['victim_gpus_per_preemption']:.1f} GPUs; utilisation at the end {a['final_utilisation']:.1%}; "
                f"{a['arrival_ms']:.1f} ms per cycle",
                flush=True,
            )
    print(f"load average after: {', '.join(f'{x:.1f}' for x in os.getloadavg())}; "
          f"wall time {time.perf_counter() - wall:.0f} s")
    print()
    print("gangs/s: placements per second of cycle time while filling (failed attempts included);")
    print("decision: one gang's admission attempt, all of them / only those that placed the gang;")
    print("no-fit: one cycle over 10,000 waiting gangs when none fits; start-up: build + restore 90 %.")
    print()
    header = (
        f"{'nodes':>6} {'gangs/s':>8} {'decision p50/p99 ms':>20} {'placing p50/p99 ms':>19} "
        f"{'no-fit s':>9} {'build s':>8} {'start-up s':>10} {'peak MB':>8}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['nodes']:>6} {r['placements_per_s']:>8.0f} {r['p50_ms']:>9.3f} /{r['p99_ms']:>7.3f} "
            f"{r['placed_p50_ms']:>10.3f} /{r['placed_p99_ms']:>6.3f} "
            f"{r['no_fit_s']:>9.3f} {r['build_s']:>8.3f} {r['startup_s']:>10.3f} {r['peak_mb']:>8.0f}"
        )
    if len(rows) > 1:
        print()
        base = rows[0]
        print(f"growth relative to {base['nodes']} nodes (nodes ratio -> figure ratio):")
        for r in rows[1:]:
            k = r["nodes"] / base["nodes"]
            print(
                f"  x{k:g} nodes: placing p50 x{r['placed_p50_ms'] / base['placed_p50_ms']:.2f}, "
                f"p99 x{r['placed_p99_ms'] / base['placed_p99_ms']:.2f}, "
                f"no-fit cycle x{r['no_fit_s'] / base['no_fit_s']:.2f}, "
                f"start-up x{r['startup_s'] / base['startup_s']:.2f}, peak memory x{r['peak_mb'] / base['peak_mb']:.2f}"
            )


if __name__ == "__main__":
    main()
