"""A job's secrets reach its tasks as private files on the local backend, and nowhere else."""

import hashlib
import logging
import os
import stat

import yaml
from rest_framework.test import APIClient

from apps.jobs.models import Job, TaskAttempt

from .conftest import job_yaml

API_KEY = "sk-live-0123456789"


def secret_job(name, commands):
    document = yaml.safe_load(job_yaml(name, roles={"main": {"gpu": 0, "commands": commands}}))
    document["secrets"] = {"api_key": API_KEY, "port": 8080}
    return yaml.safe_dump(document)


def pod_dir(worker, job):
    ta = TaskAttempt.objects.get(task__job_attempt__job=job)
    return worker.controller.backend.pods_dir / ta.pod_name


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_task_reads_its_secrets_from_private_files_that_are_shown_nowhere(world, worker, submit, caplog):
    caplog.set_level(logging.DEBUG)
    job = submit(world.a_member, secret_job("reads-secrets", [
        'echo "dir=$PAI_SECRETS_DIR"',
        'echo "key=$(sha256sum < "$PAI_SECRETS_DIR/api_key" | cut -d" " -f1)"',
        'echo "port=$(cat "$PAI_SECRETS_DIR/port")"',
        'echo "modes=$(stat -c %a "$PAI_SECRETS_DIR" "$PAI_SECRETS_DIR/api_key" "$PAI_SECRETS_DIR/port" | tr "\\n" " ")"',
        'echo "files=$(ls "$PAI_SECRETS_DIR" | tr "\\n" " ")"',
    ]))
    job = worker.wait_for_state(job, "SUCCEEDED", "FAILED")
    assert job.state == "SUCCEEDED", job.attempts.get().exit_diagnostics
    directory = pod_dir(worker, job)
    log = worker.controller.backend.read_log(directory.name)
    assert f"dir={directory / 'secrets'}\n" in log
    assert f"key={hashlib.sha256(API_KEY.encode()).hexdigest()}\n" in log
    assert "port=8080\n" in log
    assert "modes=700 600 600 \n" in log
    assert "files=api_key port \n" in log
    # The task has ended: its secret files are gone, and nothing the pod keeps holds the value.
    assert not (directory / "secrets").exists()
    kept = [path for path in directory.rglob("*") if path.is_file() and API_KEY.encode() in path.read_bytes()]
    assert kept == []
    stored = Job.objects.get(pk=job.pk)
    assert API_KEY not in str(stored.spec) + str(stored.launch) + stored.protocol_text
    assert API_KEY not in caplog.text


def test_the_secret_files_stay_while_the_task_runs_and_go_with_its_deleted_pod(world, worker, submit):
    job = submit(world.a_member, secret_job("long-secrets", ["echo started", "sleep 120"]))
    job = worker.wait_for_state(job, "RUNNING")
    directory = pod_dir(worker, job)
    worker.run_until(lambda: "started" in worker.controller.backend.read_log(directory.name))
    secrets = directory / "secrets"
    assert mode(secrets) == 0o700
    assert {p.name: (p.read_text(), mode(p)) for p in secrets.iterdir()} == {
        "api_key": (API_KEY, 0o600), "port": ("8080", 0o600),
    }
    client = APIClient()
    client.force_authenticate(world.a_member)
    response = client.put("/api/v2/jobs/a_member~long-secrets/executionType", {"value": "STOP"}, format="json")
    assert response.status_code in (200, 202), response.content
    job = worker.wait_for_state(job, "STOPPED")
    assert worker.controller.backend.list_pods() == []
    assert not secrets.exists()
    assert directory.exists()  # the pod's record and logs stay until retention
