"""The README's demo: the demo data, the demo job file, submitted as a client would."""

from pathlib import Path

from django.core.management import call_command
from rest_framework.test import APIClient

from apps.clusters.models import Cluster
from apps.jobs.models import Job, TaskAttempt

from .conftest import Worker

DEMO_JOB = Path(__file__).resolve().parents[2] / "fixtures" / "demo-job.yaml"


def test_the_demo_job_runs_on_the_demo_cluster(db, tmp_path, settings):
    call_command("seed_demo", stdout=open("/dev/null", "w"))
    client = APIClient()
    response = client.post("/api/v2/authn/basic/login", {"username": "carol", "password": "pai-carol"})
    assert response.status_code == 200
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {response.json()['token']}")
    response = client.post("/api/v2/jobs", data=DEMO_JOB.read_text(), content_type="text/yaml")
    assert response.status_code == 202, response.content

    worker = Worker(Cluster.objects.get(name="local"))
    try:
        job = Job.objects.get(name="hello-pai")
        job = worker.wait_for_state(job, "SUCCEEDED", "FAILED")
        assert job.state == "SUCCEEDED", job.attempts.get().exit_diagnostics
        evaluator = TaskAttempt.objects.get(task__job_attempt__job=job, task__task_role="evaluator")
        assert evaluator.node_name.startswith("cpu-node-")
        log = client.get(
            "/api/v2/jobs/carol~hello-pai/attempts/0/taskRoles/trainer/taskIndex/1/attempts/0/logs/all"
        )
        assert log.status_code == 200
        text = b"".join(log.streaming_content).decode()
        assert "hello from pai, I am trainer 1 of carol~hello-pai" in text
    finally:
        worker.close()
