"""The cycle: no head-of-line blocking, starvation reservations and backfill, wait
positions, maximum runtime."""

from scheduler import Engine, GpuHourBudget

from .helpers import a100_cluster, gang, nodes_of, placed, rack, vc, waiting

HOUR = 3600.0


def one_node_team(**kw):
    return Engine(a100_cluster(rack("r1", "n1", "n2")), [vc("team", ("A100-NODE", 1)), vc("other", ("A100-NODE", 1))],
                  **kw)


def test_big_gang_that_does_not_fit_does_not_block_smaller_ones_behind_it():
    engine = one_node_team()
    engine.schedule([gang("half", "team", (1, 4))], now=0)

    result = engine.schedule([gang("big", "team", (1, 8), at=1), gang("small", "team", (1, 2), at=2)], now=10)

    assert "big" in waiting(result)
    assert placed(result, "small")


def test_starving_gang_reserves_cells_and_only_short_jobs_backfill():
    engine = one_node_team(starvation_threshold=HOUR)
    engine.schedule([gang("runner", "team", (1, 4), max_runtime=2 * HOUR)], now=0)  # ends at 2h

    queue = [
        gang("big", "team", (1, 8), at=0),
        gang("short", "team", (1, 2), at=10, max_runtime=HOUR / 2),
        gang("long", "team", (1, 2), at=20, max_runtime=3 * HOUR),
        gang("unbounded", "team", (1, 2), at=30),
    ]
    early = engine.schedule(queue, now=600)
    # Before the threshold there is no reservation: small jobs fill the node.
    assert {a.job_id for a in early.placements} == {"short", "long"}
    for job in ("short", "long"):
        engine.release(job)

    late = engine.schedule(queue, now=HOUR + 600)

    # "short" ends at 1:40, before "runner" frees the node at 2:00; the others would not.
    assert {a.job_id for a in late.placements} == {"short"}
    # They would take the quota "big" holds, and the devices.
    blocked = (
        "blocked behind the reservation for job big on n1, which holds 8 of the 8 A100 of VC 'team' "
        "until ~02:00 UTC (in 50 min); "
    )
    assert waiting(late)["long"] == blocked + "this job's maximum runtime would end later"
    assert waiting(late)["unbounded"] == blocked + "this job declares no maximum runtime"
    # Reasons describe the state at the end of the cycle, after "short" started.
    assert "VC 'team' has 2 of 8 A100 free" in waiting(late)["big"]


def test_reservation_does_not_bind_other_vcs():
    engine = one_node_team(starvation_threshold=HOUR)
    engine.schedule([gang("runner", "team", (1, 4), max_runtime=2 * HOUR)], now=0)

    result = engine.schedule([gang("big", "team", (1, 8), at=0), gang("theirs", "other", (1, 8), at=5)], now=2 * HOUR - 1)

    assert placed(result, "theirs")


def test_waiting_jobs_carry_their_position_in_their_vc():
    engine = one_node_team()
    engine.schedule([gang("fill", "team", (1, 8), priority=1000), gang("fill2", "other", (1, 8))], now=0)

    result = engine.schedule([
        gang("t-late", "team", (1, 1), at=5),
        gang("t-prod", "team", (1, 1), at=9, priority=100),
        gang("o-1", "other", (1, 1), at=1),
        gang("t-early", "team", (1, 1), at=2),
    ], now=10)

    assert {w.job_id: w.position for w in result.waiting} == {"t-prod": 1, "o-1": 1, "t-early": 2, "t-late": 3}


def test_job_past_its_maximum_runtime_is_expired_and_its_cells_reused():
    engine = one_node_team()
    engine.schedule([gang("limited", "team", (1, 8), max_runtime=100)], now=0)

    early = engine.schedule([gang("next", "team", (1, 8))], now=99)
    late = engine.schedule([gang("next", "team", (1, 8))], now=100)

    assert early.expired == () and "next" in waiting(early)
    assert late.expired == ("limited",)
    assert placed(late, "next")


def test_vc_over_its_gpu_hour_budget_runs_only_opportunistic_jobs():
    engine = one_node_team()

    result = engine.schedule(
        [gang("g", "team", (1, 1)), gang("o", "team", (1, 1), priority=-1, at=1), gang("x", "other", (1, 1), at=2)],
        now=0,
        budgets={"team": GpuHourBudget(limit=1000, used=1000, period="this month")},
    )

    assert {a.job_id for a in result.placements} == {"o", "x"}
    assert waiting(result)["g"] == (
        "VC team has used 1,000 of 1,000 GPU-hours this month; the job needs 1 GPU for at least an hour "
        "(1 GPU-hours) and waits for the next period or a larger budget"
    )


def test_a_job_waits_when_its_first_hour_would_pass_the_budget_and_admissions_reserve_theirs():
    engine = one_node_team()
    budgets = {"team": GpuHourBudget(limit=10, used=3, period="this month", reserved=1)}

    result = engine.schedule(
        [gang("a", "team", (1, 4), at=0), gang("b", "team", (1, 4), at=1), gang("c", "team", (1, 2), at=2),
         gang("short", "team", (1, 2), at=3, max_runtime=900)],
        now=0,
        budgets=budgets,
    )

    # 3 used + 1 reserved + 4 for a: 8; b's 4 more would make 12; c's 2 make 10; then the
    # 15-minute job's 0.5 is too much.
    assert {a.job_id for a in result.placements} == {"a", "c"}
    assert waiting(result)["b"] == (
        "VC team has used 3 of 10 GPU-hours this month, and its running jobs hold 5 more; the job needs 4 GPUs "
        "for at least an hour (4 GPU-hours) and waits for the next period or a larger budget"
    )
    assert waiting(result)["short"] == (
        "VC team has used 3 of 10 GPU-hours this month, and its running jobs hold 7 more; the job needs 2 GPUs "
        "for its maximum runtime (0.5 GPU-hours) and waits for the next period or a larger budget"
    )


def test_a_budget_counts_only_its_own_vc():
    engine = one_node_team()

    result = engine.schedule([gang("x", "other", (1, 8))], now=0, budgets={"team": GpuHourBudget(1, 1)})

    assert placed(result, "x")


def test_wait_reason_says_when_free_quota_is_split_across_nodes():
    engine = Engine(a100_cluster(rack("r1", "n1", "n2")), [vc("team", ("A100-NODE", 2))])
    engine.schedule([gang("a", "team", (1, 6)), gang("b", "team", (1, 6), at=1)], now=0)

    result = engine.schedule([gang("c", "team", (1, 4))], now=1)

    assert waiting(result)["c"] == (
        "VC 'team' has 4 of 16 A100 free; the job needs 1 × 4 A100 on one node; "
        "they are split: at most 2 idle A100 on one healthy node in cells the VC can use"
    )


def test_reservation_without_a_known_end_lets_no_job_backfill():
    engine = one_node_team(starvation_threshold=HOUR)
    engine.schedule([gang("runner", "team", (1, 4))], now=0)  # no maximum runtime

    result = engine.schedule(
        [gang("big", "team", (1, 8), at=0), gang("tiny", "team", (1, 1), at=5, max_runtime=60)], now=2 * HOUR
    )

    assert result.placements == ()
    assert waiting(result)["tiny"] == (
        "blocked behind the reservation for job big on n1, which holds 8 of the 8 A100 of VC 'team' "
        "until its running jobs finish "
        "(they declared no maximum runtime); this job's maximum runtime would end later"
    )


def test_two_starving_gangs_reserve_different_nodes():
    engine = Engine(a100_cluster(rack("r1", "n1", "n2")), [vc("team", ("A100-NODE", 2))], starvation_threshold=HOUR)
    engine.schedule([gang("run1", "team", (1, 6), max_runtime=2 * HOUR),
                     gang("run2", "team", (1, 6), at=1, max_runtime=3 * HOUR)], now=0)
    assert [(a.job_id, a.pods[0].node) for a in engine.allocations()] == [("run1", "n1"), ("run2", "n2")]

    result = engine.schedule([
        gang("big1", "team", (1, 8), at=0, max_runtime=HOUR),
        gang("big2", "team", (1, 8), at=1, max_runtime=HOUR),
        gang("mid", "team", (1, 2), at=10, max_runtime=1.5 * HOUR),
        gang("late", "team", (1, 2), at=11, max_runtime=3 * HOUR),
    ], now=HOUR)

    # "mid" ends at 2:30: before big2's node frees up (3:00), not before big1's (2:00).
    assert nodes_of(result, "mid") == ["n2"]
    # "late" would also keep quota big1 needs at 2:00.
    assert waiting(result)["late"].startswith(
        "blocked behind the reservation for job big1 on n1, which holds 8 of the 16 A100 of VC 'team' until ~02:00 UTC"
    )
