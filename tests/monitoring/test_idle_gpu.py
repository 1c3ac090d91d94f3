"""The idle-GPU rule in virtual time, driven by a DCGM-like exporter through a real Prometheus.

Jobs run on the Kubernetes backend (the in-suite API server); the fixture exporter serves
`DCGM_FI_DEV_GPU_UTIL` for their pods, Prometheus scrapes it, and the worker's sampling
reads it back through Prometheus' HTTP API. The samples are taken at virtual times hours
apart, so the rule's hours pass in milliseconds.
"""

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone
from rest_framework.test import APIClient

from apps.audit.models import AuditEntry
from apps.jobs.models import Job, JobAttempt, TaskAttempt
from apps.jobs.services import add_tag
from apps.jobs.worker import lease
from apps.monitoring.efficiency import sample_cluster
from apps.monitoring.models import IdleGpuNotice, JobGpuUse
from apps.tenants.services import update_policies
from scheduler import exitcodes
from tests.kubernetes.conftest import _fast_kubernetes_retries, kube_cluster, kubelet  # noqa: F401 (fixtures)
from tests.kubernetes.test_worker import Driver
from tests.kubeserver.fixtures import kube_server  # noqa: F401 (a fixture)
from tests.worker.conftest import Worker, job_yaml, submit  # noqa: F401 (submit is a fixture)

from .prometheus import free_port, wait_for

HOUR = timedelta(hours=1)


@pytest.fixture
def drive(kube_cluster, kubelet):
    driver = Driver(Worker(kube_cluster), kubelet)
    yield driver
    driver.worker.close()


@pytest.fixture
def gpu_metrics(prometheus, dcgm_exporter, kube_cluster):
    """The cluster reads GPU utilisation from the session's Prometheus, which scrapes the
    fixture exporter; `gpu_metrics(job, percent)` sets what the job's pods use and waits
    until Prometheus has scraped it."""
    dcgm_exporter.clear()
    prometheus.scrape("dcgm", dcgm_exporter.url)
    kube_cluster.prometheus_url = prometheus.url
    kube_cluster.save()

    def set_use(uses):
        expected = {}
        for job, percent in uses.items():
            for ta in TaskAttempt.objects.filter(task__job_attempt__job=job, completed_at__isnull=True):
                dcgm_exporter.set(f"pai-{job.tenant.slug}", ta.pod_name, percent)
                expected[ta.pod_name] = float(percent)

        def scraped():
            found = prometheus.query("DCGM_FI_DEV_GPU_UTIL")
            by_pod = {dict(labels)["pod"]: value for labels, value in found.items()}
            return all(by_pod.get(pod) == value for pod, value in expected.items())

        wait_for(scraped, timeout=20, what="Prometheus to scrape the exporter's new figures")

    yield set_use
    dcgm_exporter.clear()


def running(drive, submit, user, name, gpu=1):
    job = submit(user, job_yaml(name, vc="team_a" if user.username.startswith("a_") else "team_b",
                                roles={"main": {"gpu": gpu, "commands": ["sleep 1000"]}}))
    return drive.wait_for_state(job, "RUNNING")


def test_idle_job_is_warned_then_stopped_exempt_and_busy_jobs_are_left_alone(
    world, drive, submit, gpu_metrics, tasks_inline, django_capture_on_commit_callbacks
):
    update_policies(world.a_admin, world.tenant_a, idle_gpu_threshold_percent=5, idle_gpu_hours=2,
                    idle_gpu_grace_hours=3, idle_gpu_action="stop")
    idle = running(drive, submit, world.a_member, "idle")
    exempt = running(drive, submit, world.a_member, "exempt")
    busy = running(drive, submit, world.a_member, "busy", gpu=2)
    add_tag(world.a_member, exempt, "idle-gpu-exempt")
    gpu_metrics({idle: 2, exempt: 0, busy: 85})
    cluster, t0 = drive.worker.cluster, timezone.now()
    lease.acquire("worker")  # the rule runs in the leading worker: a stop kicks no other loop

    def sample(hours, pods=3):
        with django_capture_on_commit_callbacks(execute=True):
            figures = sample_cluster(cluster, now=t0 + hours * HOUR)
        assert len(figures) == pods, figures  # every running pod got a sample from Prometheus

    sample(0)
    sample(1)
    assert mail.outbox == []  # below 5 % for one hour of the two
    sample(2)
    # Two hours below the threshold: the owner is warned, with the job's figures.
    assert [m.to for m in mail.outbox] == [["a_member@example.com"]]
    warning = mail.outbox[0]
    assert warning.subject == "[pai] Job a_member~idle leaves its GPUs idle"
    assert "Last sample: 2.0 %" in warning.body
    assert "Below 5 % since" in warning.body and "(2.0 hours), 2.0 % on average" in warning.body
    assert "If it stays idle 3 more hours, pai stops it (exit code -230)." in warning.body
    assert warning.body.endswith("/jobs/a_member~idle/")  # its page in the portal
    assert AuditEntry.objects.filter(action="job.idle_gpu.warned", object_id=str(idle.pk)).count() == 1

    sample(3)
    sample(4)
    assert len(mail.outbox) == 1 and Job.objects.get(pk=idle.pk).execution_type == "START"
    sample(5)  # three hours after the warning: stopped
    stopped = drive.wait_for_state(idle, "STOPPED")
    assert stopped.app_exit_code == exitcodes.STOPPED_FOR_LOW_GPU_USE == -230
    assert stopped.retries == 0
    attempt = JobAttempt.objects.get(job=idle)
    assert attempt.exit_code == -230
    assert "stopped for low GPU use: 2.0 % on average over 5.0 hours" in attempt.exit_diagnostics
    assert set(TaskAttempt.objects.filter(task__job_attempt=attempt).values_list("exit_code", flat=True)) == {-230}
    assert [m.subject for m in mail.outbox][1:] == ["[pai] Job a_member~idle was stopped for low GPU use"]
    assert "The job ended with exit code -230 and is not retried." in mail.outbox[1].body
    assert list(
        AuditEntry.objects.filter(object_id=str(idle.pk), action__startswith="job.").order_by("id")
        .values_list("action", "actor_name")
    )[-3:] == [("job.idle_gpu.warned", "system"), ("job.stop", "system"), ("job.idle_gpu.stopped", "system")]

    # The job detail shows the figures; OpenPAI's fields are unchanged.
    client = APIClient()
    client.force_authenticate(world.a_member)
    body = client.get("/api/v2/jobs/a_member~idle").json()
    assert body["jobStatus"]["appExitCode"] == -230 and body["jobStatus"]["state"] == "STOPPED"
    efficiency = body["gpuEfficiency"]
    assert efficiency["source"] == "prometheus" and efficiency["samples"] == 6
    assert efficiency["percent"] == 2.0 and efficiency["warnedTime"] and efficiency["actionTime"]
    assert [(t["taskRoleName"], t["percent"], t["samples"]) for t in efficiency["tasks"]] == [("main", 2.0, 6)]

    # Later samples never touch the exempt job nor the busy one.
    sample(24, pods=2)  # the stopped job's pods are gone
    for job in (exempt, busy):
        job = Job.objects.get(pk=job.pk)
        assert job.state == "RUNNING" and job.execution_type == "START"
        assert not IdleGpuNotice.objects.filter(job=job).exists()
        assert not AuditEntry.objects.filter(object_id=str(job.pk), action__startswith="job.idle_gpu").exists()
    assert JobGpuUse.objects.get(job=exempt).low_since == t0  # measured all along, never acted on
    assert JobGpuUse.objects.get(job=busy).low_since is None
    body = client.get("/api/v2/jobs/a_member~exempt").json()["gpuEfficiency"]
    assert body["idleRule"]["exempt"] is True and body["percent"] == 0.0
    assert len(mail.outbox) == 2

    # A source that does not answer, or answers an error, skips the round: no sample, no action.
    samples = dict(JobGpuUse.objects.values_list("job_id", "samples"))
    cluster.gpu_utilization_query = "DCGM_FI_DEV_GPU_UTIL{"  # not PromQL: Prometheus answers 400
    cluster.save()
    assert sample_cluster(cluster, now=t0 + 48 * HOUR) == {}
    cluster.gpu_utilization_query, cluster.prometheus_url = "DCGM_FI_DEV_GPU_UTIL", f"http://127.0.0.1:{free_port()}"
    cluster.save()
    assert sample_cluster(cluster, now=t0 + 72 * HOUR) == {}
    assert dict(JobGpuUse.objects.values_list("job_id", "samples")) == samples
    assert len(mail.outbox) == 2 and Job.objects.get(pk=exempt.pk).execution_type == "START"


def test_with_notify_the_team_admins_are_told_and_a_recovered_job_starts_a_new_spell(
    world, drive, submit, gpu_metrics, tasks_inline, django_capture_on_commit_callbacks
):
    update_policies(world.b_admin, world.tenant_b, idle_gpu_threshold_percent=10, idle_gpu_hours=1,
                    idle_gpu_grace_hours=2, idle_gpu_action="notify")
    job = running(drive, submit, world.b_member, "wobbly")
    cluster, t0 = drive.worker.cluster, timezone.now()
    lease.acquire("worker")

    def sample(hours):
        with django_capture_on_commit_callbacks(execute=True):
            assert len(sample_cluster(cluster, now=t0 + hours * HOUR)) == 1

    gpu_metrics({job: 3})
    sample(0)
    sample(1)
    assert [(m.subject, m.to) for m in mail.outbox] == [
        ("[pai] Job b_member~wobbly leaves its GPUs idle", ["b_member@example.com"])
    ]
    assert "If it stays idle 2 more hours, your team admins are told." in mail.outbox[0].body
    gpu_metrics({job: 50})
    sample(2)  # busy again: the spell and its warning end
    assert AuditEntry.objects.filter(action="job.idle_gpu.recovered", object_id=str(job.pk)).count() == 1
    gpu_metrics({job: 3})
    sample(3)
    sample(4)  # a new spell of one hour: warned again
    sample(5)
    assert len(mail.outbox) == 2
    sample(6)  # two hours after the second warning: the team admins (and the team's address) are told
    assert len(mail.outbox) == 3
    told = mail.outbox[2]
    assert told.to == ["b_admin@example.com", "team-b-admins@example.com"]
    assert told.subject == "[pai] Job b_member~wobbly of Team B leaves its GPUs idle"
    assert "Below 10 % since" in told.body and "(3.0 hours), 3.0 % on average" in told.body
    assert "or from the abnormal jobs page: http://127.0.0.1:8000/jobs/abnormal/" in told.body
    sample(12)
    assert len(mail.outbox) == 3  # told once per spell
    job = Job.objects.get(pk=job.pk)
    assert (job.state, job.execution_type) == ("RUNNING", "START")  # notify never stops a job
    assert list(
        AuditEntry.objects.filter(object_id=str(job.pk), action__startswith="job.idle_gpu").order_by("id")
        .values_list("action", flat=True)
    ) == ["job.idle_gpu.warned", "job.idle_gpu.recovered", "job.idle_gpu.warned", "job.idle_gpu.admins_notified"]
