from apps.jobs.models import Job

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
