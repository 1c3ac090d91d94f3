"""The job admin: read-only rows scoped to who may read them, and a stop action."""

from apps.jobs.models import Job

from .factories import submitted_job


def _login(client, user):
    client.force_login(user)
    return client


def test_the_changelist_shows_only_jobs_in_scope(world, client):
    submitted_job(world.a_member, "job_a")
    submitted_job(world.b_member, "job_b")

    page = _login(client, world.a_admin).get("/admin/jobs/job/")
    assert page.status_code == 200
    assert b"job_a" in page.content and b"job_b" not in page.content

    root_page = _login(client, world.root).get("/admin/jobs/job/")
    assert b"job_a" in root_page.content and b"job_b" in root_page.content


def test_another_tenants_job_page_is_not_found_and_no_job_is_editable(world, client):
    job_b = submitted_job(world.b_member, "job_b")
    job_a = submitted_job(world.a_member, "job_a")
    _login(client, world.a_admin)

    assert client.get(f"/admin/jobs/job/{job_b.pk}/change/").status_code in (302, 404)
    page = client.get(f"/admin/jobs/job/{job_a.pk}/change/")
    assert page.status_code == 200
    assert b'name="name"' not in page.content  # read-only: no input for the name
    assert client.post(f"/admin/jobs/job/{job_a.pk}/change/", {"name": "renamed"}).status_code == 403
    assert client.get("/admin/jobs/job/add/").status_code == 403
    assert Job.objects.get(pk=job_a.pk).name == "job_a"


def test_the_stop_action_stops_jobs_through_the_service(world, client):
    job = submitted_job(world.a_member, "job_a")
    _login(client, world.a_admin)

    response = client.post(
        "/admin/jobs/job/", {"action": "stop_jobs", "_selected_action": [job.pk]}, follow=True
    )
    assert response.status_code == 200
    job.refresh_from_db()
    assert (job.state, job.execution_type) == ("STOPPED", "STOP")


def test_a_plain_member_has_no_job_admin(world, client):
    submitted_job(world.a_member, "job_a")
    response = _login(client, world.a_member).get("/admin/jobs/job/")
    assert response.status_code == 302  # not staff: sent to the admin login
