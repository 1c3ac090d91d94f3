"""The job list, a job's page, stopping (one and in bulk), cloning in bulk and the log viewer,
through the Django test client: who sees what, filters and paging, and what each page says."""

import datetime as dt

import pytest
from django.test import Client
from django.utils import timezone

from apps.accounts import sharing
from apps.jobs.models import Job, JobAttempt, TaskLog
from apps.portal.views import jobs as views
from tests.jobs.factories import running_attempt, submitted_job


@pytest.fixture
def jobs_world(world, tmp_path, settings):
    settings.PAI_DATA_DIR = str(tmp_path)
    w = world
    w.mine = submitted_job(w.a_member, name="mine_waiting", vc="team_a")
    w.running = submitted_job(w.a_member, name="mine_running", vc="team_a")
    w.log = tmp_path / "taskrole-0.log"
    w.log.write_text("".join(f"step {i}: loss {1 / (i + 1):.3f}\n" for i in range(5000)))
    running_attempt(w.running, log_path=str(w.log))
    w.admins = submitted_job(w.a_admin, name="admins_job", vc="team_a")
    w.other = submitted_job(w.b_member, name="other_team_job", vc="team_b")
    w.shared = submitted_job(w.b_member, name="shared_to_a", vc="team_b")
    sharing.share_with_user(w.b_member, w.shared, w.a_member)
    return w


def client(user):
    c = Client()
    c.force_login(user)
    return c


def listed(response):
    body = response.content.decode()
    return sorted(part.split('"')[0] for part in body.split('data-job="')[1:])


def test_the_list_scopes_mine_team_shared(jobs_world):
    w = jobs_world
    member = client(w.a_member)
    assert listed(member.get("/jobs/")) == ["a_member~mine_running", "a_member~mine_waiting"]
    team = member.get("/jobs/?scope=team")
    assert listed(team) == ["a_admin~admins_job", "a_member~mine_running", "a_member~mine_waiting"]
    # Another member's job is listed (the VC's queue) but not opened, as in the API.
    assert 'href="/jobs/a_admin~admins_job/"' not in team.content.decode()
    assert listed(member.get("/jobs/?scope=shared")) == ["b_member~shared_to_a"]
    assert 'href="/jobs/b_member~shared_to_a/"' in member.get("/jobs/?scope=shared").content.decode()
    # Only platform admins have "all"; for anyone else it is a refused value, named.
    refused = member.get("/jobs/?scope=all")
    assert refused.status_code == 400 and "scope" in refused.content.decode()
    assert len(listed(client(w.root).get("/jobs/?scope=all"))) == 5
    # The team admin opens and may stop the member's job.
    admin_team = client(w.a_admin).get("/jobs/?scope=team").content.decode()
    assert 'href="/jobs/a_member~mine_running/"' in admin_team
    assert 'formaction="/jobs/a_member~mine_running/stop"' in admin_team


def test_filters_and_search(jobs_world):
    w = jobs_world
    root = client(w.root)
    assert listed(root.get("/jobs/?scope=all&state=RUNNING")) == ["a_member~mine_running"]
    assert listed(root.get("/jobs/?scope=all&vc=team_b")) == ["b_member~other_team_job", "b_member~shared_to_a"]
    assert listed(root.get("/jobs/?scope=all&user=a_admin")) == ["a_admin~admins_job"]
    assert listed(root.get("/jobs/?scope=all&q=other_team")) == ["b_member~other_team_job"]
    assert listed(root.get("/jobs/?scope=all&q=b_mem")) == ["b_member~other_team_job", "b_member~shared_to_a"]
    Job.objects.filter(pk=w.other.pk).update(submitted_at=timezone.now() - dt.timedelta(days=10))
    day = (timezone.localdate() - dt.timedelta(days=10)).isoformat()
    assert listed(root.get(f"/jobs/?scope=all&since={day}&until={day}")) == ["b_member~other_team_job"]
    bad = root.get("/jobs/?scope=all&state=BOGUS&since=yesterday")
    assert bad.status_code == 400
    text = bad.content.decode()
    assert "state:" in text and "since:" in text


def test_paging_by_keyset_visits_every_job_once(jobs_world, monkeypatch):
    w = jobs_world
    monkeypatch.setattr(views, "PAGE_SIZE", 2)
    # Two jobs submitted in the same microsecond still page apart (the id breaks the tie).
    Job.objects.filter(pk__in=[w.mine.pk, w.admins.pk]).update(submitted_at=w.running.submitted_at)
    root = client(w.root)
    seen, url, pages = [], "/jobs/?scope=all", 0
    while url:
        response = root.get(url)
        seen += listed(response)
        body = response.content.decode()
        pages += 1
        url = ("/jobs/" + body.split('rel="next"')[0].rsplit('href="', 1)[1].split('"')[0].replace("&amp;", "&")
               if 'rel="next"' in body else None)
    assert pages == 3 and len(seen) == len(set(seen)) == 5
    # Back from the last page: the newer page is the second one.
    newer = body.split('rel="prev"')[0].rsplit('href="', 1)[1].split('"')[0].replace("&amp;", "&")
    assert len(listed(root.get("/jobs/" + newer))) == 2
    assert root.get("/jobs/?scope=all&after=garbage").status_code == 400


def test_a_job_page_404s_for_anyone_who_may_not_read_it(jobs_world):
    w = jobs_world
    for user, status in ((w.a_member, 200), (w.a_admin, 200), (w.root, 200), (w.b_member, 404), (w.b_admin, 404)):
        assert client(user).get("/jobs/a_member~mine_running/").status_code == status, user
        log = "/jobs/a_member~mine_running/attempts/0/tasks/taskrole/0/log"
        assert client(user).get(log).status_code == status, user
    # A member of the same team who was not shared the job does not read it either.
    assert client(w.a_member).get("/jobs/a_admin~admins_job/").status_code == 404
    shared = client(w.a_member).get("/jobs/b_member~shared_to_a/")
    assert shared.status_code == 200
    # Its VC is Team B's, which a_member cannot see: named, not linked to a page that would 404.
    assert 'href="/vcs/team_b/"' not in shared.content.decode()
    assert 'href="/vcs/team_b/"' in client(w.b_member).get("/jobs/b_member~shared_to_a/").content.decode()
    assert client(w.a_member).get("/vcs/team_b/").status_code == 404
    assert client(w.a_member).get("/jobs/nobody~nothing/").status_code == 404


def test_a_running_job_page_shows_tasks_ports_events_and_refreshes(jobs_world):
    w = jobs_world
    body = client(w.a_member).get("/jobs/a_member~mine_running/").content.decode()
    task = body.split('data-task="taskrole-0"')[1].split("</tr>")[0]
    assert "RUNNING" in task and "gpu-node-1" in task and "<td>0</td>" in task  # GPU 0
    assert 'data-refresh="10"' in body and 'http-equiv="refresh"' in body  # and without JS
    assert 'id="stop"' in body
    ports = body.split('id="access"')[1].split("</section>")[0]
    assert "10.0.0.5" in ports and "ssh: 30022" in ports
    assert "Started container" in body.split('id="events"')[1]
    assert 'aria-current="step">Running' in body


def test_a_waiting_job_shows_why_and_its_place(jobs_world):
    w = jobs_world
    Job.objects.filter(pk=w.mine.pk).update(
        wait_reason="VC team_a: 16 of 16 A100 in use by 2 jobs; this job needs 8", queue_position=3
    )
    body = client(w.a_member).get("/jobs/a_member~mine_waiting/").content.decode()
    assert '<span id="queue-position">3</span>' in body
    assert "16 of 16 A100 in use by 2 jobs" in body.split('id="wait-reason"')[1]
    assert 'aria-current="step">Waiting' in body


def test_a_failed_job_shows_its_diagnosis_and_the_log_tail(jobs_world):
    w = jobs_world
    attempt = JobAttempt.objects.get(job=w.running)
    now = timezone.now()
    JobAttempt.objects.filter(pk=attempt.pk).update(
        state="FAILED", completed_at=now, exit_code=1, exit_spec_code=1,
        exit_trigger_message="task taskrole[0] failed", trigger_task_role="taskrole", trigger_task_index=0,
        exit_diagnostics="exit code 1",
    )
    Job.objects.filter(pk=w.running.pk).update(state="FAILED", completed_at=now, app_exit_code=1)
    body = client(w.a_member).get("/jobs/a_member~mine_running/").content.decode()
    diagnosis = body.split('id="diagnosis"')[1].split("</section>")[0]
    assert '<dd id="exit-code">1</dd>' in diagnosis
    assert 'id="exit-reason"' in diagnosis and 'id="exit-solution"' in diagnosis
    assert 'href="/jobs/a_member~mine_running/attempts/0/tasks/taskrole/0/log"' in diagnosis
    assert "step 4999: loss 0.000" in diagnosis  # the end of the triggering task's log
    assert "data-refresh" not in body and 'id="stop"' not in body


def test_stop_from_the_page_and_who_may(jobs_world):
    w = jobs_world
    sharing.share_with_user(w.a_member, w.mine, w.b_member)
    assert client(w.b_member).post("/jobs/a_member~mine_waiting/stop").status_code == 403  # read-only share
    assert client(w.b_admin).post("/jobs/a_member~mine_waiting/stop").status_code == 404
    assert Job.objects.get(pk=w.mine.pk).state == "WAITING"
    response = client(w.a_admin).post("/jobs/a_member~mine_waiting/stop", {"next": "/jobs/?scope=team"})
    assert response.status_code == 302 and response["Location"] == "/jobs/?scope=team"
    assert Job.objects.get(pk=w.mine.pk).state == "STOPPED"
    # An outside `next` is not followed.
    response = client(w.a_member).post("/jobs/a_member~mine_running/stop", {"next": "https://evil.example/"})
    assert response["Location"] == "/jobs/a_member~mine_running/"
    assert Job.objects.get(pk=w.running.pk).state == "STOPPING"  # its pod is being deleted


def test_bulk_stop_and_clone(jobs_world):
    w = jobs_world
    member = client(w.a_member)
    response = member.post("/jobs/bulk", {
        "action": "stop", "jobs": ["a_member~mine_waiting", "b_member~other_team_job", "b_member~shared_to_a"],
    }, follow=True)
    text = response.content.decode()
    assert Job.objects.get(pk=w.mine.pk).state == "STOPPED"
    assert "Job b_member~other_team_job is not found." in text
    assert "b_member~shared_to_a is shared with you read-only" in text
    assert Job.objects.get(pk=w.shared.pk).state == "WAITING"
    response = member.post("/jobs/bulk", {"action": "clone", "jobs": ["a_member~mine_waiting", "b_member~shared_to_a"]},
                           follow=True)
    text = response.content.decode()
    assert "Cloned a_member~mine_waiting as a_member~mine_waiting_1." in text
    copy = Job.objects.get(owner=w.a_member, name="mine_waiting_1")
    assert copy.state == "WAITING" and copy.virtual_cluster == w.vc_a
    # The shared job is in Team B's VC, which a_member may not use: refused with the reason.
    assert "b_member~shared_to_a was not cloned" in text and "team_b" in text
    assert not Job.objects.filter(owner=w.a_member, name="shared_to_a_1").exists()
    assert "jobs: tick at least one job." in member.post("/jobs/bulk", {"action": "stop"}, follow=True).content.decode()
    too_many = {"action": "stop", "jobs": [f"a_member~j{i}" for i in range(101)]}
    assert "at most 100" in member.post("/jobs/bulk", too_many, follow=True).content.decode()


def test_resubmit_submits_the_job_again_and_lands_on_the_copy(jobs_world):
    from apps.jobs import services
    from tests.jobs.conftest import job_document

    w = jobs_world
    Job.objects.filter(pk=w.mine.pk).update(state="FAILED", completed_at=timezone.now())
    member = client(w.a_member)
    page = member.get("/jobs/a_member~mine_waiting/").content.decode()
    assert 'action="/jobs/a_member~mine_waiting/resubmit"' in page and 'id="clone"' in page
    assert 'id="resubmit"' not in member.get("/jobs/a_member~mine_running/").content.decode()  # not ended
    response = member.post("/jobs/a_member~mine_waiting/resubmit")
    assert response.status_code == 303 and response["Location"] == "/jobs/a_member~mine_waiting_1/"
    copy = Job.objects.get(owner=w.a_member, name="mine_waiting_1")
    assert copy.state == "WAITING" and copy.spec["taskRoles"] == Job.objects.get(pk=w.mine.pk).spec["taskRoles"]
    assert member.post("/jobs/a_member~mine_waiting/resubmit")["Location"] == "/jobs/a_member~mine_waiting_2/"
    # Another team's member: 404, as for a missing job, and nothing is submitted.
    assert client(w.b_member).post("/jobs/a_member~mine_waiting/resubmit").status_code == 404
    assert client(w.b_member).post("/jobs/a_member~no_such_job/resubmit").status_code == 404
    assert Job.objects.filter(name__startswith="mine_waiting_").count() == 2
    # A job with secrets goes to its clone page, where they are entered again.
    services.submit_job(w.a_member, {**job_document(name="with_secret"), "secrets": {"token": "s3cret"}})
    response = member.post("/jobs/a_member~with_secret/resubmit", follow=True)
    assert response.redirect_chain[-1][0] == "/jobs/a_member~with_secret/clone"
    assert "has secrets, which are never shown" in response.content.decode()
    assert not Job.objects.filter(name="with_secret_1").exists()


def test_stop_and_bulk_actions_count_against_the_apis_rates(jobs_world, settings, monkeypatch):
    from rest_framework.throttling import UserRateThrottle

    w = jobs_world
    member = client(w.a_member)
    # Each copy is a submission, on the counter POST /api/v2/jobs uses: one a minute here.
    settings.PAI_THROTTLE_JOB_SUBMIT = "1/minute"
    response = member.post("/jobs/bulk", {"action": "clone", "jobs": ["a_member~mine_waiting", "a_member~mine_running"]},
                           follow=True)
    text = response.content.decode()
    assert "Cloned a_member~mine_waiting as a_member~mine_waiting_1." in text
    assert "Too many submissions: 1 job(s) not cloned, from a_member~mine_running on" in text
    assert not Job.objects.filter(name="mine_running_1").exists()
    # Stop and bulk requests count against the API-wide rate: two a minute here, the clone above was one.
    monkeypatch.setattr(UserRateThrottle, "THROTTLE_RATES", {**UserRateThrottle.THROTTLE_RATES, "user": "2/minute"})
    assert member.post("/jobs/a_member~mine_waiting/stop").status_code == 302
    refused = member.post("/jobs/a_member~mine_running/stop")
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert Job.objects.get(pk=w.running.pk).state == "RUNNING"
    refused = member.post("/jobs/bulk", {"action": "stop", "jobs": ["a_member~mine_running"]})
    assert refused.status_code == 429 and Job.objects.get(pk=w.running.pk).state == "RUNNING"


def test_the_log_viewer_tail_download_and_follow(jobs_world):
    w = jobs_world
    member = client(w.a_member)
    url = "/jobs/a_member~mine_running/attempts/0/tasks/taskrole/0/log"
    page = member.get(url).content.decode()
    assert "step 4999: loss 0.000" in page and "step 0: loss" not in page  # the tail only
    assert 'id="follow"' in page and 'id="download"' in page
    whole = member.get(url + "?download=1")
    assert whole["Content-Disposition"].startswith("attachment")
    data = b"".join(whole.streaming_content)
    assert data == w.log.read_bytes()
    followed = member.get(url + "?follow=1").content.decode()
    size = w.log.stat().st_size
    assert f'data-offset="{size}"' in followed
    with w.log.open("a") as handle:
        handle.write("step 5000: done\n")
    more = member.get(url + f"?offset={size}")
    assert more.content == b"step 5000: done\n"
    assert more["X-Log-Offset"] == str(size + 16) and more["X-Log-Finished"] == "0"
    assert member.get(url + "?offset=-1").status_code == 400
    assert member.get(url + "?try=5").status_code == 404
    assert member.get("/jobs/a_member~mine_running/attempts/0/tasks/nosuchrole/0/log").status_code == 404


def test_a_kept_log_is_shown_once_the_pod_is_gone(jobs_world):
    w = jobs_world
    task_attempt = JobAttempt.objects.get(job=w.running).tasks.get().attempts.get()
    task_attempt.log_path = ""
    task_attempt.completed_at = timezone.now()
    task_attempt.save()
    TaskLog.objects.create(task_attempt=task_attempt, text="kept: last words\n")
    member = client(w.a_member)
    url = "/jobs/a_member~mine_running/attempts/0/tasks/taskrole/0/log"
    page = member.get(url).content.decode()
    assert "kept: last words" in page and 'id="follow"' not in page
    assert member.get(url + "?download=1").content == b"kept: last words\n"


def test_list_links_are_quoted_as_the_resolver_quotes_them():
    from django.urls import reverse

    paths = views._JobPaths()
    for username in ("carol", "e.v+1@lab", "a b", "ü-ser"):
        kwargs = {"username": username, "name": "job_1"}
        assert paths.of(username, "job_1") == {
            "url": reverse("portal:job-detail", kwargs=kwargs), "stop_url": reverse("portal:job-stop", kwargs=kwargs),
            "clone_url": reverse("portal:job-clone", kwargs=kwargs),
        }
