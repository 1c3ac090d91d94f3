"""Who reaches which job, over every job route: owners, their team's admins and platform
admins read and manage a job; other members of the team see it only in the list (403
elsewhere); another team gets 404 everywhere, so that the job's existence does not leak."""

import pytest

from apps.jobs.models import Job, JobTag

from .factories import running_attempt, submitted_job

OK, HIDDEN, SUMMARY_ONLY = "ok", 404, 403

READ_ROUTES = [
    ("GET", "", 200),
    ("GET", "/config", 200),
    ("GET", "/events", 200),
    ("GET", "/job-attempts", 200),
    ("GET", "/job-attempts/0", 200),
    ("GET", "/attempts/0/taskRoles/taskrole/taskIndex/0/attempts", 200),
    ("GET", "/attempts/0/taskRoles/taskrole/taskIndex/0/attempts/0/logs", 200),
]
WRITE_ROUTES = [
    ("PUT", "/tag", 200),
    ("DELETE", "/tag", 200),
    ("PUT", "/executionType", 202),
]

# viewer → expected outcome for the jobs of a_member, a_admin, b_member.
MATRIX = {
    "root": (OK, OK, OK),
    "a_admin": (OK, OK, HIDDEN),
    "a_member": (OK, SUMMARY_ONLY, HIDDEN),
    "b_admin": (HIDDEN, HIDDEN, OK),
    "b_member": (HIDDEN, HIDDEN, OK),
}
LISTED = {
    "root": {"a_member~job_a", "a_admin~job_admin", "b_member~job_b"},
    "a_admin": {"a_member~job_a", "a_admin~job_admin"},
    "a_member": {"a_member~job_a", "a_admin~job_admin"},
    "b_admin": {"b_member~job_b"},
    "b_member": {"b_member~job_b"},
}


@pytest.mark.parametrize("viewer", MATRIX)
def test_every_job_route_is_scoped(world, api, viewer):
    jobs = [
        submitted_job(world.a_member, "job_a"),
        submitted_job(world.a_admin, "job_admin"),
        submitted_job(world.b_member, "job_b"),
    ]
    for job in jobs:
        running_attempt(job)
    client = api(world.users()[viewer])

    listed = {f"{j['username']}~{j['name']}" for j in client.get("/api/v2/jobs?limit=1000").json()}
    assert listed == LISTED[viewer]

    for job, expected in zip(jobs, MATRIX[viewer]):
        base = f"/api/v2/jobs/{job.owner.username}~{job.name}"
        for method, suffix, ok_status in READ_ROUTES + WRITE_ROUTES:
            body = {"value": "STOP" if suffix == "/executionType" else "mine"}
            response = getattr(client, method.lower())(base + suffix, body, format="json") if method != "GET" \
                else client.get(base + suffix)
            want = ok_status if expected == OK else expected
            assert response.status_code == want, (viewer, base + suffix, method, response.content[:200])
            if expected == HIDDEN:
                assert response.json()["code"] == "NoJobError"
            elif expected == SUMMARY_ONLY:
                assert response.json()["code"] == "ForbiddenUserError"
        state = Job.objects.get(pk=job.pk).state
        if expected == OK:
            assert state == "STOPPING"
        else:
            # Refused writes left nothing behind.
            assert state == "RUNNING"
            assert not JobTag.objects.filter(job=job).exists()


@pytest.mark.parametrize("viewer", ["b_admin", "b_member"])
def test_filters_never_reach_into_another_tenant(world, api, viewer):
    submitted_job(world.a_member, "job_a")
    client = api(world.users()[viewer])

    for query in ("username=a_member", "vc=team_a", "keyword=job_a", "state=WAITING"):
        assert client.get(f"/api/v2/jobs?{query}").json() == []
    assert client.get("/api/v2/jobs?withTotalCount=true&username=a_member").json() == {"totalCount": 0, "data": []}
