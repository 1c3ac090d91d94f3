"""The usage ledger: written when an attempt ends, kept after the job is deleted, split by month."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from apps.jobs.models import Job, JobAttempt
from apps.jobs.retention import delete_expired_jobs
from apps.usage.ledger import month_pieces, record_attempts, running_pieces
from apps.usage.models import UsageRecord
from tests.worker.conftest import Worker, job_yaml, submit  # noqa: F401 (submit is a fixture)


@pytest.fixture
def worker(world, settings, tmp_path):
    settings.PAI_DATA_DIR = tmp_path
    w = Worker(world.cluster)
    yield w
    for pod in w.controller.backend.list_pods():
        w.controller.backend.delete_pod(pod.name, grace_seconds=0)
    w.close()


def test_an_attempt_that_ends_is_written_to_the_ledger_and_outlives_its_job(world, worker, submit):
    two_roles = job_yaml("train", roles={
        "gpu": {"gpu": 2, "commands": ["sleep 1"]},
        "cpu": {"gpu": 0, "commands": ["sleep 1"]},
    })
    job = worker.wait_for_state(submit(world.a_member, two_roles), "SUCCEEDED", "FAILED")
    assert job.state == "SUCCEEDED"
    attempt = job.attempts.get()
    held = (attempt.completed_at - attempt.created_at).total_seconds() / 3600

    rows = {r.sku: r for r in UsageRecord.objects.filter(job_id=job.pk)}
    assert set(rows) == {"A100", "CPU"}
    a100, cpu = rows["A100"], rows["CPU"]
    assert (a100.tenant, a100.vc_name, a100.username, a100.job_name, a100.attempt_index) == (
        world.tenant_a, "team_a", "a_member", "train", 0
    )
    # 2 A100 leaf cells (1 GPU and 8 CPUs each); one CPU leaf cell (4 CPUs).
    assert (a100.gpus, a100.cpus, cpu.gpus, cpu.cpus) == (2, 16.0, 0, 4.0)
    assert a100.gpu_hours == pytest.approx(2 * held, rel=1e-6) and a100.gpu_hours > 0
    assert a100.cpu_hours == pytest.approx(16 * held, rel=1e-6)
    assert cpu.gpu_hours == 0 and cpu.cpu_hours == pytest.approx(4 * held, rel=1e-6)
    assert a100.month == timezone.localtime(attempt.created_at).date().replace(day=1)

    Job.objects.filter(pk=job.pk).update(completed_at=timezone.now() - timedelta(days=365))
    assert delete_expired_jobs() == 1
    assert not Job.objects.filter(pk=job.pk).exists()
    assert UsageRecord.objects.filter(job_id=job.pk).count() == 2


def test_a_retried_attempt_and_the_next_one_each_have_their_rows(world, worker, submit):
    job = submit(world.a_member, job_yaml("flaky", retry=1, roles={"main": {"gpu": 1, "commands": ["exit 255"]}}))
    job = worker.wait_for_state(job, "FAILED")
    assert sorted(UsageRecord.objects.filter(job_id=job.pk).values_list("attempt_index", flat=True)) == [0, 1]


def test_an_attempt_across_a_month_end_counts_in_both_months(world, submit):
    job = submit(world.a_member, job_yaml("long", roles={"main": {"gpu": 4, "commands": ["sleep 1"]}}))
    start = datetime(2026, 1, 31, 22, 0, tzinfo=UTC)
    attempt = JobAttempt.objects.create(job=job, index=0)
    JobAttempt.objects.filter(pk=attempt.pk).update(created_at=start)
    attempt.refresh_from_db()

    record_attempts([attempt], start + timedelta(hours=5))
    record_attempts([attempt], start + timedelta(hours=5))  # a repeated completion writes nothing more

    rows = list(UsageRecord.objects.filter(job_id=job.pk).order_by("month").values_list("month", "gpu_hours"))
    assert [(m.isoformat(), round(h, 6)) for m, h in rows] == [("2026-01-01", 8.0), ("2026-02-01", 12.0)]


def test_month_pieces_split_at_every_month_end():
    start = datetime(2026, 11, 30, 12, tzinfo=UTC)
    end = datetime(2027, 1, 1, 6, tzinfo=UTC)
    pieces = month_pieces(start, end)
    assert [(m.isoformat(), (b - a).total_seconds() / 3600) for m, a, b in pieces] == [
        ("2026-11-01", 12.0), ("2026-12-01", 31 * 24.0), ("2027-01-01", 6.0),
    ]


def test_running_attempts_count_up_to_now(world, worker, submit):
    job = submit(world.a_member, job_yaml("running", roles={"main": {"gpu": 8, "commands": ["sleep 30"]}}))
    job = worker.wait_for_state(job, "RUNNING")
    created = job.attempts.get().created_at
    (piece,) = running_pieces(created + timedelta(hours=2))
    assert (piece.job["pk"], piece.sku, piece.gpus) == (job.pk, "A100", 8)
    assert piece.gpus * piece.hours == pytest.approx(16.0, abs=1e-6)
    assert not UsageRecord.objects.filter(job_id=job.pk).exists()
