"""Incident follow-ups as GitHub issues, through GitHub's REST API.

"Create GitHub issue" on a follow-up (`request_issue`) stamps the request and queues
`create_issue` (a django-q2 task, after the commit). The task, under a row lock on the
follow-up, POSTs `/repos/{owner}/{repo}/issues` with the title, a body linking the
incident and the configured labels, and stores the issue's number and URL. It is
idempotent: a follow-up with an issue never gets a second one, and the body carries a
hidden marker (`<!-- pai-follow-up:ID -->`) so that a retry after an attempt whose
outcome is unknown (the connection dropped after the request left) first looks for the
issue that attempt may have opened, and adopts it.

Answers: 201 stores the issue; a rate limit (403 or 429 with GitHub's rate-limit headers)
retries at the time GitHub gives; a network error or a 5xx retries with a doubling
delay (`RETRY_DELAYS`); anything else — 401 (bad token), 403 (no access), 404 (no such
repository), 410, 422 — is an error shown on the follow-up, not retried until someone asks
again. The sweep (`sweep`, every few minutes) runs the due retries and reads the state
of every open follow-up's issue: an issue closed on GitHub marks its follow-up done.
"""

import http.client
import json
import logging
import socket
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from apps.audit.services import record

from .models import FollowUp, GitHubRepository

logger = logging.getLogger(__name__)

API_VERSION = "2022-11-28"
TIMEOUT_SECONDS = 10
# Delays before the 1st, 2nd... retry of an attempt that met a network error or a 5xx.
RETRY_DELAYS = [timedelta(minutes=m) for m in (1, 2, 5, 10, 30, 60, 120, 240)]
# Issues read per sweep at most (each is one request; GitHub allows 5,000 an hour).
SYNC_BATCH = 200


def marker(follow_up):
    return f"<!-- pai-follow-up:{follow_up.pk} -->"


class GitHubError(Exception):
    """An answer that is not a success. `retry_at` is set when the request may be tried again."""

    def __init__(self, message, *, status=None, retry_at=None, maybe_sent=False):
        super().__init__(message)
        self.status = status
        self.retry_at = retry_at
        self.maybe_sent = maybe_sent


class Client:
    """The few calls of GitHub's REST API that follow-ups need."""

    def __init__(self, repository, *, api_url=None, token=None):
        self.repository = repository
        self.api_url = (api_url or "https://api.github.com").rstrip("/")
        self.token = token or ""

    @classmethod
    def for_setting(cls, setting, repository=None):
        return cls(repository or setting.repository, api_url=setting.api_url, token=setting.token)

    def _url(self, path, query=None):
        owner, name = self.repository.split("/", 1)
        url = f"{self.api_url}/repos/{urllib.parse.quote(owner)}/{urllib.parse.quote(name)}{path}"
        return f"{url}?{urllib.parse.urlencode(query)}" if query else url

    def request(self, method, path, body=None, query=None, now=None):
        now = now or timezone.now()
        headers = {
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {self.token}",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": "pai",
        }
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self._url(path, query), data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            raise _refusal(exc, now) from None
        except (urllib.error.URLError, socket.timeout, ConnectionError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            raise GitHubError(f"GitHub could not be reached ({reason})", maybe_sent=method == "POST") from None
        except ValueError:
            raise GitHubError("GitHub's answer is not JSON", maybe_sent=method == "POST") from None

    def create_issue(self, *, title, body, labels):
        return self.request("POST", "/issues", {"title": title, "body": body, "labels": labels})

    def get_issue(self, number):
        return self.request("GET", f"/issues/{int(number)}")

    def issues_since(self, since):
        """Issues and pull requests of the repository updated since `since`, any state (one page)."""
        query = {"state": "all", "since": since.astimezone(dt_timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                 "per_page": 100, "sort": "created", "direction": "desc"}
        return self.request("GET", "/issues", query=query)


def _refusal(exc, now):
    status = exc.code
    try:
        message = json.loads(exc.read() or b"{}").get("message", "")
    except (ValueError, AttributeError):
        message = ""
    headers = exc.headers or {}
    what = f"GitHub answered {status}" + (f" ({message})" if message else "")
    retry_after = headers.get("retry-after")
    remaining = headers.get("x-ratelimit-remaining")
    if status in (403, 429) and (retry_after or remaining == "0"):
        if retry_after and retry_after.strip().isdigit():
            retry_at = now + timedelta(seconds=int(retry_after))
        elif (headers.get("x-ratelimit-reset") or "").strip().isdigit():
            retry_at = datetime.fromtimestamp(int(headers["x-ratelimit-reset"]), tz=dt_timezone.utc)
        else:
            retry_at = now + timedelta(minutes=1)
        return GitHubError(f"{what}: rate limited, retrying at {retry_at:%Y-%m-%d %H:%M:%S} UTC",
                           status=status, retry_at=max(retry_at, now))
    if status >= 500:
        return GitHubError(what, status=status, maybe_sent=True)
    if status == 401:
        what += ": the token is wrong or expired; a platform admin sets a new one in the admin"
    elif status in (403, 404):
        what += ": the token cannot open issues in this repository, or there is no such repository"
    return GitHubError(what, status=status)


# --- Requests -------------------------------------------------------------------------
def issue_body(follow_up, incident_url):
    incident = follow_up.incident
    lines = [
        f"Follow-up of incident #{incident.pk} (severity {incident.severity}): {incident.title}",
        "",
        f"Incident: {incident_url}",
    ]
    if follow_up.owner_id:
        lines.append(f"Owner in pai: {follow_up.owner.get_username()}")
    if follow_up.due_date:
        lines.append(f"Due: {follow_up.due_date.isoformat()}")
    lines += ["", "Closing this issue marks the follow-up done in pai.", "", marker(follow_up)]
    return "\n".join(lines)


def request_issue(follow_up, actor, *, now=None):
    """Ask for the follow-up's GitHub issue (by someone who may act on its incident); the
    task creates it after the commit. Asking again for one that exists changes nothing."""
    from . import services

    now = now or timezone.now()
    services.check_may_act(follow_up.incident, actor)
    setting = GitHubRepository.current()
    if setting is None or not setting.token:
        raise ValidationError("No GitHub repository is configured: a platform admin sets one in the admin "
                              "(On call → GitHub repository for follow-ups).")
    with transaction.atomic():
        services._locked(follow_up.incident, actor)
        locked = FollowUp.objects.select_for_update().get(pk=follow_up.pk)
        if locked.issue_number:
            return locked
        locked.issue_repository = locked.issue_repository or setting.repository
        locked.issue_requested_at = locked.issue_requested_at or now
        locked.issue_retry_at, locked.issue_error = now, ""
        locked.save(update_fields=["issue_repository", "issue_requested_at", "issue_retry_at", "issue_error"])
        record(actor, "oncall.follow_up.issue_requested", locked, changes={"repository": locked.issue_repository})
        transaction.on_commit(lambda: _queue(locked.pk))
    return locked


def _queue(pk):
    from django_q.tasks import async_task

    async_task("apps.oncall.tasks.create_github_issue", pk, task_name=f"github-issue-{pk}")


def create_issue(pk, *, now=None):
    """Create the follow-up's issue if it is asked for, due and not made yet. Returns the follow-up."""
    from .services import incident_url

    now = now or timezone.now()
    setting = GitHubRepository.current()
    with transaction.atomic():
        follow_up = FollowUp.objects.select_for_update().filter(pk=pk).first()
        if follow_up is None or follow_up.issue_number or follow_up.issue_retry_at is None:
            return follow_up
        if follow_up.issue_retry_at > now:
            return follow_up
        if setting is None or not setting.token:
            return _failed(follow_up, GitHubError("No GitHub repository is configured"), now)
        client = Client.for_setting(setting, follow_up.issue_repository)
        try:
            issue = None
            if follow_up.issue_attempts:
                issue = _find_sent(client, follow_up)
            if issue is None:
                follow_up.issue_attempts += 1
                issue = client.create_issue(
                    title=follow_up.title, body=issue_body(follow_up, incident_url(follow_up.incident)),
                    labels=setting.label_list(),
                )
        except GitHubError as exc:
            return _failed(follow_up, exc, now)
        follow_up.issue_number, follow_up.issue_url = int(issue["number"]), str(issue["html_url"])[:500]
        follow_up.issue_state = str(issue.get("state", "open"))[:10]
        follow_up.issue_retry_at, follow_up.issue_error = None, ""
        follow_up.save(update_fields=["issue_number", "issue_url", "issue_state", "issue_retry_at", "issue_error",
                                      "issue_attempts"])
        record(None, "oncall.follow_up.issue_created", follow_up, changes={"issue": follow_up.issue_url})
    return follow_up


def _find_sent(client, follow_up):
    """The issue an earlier attempt opened, found by its marker, or None."""
    since = follow_up.issue_requested_at - timedelta(minutes=5)
    wanted = marker(follow_up)
    for issue in client.issues_since(since) or []:
        if isinstance(issue, dict) and "pull_request" not in issue and wanted in (issue.get("body") or ""):
            return issue
    return None


def _failed(follow_up, exc, now):
    follow_up.issue_error = str(exc)[:500]
    if exc.retry_at is not None:
        follow_up.issue_retry_at = exc.retry_at
    elif exc.maybe_sent or exc.status is None:
        tries = max(follow_up.issue_attempts, 1)
        follow_up.issue_retry_at = now + RETRY_DELAYS[tries - 1] if tries <= len(RETRY_DELAYS) else None
        if follow_up.issue_retry_at is None:
            follow_up.issue_error = f"{follow_up.issue_error} (gave up after {tries} attempts)"[:500]
    else:
        follow_up.issue_retry_at = None  # needs someone to fix the setting and ask again
    follow_up.save(update_fields=["issue_error", "issue_retry_at", "issue_attempts"])
    logger.warning("GitHub issue of follow-up %s: %s", follow_up.pk, follow_up.issue_error)
    return follow_up


# --- The sweep ------------------------------------------------------------------------
def sweep(now=None):
    """Run the due retries, then mark done the follow-ups whose issue was closed on GitHub.
    Returns (issues created, follow-ups closed). Safe to run any number of times."""
    now = now or timezone.now()
    created = 0
    due = FollowUp.objects.filter(issue_number__isnull=True, issue_retry_at__lte=now).values_list("pk", flat=True)
    for pk in list(due[:SYNC_BATCH]):
        if create_issue(pk, now=now).issue_number:
            created += 1
    return created, sync_closed(now)


def sync_closed(now=None):
    now = now or timezone.now()
    setting = GitHubRepository.current()
    if setting is None or not setting.token:
        return 0
    closed = 0
    open_ones = FollowUp.objects.filter(issue_number__isnull=False, done=False).order_by("pk")
    for follow_up in open_ones[:SYNC_BATCH]:
        try:
            issue = Client.for_setting(setting, follow_up.issue_repository).get_issue(follow_up.issue_number)
        except GitHubError as exc:
            logger.warning("GitHub issue %s of follow-up %s: %s", follow_up.issue_number, follow_up.pk, exc)
            if exc.retry_at is not None:
                break  # rate limited: the next sweep goes on
            continue
        state = str(issue.get("state", ""))[:10]
        if state != "closed":
            if state != follow_up.issue_state:
                FollowUp.objects.filter(pk=follow_up.pk).update(issue_state=state)
            continue
        closed_at = _parse_time(issue.get("closed_at")) or now
        with transaction.atomic():
            locked = FollowUp.objects.select_for_update().get(pk=follow_up.pk)
            if locked.done:
                continue
            locked.done, locked.done_at, locked.issue_state = True, closed_at, "closed"
            locked.save(update_fields=["done", "done_at", "issue_state"])
            record(None, "oncall.follow_up.done", locked,
                   changes={"done": [False, True], "by": f"GitHub issue {locked.issue_url} closed"})
        closed += 1
    return closed


def _parse_time(value):
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
