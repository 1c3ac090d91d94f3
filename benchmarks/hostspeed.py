"""How fast this host runs Python right now, for reading figures across runs.

A shared machine's speed drifts (its neighbours, its CPU's clock): on the 2-core machines
pai is measured on, one identical setup took from 11 to 21 s within an hour. Benchmarks
print this figure beside theirs, so that two runs are compared on equal terms or not at
all: a fixed pure-Python workload (dict and str work, like pai's own), the best of a few
tries, in millions of loop iterations a second.
"""

import time

LOOPS = 200_000


def _work(n):
    table = {}
    for i in range(n):
        key = f"pod-{i % 997}"
        table[key] = table.get(key, 0) + i
    return len(table)


def host_speed(tries=10):
    """Millions of iterations a second of the fixed workload (best of `tries`)."""
    best = float("inf")
    for _ in range(tries):
        started = time.perf_counter()
        _work(LOOPS)
        best = min(best, time.perf_counter() - started)
    return LOOPS / best / 1e6
