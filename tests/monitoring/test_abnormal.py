"""Abnormal jobs on the local backend: the task's CPU use stands in for a GPU figure where
the machine has no nvidia-smi, and the admin lists and stops the jobs that idle or run
too long."""

import shutil
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.jobs.models import Job
from apps.jobs.worker.loop import run_scheduler
from apps.monitoring.abnormal import abnormal_jobs
from apps.monitoring.efficiency import sample_cluster
from apps.monitoring.models import JobGpuUse, TaskUtilization
from tests.worker.conftest import job_yaml, submit, worker  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="measures CPU use where no GPU figure exists")


@pytest.fixture(autouse=True)
def _data_dir(settings, tmp_path):
    settings.PAI_DATA_DIR = tmp_path
    # A spinning task gets a share of a busy 2-core machine's CPU, not all of a core: the
    # line between idle and busy sits low, where a sleeping task never reaches.
    settings.PAI_ABNORMAL_GPU_PERCENT = 2


# The worker's loop closes stale connections as it starts: the test may not sit in a transaction.
@pytest.mark.django_db(transaction=True)
def test_cpu_use_stands_in_for_gpus_and_idle_or_long_jobs_are_abnormal_for_who_may_stop_them(
    world, worker, submit, client, settings
):
    sleeper = submit(world.a_member, job_yaml("sleeper", roles={"main": {"gpu": 1, "commands": ["sleep 600"]}}))
    spinner = submit(world.a_member, job_yaml("spinner", roles={"main": {"gpu": 1, "commands": ["while :; do :; done"]}}))
    veteran = submit(world.b_member, job_yaml("veteran", vc="team_b",
                                              roles={"main": {"gpu": 1, "commands": ["while :; do :; done"]}}))
    for job in (sleeper, spinner, veteran):
        worker.wait_for_state(job, "RUNNING")
    # The worker's loop samples every PAI_GPU_SAMPLE_SECONDS, after its cycles.
    settings.PAI_GPU_SAMPLE_SECONDS = 0
    run_scheduler(once=True)
    assert set(TaskUtilization.objects.values_list("job_id", "source", "samples")) == {
        (sleeper.pk, "cpu", 1), (spinner.pk, "cpu", 1), (veteran.pk, "cpu", 1)
    }
    TaskUtilization.objects.all().delete()
    JobGpuUse.objects.all().delete()

    # The first sample is taken eleven minutes back: the admin's page below sees real time.
    backend, t0 = worker.controller.backend, timezone.now() - timedelta(minutes=11)
    figures = sample_cluster(worker.cluster, backend, now=t0)
    assert {f.source for f in figures.values()} == {"cpu"} and len(figures) == 3
    time.sleep(1.0)
    figures = sample_cluster(worker.cluster, backend)
    percent = {TaskUtilization.objects.get(pk=pk).job_id: f.percent for pk, f in figures.items()}
    assert percent[sleeper.pk] < 1 and percent[spinner.pk] > 2, percent
    assert JobGpuUse.objects.get(job=sleeper).under_abnormal_since == t0
    assert JobGpuUse.objects.get(job=spinner).under_abnormal_since is None
    # The veteran's attempt has run for six days.
    Job.objects.filter(pk=veteran.pk).update(launched_at=timezone.now() - timedelta(days=6))

    found = {a.job.name: a.reasons for a in abnormal_jobs(world.root)}
    assert set(found) == {"sleeper", "veteran"}
    assert found["sleeper"][0].startswith("GPU use below 2 % for 11 minutes (last sample 0.")
    assert found["veteran"] == ("running for 6.0 days (more than 5)",)
    # Team admins see their team's; members their own.
    assert [a.job.name for a in abnormal_jobs(world.a_admin)] == ["sleeper"]
    assert [a.job.name for a in abnormal_jobs(world.b_member)] == ["veteran"]
    assert abnormal_jobs(world.a_member, now=t0 + timedelta(minutes=5)) == []  # idle for 5 minutes only

    # The admin's list, with the stop action of the jobs admin.
    client.force_login(world.a_admin)
    page = client.get("/admin/monitoring/abnormalrunningjob/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "sleeper" in text and "veteran" not in text and "spinner" not in text
    client.force_login(world.root)
    text = client.get("/admin/monitoring/abnormalrunningjob/").content.decode()
    assert "sleeper" in text and "veteran" in text and "running for 6.0 days" in text and "spinner" not in text

    # The portal's page: the same jobs for the same people, each with why and a stop button.
    client.force_login(world.a_admin)
    page = client.get("/jobs/abnormal/")
    assert page.status_code == 200
    rows = {r.split('"', 1)[0]: r for r in page.content.decode().split('<tr data-job="')[1:]}
    assert list(rows) == ["a_member~sleeper"]
    assert "GPU use below 2 % for 11 minutes" in rows["a_member~sleeper"]
    assert 'formaction="/jobs/a_member~sleeper/stop"' in rows["a_member~sleeper"]
    client.force_login(world.b_member)
    rows = client.get("/jobs/abnormal/").content.decode().split('<tr data-job="')[1:]
    assert [r.split('"', 1)[0] for r in rows] == ["b_member~veteran"]
    assert "running for 6.0 days (more than 5)" in rows[0]
    client.force_login(world.root)
    rows = client.get("/jobs/abnormal/").content.decode().split('<tr data-job="')[1:]
    assert [r.split('"', 1)[0] for r in rows] == ["b_member~veteran", "a_member~sleeper"]  # longest-running first
    client.force_login(world.a_admin)
    response = client.post("/jobs/a_member~sleeper/stop", {"next": "/jobs/abnormal/"})
    assert (response.status_code, response["Location"]) == (302, "/jobs/abnormal/")
    assert "No abnormal job." in client.get("/jobs/abnormal/").content.decode()  # stopping: no longer running
    # The admin's stop action.
    client.force_login(world.root)
    response = client.post("/admin/monitoring/abnormalrunningjob/",
                           {"action": "stop_jobs", "_selected_action": [veteran.pk]})
    assert response.status_code == 302
    assert set(Job.objects.filter(pk__in=[sleeper.pk, veteran.pk]).values_list("execution_type", flat=True)) == {"STOP"}
    assert Job.objects.get(pk=spinner.pk).execution_type == "START"
    assert worker.wait_for_state(sleeper, "STOPPED").app_exit_code == -210
