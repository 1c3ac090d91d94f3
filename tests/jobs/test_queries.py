"""List and detail pages run a fixed number of queries, however many rows they show."""

import pytest

from apps.jobs.models import JobTag

from .factories import running_attempt, submitted_job

# Role lookups (platform admin? member of which tenants?), the page, the page's tags.
LIST_QUERIES = 4


@pytest.fixture
def many_jobs(world):
    jobs = [submitted_job(world.a_member if i % 2 else world.a_admin, f"job_{i}") for i in range(60)]
    JobTag.objects.bulk_create([JobTag(job=job, name=f"tag{i % 3}") for i, job in enumerate(jobs)])
    return jobs


@pytest.mark.parametrize("limit", [1, 10, 60])
def test_a_list_page_runs_the_same_queries_at_any_size(world, api, many_jobs, django_assert_num_queries, limit):
    client = api(world.a_member)
    with django_assert_num_queries(LIST_QUERIES):
        response = client.get(f"/api/v2/jobs?limit={limit}&state=WAITING&tagsNotContain=tag1&order=jobName,ASC")
    assert response.status_code == 200
    assert len(response.json()) == min(limit, 40)


@pytest.mark.parametrize("limit", [1, 60])
def test_user_and_vc_filters_add_one_lookup_each(world, api, many_jobs, django_assert_num_queries, limit):
    # The names become ids first, so that PostgreSQL reads the owner's index (see filters.py).
    client = api(world.a_member)
    with django_assert_num_queries(LIST_QUERIES + 2):
        response = client.get(f"/api/v2/jobs?limit={limit}&username=a_member,nobody&vc=team_a")
    assert response.status_code == 200
    assert len(response.json()) == min(limit, 30)
    assert {job["username"] for job in response.json()} == {"a_member"}


@pytest.mark.parametrize("limit", [5, 60])
def test_the_total_count_adds_one_query(world, api, many_jobs, django_assert_num_queries, limit):
    client = api(world.a_member)
    with django_assert_num_queries(LIST_QUERIES + 1):
        body = client.get(f"/api/v2/jobs?limit={limit}&withTotalCount=true").json()
    assert body["totalCount"] == 60


@pytest.mark.parametrize("instances", [1, 6])
def test_job_detail_queries_do_not_grow_with_tasks(world, api, django_assert_num_queries, instances):
    job = submitted_job(world.a_member, "wide", gpu=1, instances=instances)
    running_attempt(job)
    client = api(world.a_member)
    # Three role lookups (admin? member of? admin of?), the job, its tags, the latest
    # attempt, its tasks, their pods.
    with django_assert_num_queries(8):
        body = client.get("/api/v2/jobs/a_member~wide").json()
    assert len(body["taskRoles"]["taskrole"]["taskStatuses"]) == instances
