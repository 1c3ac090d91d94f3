"""Follow-ups become GitHub issues (issue 15): "Create GitHub issue" on the incident page posts
the issue through GitHub's REST API — here a fake GitHub that checks every request against
GitHub's description of the issues endpoints — stores its URL and number once, retries what
may be retried, and the sweep marks the follow-up done when the issue is closed."""

from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from apps.audit.models import AuditEntry
from apps.oncall import github
from apps.oncall import services as oncall_services
from apps.oncall.models import FollowUp, GitHubRepository

from .fake_github import FakeGitHub

pytestmark = pytest.mark.django_db

TOKEN = "github_pat_11ABCDEFG_secret"


@pytest.fixture(scope="module")
def fake_github():
    fake = FakeGitHub(token=TOKEN).start()
    yield fake
    fake.stop()


@pytest.fixture
def gh(fake_github):
    """The fake, emptied, with its answers back to normal; no request may break GitHub's description."""
    fake = fake_github
    fake.issues.clear()
    fake.requests.clear()
    fake.violations.clear()
    fake.rate_limit = fake.secondary_limit = fake.server_errors = fake.drop_after_create = 0
    fake.token = TOKEN
    yield fake
    assert fake.violations == []


@pytest.fixture
def follow_up(world, gh, tasks_inline):
    setting = GitHubRepository(api_url=gh.api_url, repository="octo-org/cluster-ops",
                               labels="incident-follow-up, pai")
    setting.token = TOKEN
    setting.save()
    incident = oncall_services.report_incident(world.root, title="GPU lost on gpu-node-1", severity=1)
    return oncall_services.add_follow_up(incident, world.root, title="Replace the GPU", owner=world.root)


@pytest.fixture
def root_client(world):
    client = Client()
    client.force_login(world.root)
    return client


def _ask(client, follow_up, capture):
    with capture(execute=True):
        return client.post(f"/oncall/follow-ups/{follow_up.pk}/github-issue/", follow=True)


def test_a_follow_up_becomes_one_github_issue_and_is_done_when_it_closes(
        follow_up, gh, root_client, django_capture_on_commit_callbacks):
    page = _ask(root_client, follow_up, django_capture_on_commit_callbacks)

    assert page.status_code == 200
    follow_up.refresh_from_db()
    assert (follow_up.issue_repository, follow_up.issue_number, follow_up.issue_state) == (
        "octo-org/cluster-ops", 1, "open")
    assert follow_up.issue_url == "https://github.example/octo-org/cluster-ops/issues/1"
    (method, path, body), = gh.requests
    assert (method, path) == ("POST", "/repos/octo-org/cluster-ops/issues")
    assert body["title"] == "Replace the GPU"
    assert body["labels"] == ["incident-follow-up", "pai"]
    assert f"http://127.0.0.1:8000/oncall/incidents/{follow_up.incident_id}/" in body["body"]
    assert "Follow-up of incident" in body["body"] and "(severity 1): GPU lost on gpu-node-1" in body["body"]
    # The page links the issue and no longer offers to create one.
    html = root_client.get(f"/oncall/incidents/{follow_up.incident_id}/").content.decode()
    assert 'href="https://github.example/octo-org/cluster-ops/issues/1"' in html
    assert "octo-org/cluster-ops#1" in html and "Create GitHub issue" not in html
    # The API shows it on the incident's follow-ups.
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(follow_up.incident.reporter)
    shown = api.get(f"/api/v2/incidents/{follow_up.incident_id}/").json()["follow_ups"][0]
    assert (shown["issue_url"], shown["issue_number"], shown["issue_state"], shown["issue_error"]) == (
        "https://github.example/octo-org/cluster-ops/issues/1", 1, "open", "")

    # Asking again (a second click, a second tab) makes no second issue.
    _ask(root_client, follow_up, django_capture_on_commit_callbacks)
    assert len(gh.issues) == 1 and len(gh.posts()) == 1

    # Still open on GitHub: the sweep leaves the follow-up open.
    assert github.sweep() == (0, 0)
    follow_up.refresh_from_db()
    assert not follow_up.done

    gh.close_issue(1, closed_at="2027-01-20T09:30:00Z")
    assert github.sweep() == (0, 1)
    follow_up.refresh_from_db()
    assert follow_up.done and follow_up.issue_state == "closed"
    assert follow_up.done_at == datetime(2027, 1, 20, 9, 30, tzinfo=dt_timezone.utc)
    assert AuditEntry.objects.filter(action="oncall.follow_up.done", object_id=str(follow_up.pk)).exists()
    assert github.sweep() == (0, 0)  # once


def test_the_page_offers_the_button_only_when_a_repository_is_set(world, root_client):
    incident = oncall_services.report_incident(world.root, title="disk full", severity=2)
    oncall_services.add_follow_up(incident, world.root, title="Alert at 80 %")
    assert "Create GitHub issue" not in root_client.get(f"/oncall/incidents/{incident.pk}/").content.decode()
    response = root_client.post(f"/oncall/follow-ups/{incident.follow_ups.get().pk}/github-issue/", follow=True)
    assert "No GitHub repository is configured" in response.content.decode()


def test_a_bad_token_is_shown_and_not_retried_until_asked_again(
        follow_up, gh, root_client, django_capture_on_commit_callbacks):
    gh.token = "another-token"

    _ask(root_client, follow_up, django_capture_on_commit_callbacks)

    follow_up.refresh_from_db()
    assert follow_up.issue_number is None and follow_up.issue_retry_at is None
    assert follow_up.issue_error == ("GitHub answered 401 (Bad credentials): the token is wrong or expired; a platform "
                                     "admin sets a new one in the admin")
    html = root_client.get(f"/oncall/incidents/{follow_up.incident_id}/").content.decode()
    assert "Bad credentials" in html and "Try again" in html
    assert github.sweep(timezone.now() + timedelta(days=1)) == (0, 0)
    assert len(gh.requests) == 1

    gh.token = TOKEN
    _ask(root_client, follow_up, django_capture_on_commit_callbacks)
    follow_up.refresh_from_db()
    assert follow_up.issue_number == 1 and follow_up.issue_error == ""


@pytest.mark.parametrize("limit, wait", [("rate_limit", None), ("secondary_limit", timedelta(seconds=60))])
def test_a_rate_limit_is_retried_when_github_says(
        follow_up, gh, root_client, django_capture_on_commit_callbacks, limit, wait):
    setattr(gh, limit, 1)
    before = timezone.now()

    _ask(root_client, follow_up, django_capture_on_commit_callbacks)

    follow_up.refresh_from_db()
    assert follow_up.issue_number is None
    expected = (datetime.fromtimestamp(gh.rate_limit_reset, tz=dt_timezone.utc) if wait is None
                else follow_up.issue_retry_at)
    assert follow_up.issue_retry_at == expected
    if wait is not None:
        assert before + wait <= follow_up.issue_retry_at <= timezone.now() + wait
    assert "rate limited, retrying at" in follow_up.issue_error
    assert github.sweep(follow_up.issue_retry_at - timedelta(seconds=1)) == (0, 0)
    assert len(gh.requests) == 1

    assert github.sweep(follow_up.issue_retry_at) == (1, 0)
    follow_up.refresh_from_db()
    assert follow_up.issue_number == 1 and len(gh.issues) == 1


def test_an_attempt_whose_answer_was_lost_is_adopted_not_repeated(
        follow_up, gh, root_client, django_capture_on_commit_callbacks):
    gh.drop_after_create = 1  # GitHub made the issue; pai never heard back

    _ask(root_client, follow_up, django_capture_on_commit_callbacks)

    follow_up.refresh_from_db()
    assert follow_up.issue_number is None and len(gh.issues) == 1
    assert follow_up.issue_error.startswith("GitHub could not be reached (")
    retry_at = follow_up.issue_retry_at
    assert retry_at is not None

    assert github.sweep(retry_at) == (1, 0)

    follow_up.refresh_from_db()
    assert follow_up.issue_number == 1 and len(gh.issues) == 1 and len(gh.posts()) == 1
    lookups = [path for method, path, _ in gh.requests if method == "GET" and "state=all" in path]
    assert len(lookups) == 1


def test_server_errors_back_off_and_then_succeed(follow_up, gh, root_client, django_capture_on_commit_callbacks):
    gh.server_errors = 2
    _ask(root_client, follow_up, django_capture_on_commit_callbacks)
    follow_up.refresh_from_db()
    first = follow_up.issue_retry_at
    assert follow_up.issue_error == "GitHub answered 503 (Service unavailable)"

    github.sweep(first)  # the lookup for a lost issue meets the second 503
    follow_up.refresh_from_db()
    assert follow_up.issue_retry_at - first >= timedelta(minutes=1)
    assert github.sweep(follow_up.issue_retry_at) == (1, 0)
    assert len(gh.issues) == 1


def test_only_those_who_act_on_the_incident_ask_for_an_issue(follow_up, world, gh):
    member = Client()
    member.force_login(world.a_member)
    response = member.post(f"/oncall/follow-ups/{follow_up.pk}/github-issue/")
    assert response.status_code in (403, 404)
    assert gh.requests == []
    follow_up.refresh_from_db()
    assert follow_up.issue_requested_at is None


def test_the_token_is_stored_encrypted_and_never_shown_back(world, gh, root_client):
    response = root_client.post("/admin/oncall/githubrepository/add/", {
        "api_url": gh.api_url, "repository": "octo-org/cluster-ops", "labels": "pai", "active": "on",
        "token": TOKEN})
    assert response.status_code == 302
    setting = GitHubRepository.objects.get()
    assert setting.token == TOKEN
    with connection.cursor() as cursor:
        cursor.execute("SELECT secret FROM oncall_githubrepository")
        (stored,), = cursor.fetchall()
    assert TOKEN not in stored
    page = root_client.get(f"/admin/oncall/githubrepository/{setting.pk}/change/").content.decode()
    assert TOKEN not in page
    # Saved again without a token: the stored one stays.
    root_client.post(f"/admin/oncall/githubrepository/{setting.pk}/change/", {
        "api_url": gh.api_url, "repository": "octo-org/cluster-ops", "labels": "pai", "active": "on", "token": ""})
    setting.refresh_from_db()
    assert setting.token == TOKEN


@pytest.mark.parametrize("repository", ["octo-org", "octo org/x", "a/b/c", "octo-org/..", ""])
def test_a_repository_that_is_not_owner_slash_name_is_refused(world, gh, root_client, repository):
    response = root_client.post("/admin/oncall/githubrepository/add/", {
        "api_url": gh.api_url, "repository": repository, "labels": "", "active": "on", "token": TOKEN})
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["repository"]
    assert not GitHubRepository.objects.exists()


def test_the_sweep_is_scheduled():
    from apps.oncall.tasks import SCHEDULES

    assert SCHEDULES["oncall.github_issues"] == ("apps.oncall.tasks.github_issues", 5)


def test_follow_ups_without_issues_cost_the_sweep_no_request(world, gh):
    incident = oncall_services.report_incident(world.root, title="x", severity=3)
    oncall_services.add_follow_up(incident, world.root, title="nothing to do")
    assert github.sweep() == (0, 0)
    assert gh.requests == []
    assert FollowUp.objects.count() == 1
