import time

from rest_framework.test import APIClient

from apps.jobs.models import Job
from apps.jobs.worker.launch import job_key
from scheduler.backends import LABEL_JOB

from .conftest import job_yaml


def test_a_guaranteed_job_preempts_an_opportunistic_one_which_is_requeued_and_finishes(world, worker, submit):
    # Two opportunistic gangs take every GPU of the cluster (4 nodes × 8).
    oppo = submit(
        world.b_member,
        job_yaml("filler", vc="team_b", priority="oppo", roles={"main": {"instances": 2, "gpu": 8, "commands": ["sleep 4"]}}),
    )
    other = submit(
        world.b_member,
        job_yaml("filler2", vc="team_b", priority="oppo", roles={"main": {"instances": 2, "gpu": 8, "commands": ["sleep 30"]}}),
    )
    worker.wait_for_state(oppo, "RUNNING")
    worker.wait_for_state(other, "RUNNING")
    prod = submit(world.a_member, job_yaml("urgent", priority="prod", roles={"main": {"gpu": 8, "commands": ["sleep 1"]}}))
    prod = worker.wait_for_state(prod, "SUCCEEDED", timeout=40)

    # Victims are whole gangs: exactly one of the two was preempted.
    oppo.refresh_from_db()
    other.refresh_from_db()
    if other.retries:
        oppo, other = other, oppo
    assert other.retries == 0 and other.attempts.count() == 1
    first = oppo.attempts.order_by("index").first()
    assert first.exit_code == -1003  # PodPreempted
    assert "preempted by job" in first.exit_diagnostics
    assert oppo.retries == 1  # transient: retried, not counted against jobRetryCount (0)
    oppo = worker.wait_for_state(oppo, "SUCCEEDED", "FAILED", timeout=60)
    assert oppo.state == "SUCCEEDED"
    assert oppo.attempts.count() == 2


def test_an_opportunistic_job_waits_with_a_reason_when_nothing_is_idle(world, worker, submit):
    hog = submit(world.a_member, job_yaml("hog", roles={"main": {"instances": 2, "gpu": 8, "commands": ["sleep 30"]}}))
    hog_b = submit(
        world.b_member,
        job_yaml("hog", vc="team_b", roles={
            "node": {"gpu": 8, "commands": ["sleep 30"]},
            "pairs": {"instances": 4, "gpu": 2, "commands": ["sleep 30"]},
        }),
    )
    worker.wait_for_state(hog, "RUNNING")
    worker.wait_for_state(hog_b, "RUNNING")
    oppo = submit(world.a_member, job_yaml("idle-hunter", priority="oppo", roles={"main": {"gpu": 1, "commands": ["true"]}}))
    worker.cycle()
    oppo = Job.objects.get(pk=oppo.pk)
    assert oppo.state == "WAITING"
    assert oppo.wait_reason
    assert oppo.queue_position is not None


def test_an_opportunistic_gang_may_be_larger_than_its_vc_but_not_than_the_cluster(world, submit):
    from rest_framework.test import APIClient

    # 4 × 8 GPUs: twice team_b's quota, all of the cluster's idle GPUs.
    submit(world.b_member, job_yaml("wide", vc="team_b", priority="oppo", roles={"main": {"instances": 4, "gpu": 8, "commands": ["true"]}}))
    client = APIClient()
    client.force_authenticate(world.b_member)
    response = client.post(
        "/api/v2/jobs",
        data=job_yaml("too-wide", vc="team_b", priority="oppo", roles={"main": {"instances": 5, "gpu": 8, "commands": ["true"]}}),
        content_type="text/yaml",
    )
    assert response.status_code == 400
    assert response.json()["message"] == (
        "taskRoles: the job needs 40 A100 leaf cells at once (gang allocation), more than cluster 'local' holds (32)"
    )


def _stopping_slowly(name, **fields):
    # Its tasks take a moment to stop: the window in which a preemptor must wait.
    commands = ["trap 'sleep 2; exit 0' TERM", "sleep 600 & wait"]
    return job_yaml(name, roles={"main": {"instances": 2, "gpu": 8, "commands": commands}}, **fields)


def _pods(worker, job):
    return [p for p in worker.controller.backend.list_pods() if p.labels.get(LABEL_JOB) == job_key(job)]


def test_the_preemptor_starts_only_once_its_victims_pods_are_gone(world, worker, submit):
    victim = worker.wait_for_state(submit(world.a_member, _stopping_slowly("victim")), "RUNNING")
    urgent = submit(world.a_member, job_yaml("urgent", priority="prod", roles={"main": {"gpu": 8, "commands": ["sleep 600"]}}))

    reasons, saw_victim_stopping = set(), False
    deadline = time.monotonic() + 30
    while Job.objects.get(pk=urgent.pk).state != "RUNNING":
        assert time.monotonic() < deadline, "the preemptor did not start"
        worker.cycle()
        reasons.add(Job.objects.get(pk=urgent.pk).wait_reason.split(" ")[0])
        victim_pods, urgent_pods = _pods(worker, victim), _pods(worker, urgent)
        saw_victim_stopping |= any(p.deletion_requested for p in victim_pods) and not urgent_pods
        assert not (victim_pods and urgent_pods), "the preemptor's pods exist beside its victim's"
        time.sleep(0.1)

    assert saw_victim_stopping and "preempting" in reasons
    first = Job.objects.get(pk=victim.pk).attempts.order_by("index").first()
    assert first.exit_code == -1003 and "preempted by job" in first.exit_diagnostics
    assert Job.objects.get(pk=urgent.pk).reservation is None


def test_cancelling_the_preemptor_before_its_victims_are_told_leaves_them_running(world, worker, submit):
    victim = worker.wait_for_state(submit(world.a_member, _stopping_slowly("victim")), "RUNNING")
    urgent = submit(world.a_member, job_yaml("urgent", priority="prod", roles={"main": {"gpu": 8, "commands": ["sleep 600"]}}))
    worker.cycle()
    urgent.refresh_from_db()
    assert urgent.wait_reason.startswith("preempting job") and urgent.reservation["state"] == "preempting"

    client = APIClient()
    client.force_authenticate(world.a_member)
    assert client.put("/api/v2/jobs/a_member~urgent/executionType", {"value": "STOP"}, format="json").status_code in (200, 202)
    for _ in range(3):
        worker.cycle()

    victim = Job.objects.get(pk=victim.pk)
    assert victim.state == "RUNNING" and victim.attempts.count() == 1
    assert len(_pods(worker, victim)) == 2 and not any(p.deletion_requested or p.terminal for p in _pods(worker, victim))
    urgent.refresh_from_db()
    assert urgent.state == "STOPPED" and urgent.reservation is None and _pods(worker, urgent) == []


def test_cancelling_the_preemptor_once_its_victims_are_told_frees_its_cells_for_them(world, worker, submit):
    victim = worker.wait_for_state(submit(world.a_member, _stopping_slowly("victim")), "RUNNING")
    urgent = submit(world.a_member, job_yaml("urgent", priority="prod", roles={"main": {"gpu": 8, "commands": ["sleep 600"]}}))
    # Planned, then carried out: the victim's pods are being deleted.
    worker.run_until(lambda: any(p.deletion_requested for p in _pods(worker, victim)), timeout=15)
    urgent.refresh_from_db()
    assert urgent.wait_reason.startswith("preempting: holds its cells on ") and not _pods(worker, urgent)

    client = APIClient()
    client.force_authenticate(world.a_member)
    assert client.put("/api/v2/jobs/a_member~urgent/executionType", {"value": "STOP"}, format="json").status_code in (200, 202)

    # The victim's stop cannot be undone: it is retried at its own priority and runs again,
    # on the cells the cancelled preemptor no longer holds; the preemptor never got a pod.
    victim = worker.wait_for_state(victim, "RUNNING", timeout=30)
    worker.run_until(lambda: Job.objects.get(pk=victim.pk).attempts.count() == 2
                     and len(_pods(worker, victim)) == 2
                     and not any(p.deletion_requested for p in _pods(worker, victim)), timeout=30)
    first = Job.objects.get(pk=victim.pk).attempts.order_by("index").first()
    assert first.exit_code == -1003
    urgent.refresh_from_db()
    assert urgent.state == "STOPPED" and urgent.reservation is None and _pods(worker, urgent) == []
    assert worker.controller.engine.state_of(str(urgent.pk)) is None
