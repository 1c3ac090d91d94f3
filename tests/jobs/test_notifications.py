"""Job status e-mails (`extras.jobStatusChangeNotification`): sent after the transition
commits, through django-q2, once per transition."""

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone
from rest_framework.test import APIClient

from apps.jobs import notifications
from apps.jobs.models import Job, JobNotification
from tests.worker.conftest import Worker, job_yaml, submit  # noqa: F401 (submit is a fixture)


@pytest.fixture
def worker(world, settings, tmp_path, tasks_inline, django_capture_on_commit_callbacks):
    settings.PAI_DATA_DIR = tmp_path
    settings.PAI_PUBLIC_URL = "https://pai.example.com"
    w = Worker(world.cluster)
    cycle = w.cycle

    def cycle_and_commit(now=None):
        # What a commit of the worker's transaction does: run the e-mails' on-commit hooks.
        with django_capture_on_commit_callbacks(execute=True):
            cycle(now)

    w.cycle = cycle_and_commit
    yield w
    for pod in w.controller.backend.list_pods():
        w.controller.backend.delete_pod(pod.name, grace_seconds=0)
    w.close()


def notify(**events):
    return {"jobStatusChangeNotification": events}


def sent():
    return [(m.to, m.subject) for m in mail.outbox]


def test_a_job_that_asks_gets_one_email_per_transition_it_asked_for(world, worker, submit):
    world.a_member.email = "carol@example.com"
    world.a_member.save()
    text = job_yaml("train", extras=notify(running=True, succeeded=True, failed=True, stopped=False),
                    roles={"main": {"gpu": 1, "commands": ["sleep 1"]}})
    job = worker.wait_for_state(submit(world.a_member, text), "SUCCEEDED", "FAILED")
    assert job.state == "SUCCEEDED"
    for _ in range(3):
        worker.cycle()

    assert sent() == [
        (["carol@example.com"], "[pai] Job a_member~train is running"),
        (["carol@example.com"], "[pai] Job a_member~train succeeded"),
    ]
    body = mail.outbox[1].body
    assert "Virtual cluster: team_a" in body and "Exit code: 0" in body
    assert "Details: https://pai.example.com/jobs/a_member~train/\n" in body  # the job's page in the portal
    rows = JobNotification.objects.filter(job=job)
    assert sorted(rows.values_list("event", "attempt_index")) == [("running", 0), ("succeeded", 0)]
    assert all(r.sent_at and r.sent_to == "carol@example.com" for r in rows)
    # A task handed out again finds its row sent; the sweep finds nothing left.
    assert notifications.send(rows[0].pk) is False
    assert notifications.resend_unsent(timezone.now() + timedelta(hours=1)) == 0
    assert len(mail.outbox) == 2


def test_retries_and_the_final_failure_are_told_with_the_exit_and_its_diagnosis(world, worker, submit):
    text = job_yaml("flaky", retry=1, extras=notify(running=False, retried=True, failed=True),
                    roles={"main": {"gpu": 1, "commands": ["echo about to fail; exit 255"]}})
    job = worker.wait_for_state(submit(world.a_member, text), "FAILED")

    assert [subject for _, subject in sent()] == [
        "[pai] Job a_member~flaky is being retried", "[pai] Job a_member~flaky failed",
    ]
    retried, failed = mail.outbox
    assert "Attempt: 0" in retried.body and "Exit code: 255" in retried.body and "Retries so far: 1" in retried.body
    assert "Attempt: 1" in failed.body and f"Exit code: {job.app_exit_code}" in failed.body
    assert "about to fail" in failed.body  # the end of the task's log, from the attempt's diagnosis


def test_a_stopped_job_is_told_once_and_a_job_that_asks_nothing_gets_nothing(world, worker, submit):
    quiet = submit(world.a_member, job_yaml("quiet", roles={"main": {"gpu": 1, "commands": ["sleep 60"]}}))
    loud = submit(world.a_member, job_yaml("loud", extras=notify(stopped=True),
                                           roles={"main": {"gpu": 1, "commands": ["sleep 60"]}}))
    worker.wait_for_state(loud, "RUNNING")
    worker.wait_for_state(quiet, "RUNNING")
    client = APIClient()
    client.force_authenticate(world.a_member)
    for name in ("quiet", "loud"):
        response = client.put(f"/api/v2/jobs/a_member~{name}/executionType", {"value": "STOP"}, format="json")
        assert response.status_code == 202, response.content
    worker.wait_for_state(loud, "STOPPED")
    worker.wait_for_state(quiet, "STOPPED")

    assert [subject for _, subject in sent()] == ["[pai] Job a_member~loud was stopped"]
    assert not JobNotification.objects.filter(job=quiet).exists()


def test_a_job_stopped_before_it_ran_is_told_by_the_stop_itself(world, submit, django_capture_on_commit_callbacks):
    job = submit(world.a_member, job_yaml("early", extras=notify(stopped=True)))
    client = APIClient()
    client.force_authenticate(world.a_member)
    # (Not run here: the commit's other hook starts a scheduler loop.)
    with django_capture_on_commit_callbacks() as hooks:
        response = client.put("/api/v2/jobs/a_member~early/executionType", {"value": "STOP"}, format="json")
    assert response.status_code == 202
    assert Job.objects.get(pk=job.pk).state == "STOPPED"
    assert hooks
    (row,) = JobNotification.objects.filter(job=job)
    assert (row.event, row.attempt_index, row.sent_at) == ("stopped", -1, None)
    assert notifications.send(row.pk) is True
    assert sent() == [([world.a_member.email], "[pai] Job a_member~early was stopped")]


def test_an_email_a_lost_task_left_unsent_goes_out_once_from_the_sweep(world, submit, tasks_inline):
    job = submit(world.a_member, job_yaml("lost", extras=notify(running=True)))
    row = JobNotification.objects.create(job=job, attempt_index=0, event="running")
    assert notifications.resend_unsent() == 0  # too young: its own task may still come
    assert notifications.resend_unsent(timezone.now() + timedelta(minutes=2)) == 1
    assert notifications.resend_unsent(timezone.now() + timedelta(minutes=3)) == 0
    assert sent() == [([world.a_member.email], "[pai] Job a_member~lost is running")]
    row.refresh_from_db()
    assert row.sent_at is not None
