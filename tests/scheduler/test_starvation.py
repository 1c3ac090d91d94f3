"""Starvation protection (issue 17, item 9): a starving gang's reservation holds its VC's
quota as well as devices, so that a stream of small jobs cannot starve it; only jobs
that end before it expects to start backfill. Virtual time: one cycle every 100 s."""

from scheduler import Engine, ReservationInfo

from .helpers import a100_cluster, gang, rack, vc, waiting


def two_vcs(**kw):
    """Eight 8-GPU nodes n00..n07 in racks of two; VC s owns 2 nodes with a starvation
    threshold of 600 s, VC o the other 6 with the engine's default (an hour)."""
    cluster = a100_cluster(*(rack(f"r{i}", f"n{2 * i:02d}", f"n{2 * i + 1:02d}") for i in range(4)))
    return Engine(cluster, [vc("s", ("A100-NODE", 2), starvation_threshold=600), vc("o", ("A100-NODE", 6))], **kw)


def small(n, at, max_runtime=1000):
    return gang(f"small{n:03d}", "s", (1, 1), at=at, max_runtime=max_runtime)


def test_small_jobs_no_longer_starve_the_big_gang_through_its_vcs_quota():
    engine = two_vcs()
    queue = [small(n, 0) for n in range(16)]
    running = []  # (started at, job id), oldest first
    big = gang("BIG", "s", (2, 8), at=10)
    arrived = 16
    placed_at, seen = {}, {}
    for t in range(0, 2100, 100):
        if t:
            # The two oldest small jobs finish; two new ones (same maximum runtime) arrive.
            for _, job_id in running[:2]:
                engine.release(job_id)
            running = running[2:]
            queue += [small(arrived, t), small(arrived + 1, t)]
            arrived += 2
        if t == 100:
            queue.append(big)
        if t == 1000:
            queue.append(small(900, t, max_runtime=300))  # ends at 1,300, before BIG may start
        result = engine.schedule(queue, t)
        seen[t] = result
        for alloc in result.placements:
            placed_at[alloc.job_id] = (t, sorted({p.node for p in alloc.pods}))
            if alloc.job_id != "BIG":
                running.append((t, alloc.job_id))
        done = {a.job_id for a in result.placements}
        queue = [g for g in queue if g.job_id not in done]
        if "BIG" in done:
            break

    # BIG waited past 600 s at t=700: it holds n00+n01 and its 16 A100 of s's quota until
    # 1,600, when the jobs there reach their maximum runtime.
    first = seen[700]
    assert first.reservations == (
        ReservationInfo(
            job_id="BIG", kind="starvation", nodes=("n00", "n01"),
            devices=(("n00", tuple(range(8))), ("n01", tuple(range(8)))), until=1600.0,
            vc="s", leaf_cells=(("A100", 16),),
        ),
    )
    assert waiting(first)["BIG"].startswith(
        "holds a reservation (devices on n00, n01 and 16 A100 of VC 's''s quota) until ~00:26 UTC (in 15 min), "
        "as it waited longer than the VC's starvation threshold; VC 's' has 2 of 16 A100 free"
    )
    assert waiting(first)["small028"] == (
        "blocked behind the reservation for job BIG on n00, n01, which holds 16 of the 16 A100 of VC 's' "
        "until ~00:26 UTC (in 15 min); this job's maximum runtime would end later"
    )
    # From then on no small job of s starts, on any node, except the one that ends in time;
    # BIG starts as soon as its VC's jobs are gone, before the reservation's expected start.
    late = {job: at for job, at in placed_at.items() if at[0] >= 700}
    assert late == {"small900": (1000, ["n00"]), "BIG": (1400, ["n00", "n01"])}
    # Every cycle in between, the reasons agree: BIG holds its reservation, small jobs wait behind it.
    for t in range(700, 1400, 100):
        reasons = waiting(seen[t])
        assert reasons["BIG"].startswith("holds a reservation (devices on n00, n01 and 16 A100")
        assert all(
            reason.startswith("blocked behind the reservation for job BIG")
            for job, reason in reasons.items() if job != "BIG"
        ), reasons


def test_the_threshold_is_the_vcs_own():
    engine = two_vcs()
    engine.schedule([gang(f"fill{n}", "o", (1, 8), max_runtime=5000) for n in range(6)], now=0)
    queue = [gang("wide", "o", (2, 8), at=0), gang("wide_s", "s", (1, 8), at=0)]
    engine.schedule([gang("held", "s", (1, 4), max_runtime=5000)], now=0)
    engine.schedule([gang("held2", "s", (1, 4), max_runtime=5000, at=1)], now=0)
    engine.schedule([gang("held3", "s", (1, 8), max_runtime=5000, at=2)], now=0)

    result = engine.schedule(queue, now=700)

    # s's gang waited past s's 600 s; o's gang not past the default hour.
    assert [r.job_id for r in result.reservations] == ["wide_s"]
    result = engine.schedule(queue, now=3600)
    assert [r.job_id for r in result.reservations] == ["wide", "wide_s"]
