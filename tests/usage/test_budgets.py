"""GPU-hour budgets enforced by the scheduler: a job that would pass its VC's budget waits,
with the numbers in its reason, and runs once the next month begins."""

import time
from datetime import timedelta

from django.utils import timezone

from apps.jobs.models import Job
from apps.usage.ledger import month_start, next_month
from apps.usage.models import GpuHourBudget, UsageRecord
from tests.worker.conftest import job_yaml, submit  # noqa: F401 (submit is a fixture)

from .test_ledger import worker  # noqa: F401 (a fixture)


def spent(world, gpu_hours, at):
    vc = world.vc_a
    UsageRecord.objects.create(
        tenant=world.tenant_a, virtual_cluster=vc, vc_name=vc.name, user=world.a_member, username="a_member",
        cluster_name="local", job_id=10**9, job_name="earlier", attempt_index=0, priority_class="test", sku="A100",
        gpus=16, cpus=128, month=month_start(at).date(), started_at=at, ended_at=at, gpu_hours=gpu_hours,
        cpu_hours=8 * gpu_hours,
    )


def test_a_vc_at_its_budget_holds_a_job_with_the_numbers_and_runs_it_next_month(world, worker, submit):
    now = timezone.now()
    GpuHourBudget.objects.create(virtual_cluster=world.vc_a, gpu_hours_per_month=1000)
    spent(world, 995, month_start(now) + timedelta(minutes=1))
    big = submit(world.a_member, job_yaml("big", roles={"main": {"gpu": 8, "commands": ["sleep 30"]}}))
    small = submit(world.a_member, job_yaml("small", roles={"main": {"gpu": 1, "commands": ["sleep 30"]}}))
    other = submit(world.b_member, job_yaml("other", vc="team_b", roles={"main": {"gpu": 8, "commands": ["sleep 30"]}}))

    worker.cycle(now=time.time())

    big.refresh_from_db()
    assert big.placement is None and big.state == "WAITING"
    assert big.wait_reason == (
        "VC team_a has used 995 of 1,000 GPU-hours this month; the job needs 8 GPUs for at least an hour "
        "(8 GPU-hours) and waits for the next period or a larger budget"
    )
    # 995 + 1 fits; the budget is about numbers, not a switch. Other VCs are not concerned.
    assert Job.objects.get(pk=small.pk).placement is not None
    assert Job.objects.get(pk=other.pk).placement is not None

    following = next_month(month_start(now))
    worker.cycle(now=(following + timedelta(minutes=1)).timestamp())

    big.refresh_from_db()
    assert big.placement is not None, big.wait_reason
    assert big.wait_reason == ""


def test_running_jobs_hold_their_first_hour_and_cpu_jobs_are_never_held(world, worker, submit):
    GpuHourBudget.objects.create(virtual_cluster=world.vc_a, gpu_hours_per_month=10)
    first = submit(world.a_member, job_yaml("first", roles={"main": {"gpu": 8, "commands": ["sleep 30"]}}))
    worker.cycle(now=time.time())
    assert Job.objects.get(pk=first.pk).placement is not None

    second = submit(world.a_member, job_yaml("second", roles={"main": {"gpu": 4, "commands": ["sleep 30"]}}))
    cpu = submit(world.a_member, job_yaml("cpu", roles={"main": {"gpu": 0, "commands": ["sleep 30"]}}))
    worker.cycle(now=time.time())

    second.refresh_from_db()
    assert second.placement is None
    assert second.wait_reason.startswith("VC team_a has used 0 of 10 GPU-hours this month, and its running jobs hold 8 more;")
    assert Job.objects.get(pk=cpu.pk).placement is not None


def test_figures_in_the_reason_are_rounded_as_people_write_them(world, worker, submit):
    GpuHourBudget.objects.create(virtual_cluster=world.vc_a, gpu_hours_per_month=1000)
    spent(world, 999.96, timezone.now())
    job = submit(world.a_member, job_yaml("one", roles={"main": {"gpu": 1, "commands": ["true"]}}))
    worker.cycle(now=time.time())
    job.refresh_from_db()
    assert job.wait_reason.startswith("VC team_a has used 1,000 of 1,000 GPU-hours this month;")
