"""Home, the job list, a job's page and its task attempts' logs.

Every page reads through the API's querysets: the list through `visible_to`, a job's pages
through `readable_by` (anyone else gets 404, whether or not the job exists), stopping
through `manageable_by` (a read-only share gets 403).
"""

import datetime as dt
from urllib.parse import quote, urlencode

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import FileResponse, Http404, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from apps.accounts.roles import is_platform_admin, member_tenant_ids
from apps.accounts.sharing import shared_with_user
from apps.jobs import services
from apps.jobs.choices import COMPLETED_STATES, JobState
from apps.jobs.errors import ConflictJobError
from apps.jobs.filters import JobFilterSet
from apps.jobs.models import Job, JobAttempt, JobEvent, JobUserObjectPermission, Task, TaskAttempt
from apps.jobs.protocol import MASK
from apps.jobs.protocol.structure import storable_text
from apps.jobs.querysets import is_manageable
from apps.jobs.reading import exit_of, has_log, log_file, read_log
from apps.oncall.models import Incident
from apps.virtualclusters.models import VirtualCluster
from apps.virtualclusters.status import vc_statuses
from pai.api.errors import ApiError
from scheduler import exitcodes

from .. import throttling

PAGE_SIZE = 50
HOME_ROWS = 20
LOG_TAIL_BYTES = 64 * 1024
LOG_FOLLOW_LIMIT = 256 * 1024
DIAGNOSIS_TAIL_BYTES = 4 * 1024
ACTIVE_STATES = (JobState.RUNNING, JobState.STOPPING)
BULK_LIMIT = 100
TASKS_SHOWN = 500  # a job's page lists this many tasks at most (a job may have 10,000)


def job_url(job, name="portal:job-detail"):
    return reverse(name, kwargs={"username": job.owner.username, "name": job.name})


# --- home -----------------------------------------------------------------------------


@require_GET
def home(request):
    """The signed-in user's jobs, VCs and the open incidents that may hit them; anonymous
    visitors get the site's front page."""
    if not request.user.is_authenticated:
        return render(request, "home.html", {"auth_mode": settings.PAI_AUTH_MODE})
    user = request.user
    mine = Job.objects.filter(owner=user).select_related("virtual_cluster").defer("protocol_text", "spec", "launch")
    vcs = list(VirtualCluster.objects.usable_by(user).select_related("cluster").order_by("name"))
    statuses = vc_statuses(vcs)
    context = {
        "running": list(mine.filter(state__in=ACTIVE_STATES)[:HOME_ROWS]),
        "waiting": list(mine.filter(state=JobState.WAITING)[:HOME_ROWS]),
        "recent": list(mine.filter(state__in=COMPLETED_STATES)[:10]),
        "vcs": [(vc, statuses.get(vc.pk)) for vc in vcs],
        "incidents": list(
            Incident.objects.on_status_page_of(user).filter(severity__lte=1).select_related("cluster")
            .order_by("severity", "-triggered_at")[:10]
        ),
    }
    return render(request, "portal/home.html", context)


# --- the job list ---------------------------------------------------------------------

SCOPES = {"mine": "Mine", "team": "My teams'", "shared": "Shared with me"}


class JobListForm(forms.Form):
    scope = forms.ChoiceField(choices=[], required=False, label="Show")
    user = forms.CharField(required=False, max_length=150, label="User")
    vc = forms.CharField(required=False, max_length=255, label="Virtual cluster")
    state = forms.MultipleChoiceField(choices=JobState.choices, required=False, label="State")
    since = forms.DateField(required=False, label="Submitted from", widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, label="Submitted until", widget=forms.DateInput(attrs={"type": "date"}))
    q = forms.CharField(required=False, max_length=255, label="Search", help_text="in job, user and VC names")
    after = forms.CharField(required=False, max_length=64, widget=forms.HiddenInput)
    before = forms.CharField(required=False, max_length=64, widget=forms.HiddenInput)

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        scopes = dict(SCOPES)
        if is_platform_admin(user):
            scopes["all"] = "All jobs"
        self.fields["scope"].choices = list(scopes.items())

    def clean(self):
        data = super().clean()
        for field in ("user", "vc", "q"):
            if data.get(field) and not storable_text(data[field]):
                self.add_error(field, "must be text without NUL characters")
        for field in ("after", "before"):
            raw = data.get(field)
            if raw:
                try:
                    data[field] = _cursor(raw)
                except ValueError:
                    self.add_error(field, "is not a page of this list")
        return data


def _cursor(raw):
    stamp, _, pk = raw.partition("_")
    return dt.datetime.fromtimestamp(int(stamp) / 1_000_000, tz=dt.UTC), int(pk)


def _cursor_of(job):
    return f"{round(job.submitted_at.timestamp() * 1_000_000)}_{job.pk}"


def _scoped(user, scope):
    jobs = Job.objects.visible_to(user)
    if scope == "mine":
        return jobs.filter(owner=user)
    if scope == "team":
        return jobs.filter(tenant_id__in=member_tenant_ids(user))
    if scope == "shared":
        return jobs.filter(pk__in=shared_with_user(user, JobUserObjectPermission, "view_job"))
    return jobs  # "all": platform admins only (the form offers it to no one else)


def _filtered(jobs, data):
    # The API's own filters (names resolved to ids first; keyword in job, user and VC names).
    params = QueryDict(mutable=True)
    for ours, theirs in (("user", "username"), ("vc", "vc"), ("q", "keyword")):
        if data.get(ours):
            params[theirs] = data[ours]
    if data.get("state"):
        params["state"] = ",".join(data["state"])
    filterset = JobFilterSet(params, queryset=jobs)
    filterset.is_valid()  # every value was checked by the form
    jobs = filterset.qs
    if data.get("since"):
        jobs = jobs.filter(submitted_at__gte=_day_start(data["since"]))
    if data.get("until"):
        jobs = jobs.filter(submitted_at__lt=_day_start(data["until"] + dt.timedelta(days=1)))
    return jobs


def _day_start(day):
    return timezone.make_aware(dt.datetime.combine(day, dt.time()), timezone.get_current_timezone())


def _page(jobs, after, before):
    """One page in submission order, newest first, by keyset: (rows, newer cursor, older cursor)."""
    if before:
        stamp, pk = before
        rows = list(
            jobs.filter(Q(submitted_at__gt=stamp) | Q(submitted_at=stamp, pk__gt=pk))
            .order_by("submitted_at", "id")[: PAGE_SIZE + 1]
        )
        more_newer = len(rows) > PAGE_SIZE
        rows = rows[:PAGE_SIZE][::-1]
        return rows, (_cursor_of(rows[0]) if more_newer and rows else None), (_cursor_of(rows[-1]) if rows else None)
    if after:
        stamp, pk = after
        jobs = jobs.filter(Q(submitted_at__lt=stamp) | Q(submitted_at=stamp, pk__lt=pk))
    rows = list(jobs.order_by("-submitted_at", "-id")[: PAGE_SIZE + 1])
    more_older = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    newer = _cursor_of(rows[0]) if after and rows else None
    return rows, newer, (_cursor_of(rows[-1]) if more_older else None)


class _JobPaths:
    """A job's page, stop and clone paths, by filling the names into paths reversed once:
    a page of 50 rows asks the resolver 3 times, not 150."""

    def __init__(self):
        marker = {"username": "USERNAME", "name": "JOBNAME"}
        self.templates = {
            key: reverse(name, kwargs=marker) for key, name in
            (("url", "portal:job-detail"), ("stop_url", "portal:job-stop"), ("clone_url", "portal:job-clone"))
        }

    def of(self, username, name):
        # Quoted as the resolver quotes them (user names may hold '@', '+', '.').
        username, name = quote(username, safe=_SAFE), quote(name, safe=_SAFE)
        return {
            key: template.replace("USERNAME", username, 1).replace("JOBNAME", name, 1)
            for key, template in self.templates.items()
        }


# What django.urls.reverse leaves unquoted in a path (RFC 3986's sub-delimiters, '/', '~', ':', '@').
_SAFE = "!$&'()*+,;=/~:@"


def _readable_ids(user, rows):
    """Which of the listed jobs the user may open (and clone): managers, and shares by name."""
    ids = {job.pk for job in rows if is_manageable(job, user)}
    rest = [job.pk for job in rows if job.pk not in ids]
    if rest:
        ids |= set(
            JobUserObjectPermission.objects.filter(
                user=user, permission__codename="view_job", content_object_id__in=rest
            ).values_list("content_object_id", flat=True)
        )
    return ids


@login_required
@require_GET
def job_list(request):
    user = request.user
    form = JobListForm(request.GET or None, user=user)
    if request.GET and not form.is_valid():
        return render(request, "portal/job_list.html", {
            "form": form, "jobs": [], "scope": request.GET.get("scope") or "mine",
            "scopes": form.fields["scope"].choices, "here": request.get_full_path(),
        }, status=400)
    data = form.cleaned_data if request.GET else {}
    scope = data.get("scope") or "mine"
    jobs = _filtered(_scoped(user, scope), data)
    jobs = jobs.select_related("owner", "virtual_cluster").only(
        "name", "state", "submitted_at", "completed_at", "total_gpu", "total_tasks", "retries", "owner_id",
        "tenant_id", "virtual_cluster_id", "owner__username", "virtual_cluster__name", "queue_position",
    )
    rows, newer, older = _page(jobs, data.get("after"), data.get("before"))
    readable = _readable_ids(user, rows)
    keep = {k: v for k, v in request.GET.lists() if k not in ("after", "before")}
    paths = _JobPaths()
    rows = [
        {"job": job, "readable": job.pk in readable, "manageable": is_manageable(job, user),
         "finished": job.state in COMPLETED_STATES, "key": f"{job.owner.username}~{job.name}",
         **paths.of(job.owner.username, job.name)}
        for job in rows
    ]
    context = {
        "form": form,
        "scope": scope,
        "scopes": form.fields["scope"].choices,
        "jobs": rows,
        "filtered": any(data.get(k) for k in ("user", "vc", "state", "since", "until", "q")),
        "newer_url": "?" + urlencode({**keep, "before": newer}, doseq=True) if newer else None,
        "older_url": "?" + urlencode({**keep, "after": older}, doseq=True) if older else None,
        "first_url": "?" + urlencode(keep, doseq=True) if (data.get("after") or data.get("before")) else None,
        "here": request.get_full_path(),
    }
    return render(request, "portal/job_list.html", context)


# --- one job --------------------------------------------------------------------------


def _readable_job(request, username, name, *, full=False):
    """The job `username~name` if the user may read it, else 404 (also when it does not exist)."""
    if not (storable_text(username) and storable_text(name)):
        raise Http404("No such job.")
    jobs = Job.objects.readable_by(request.user).select_related("owner", "virtual_cluster", "virtual_cluster__cluster")
    jobs = jobs.defer("protocol_text", "launch") if full else jobs.defer("protocol_text", "spec", "launch")
    job = jobs.filter(owner__username=username, name=name).first()
    if job is None:
        raise Http404("No such job.")
    return job


def _timeline(job, attempts):
    """The steps submitted → waiting → running → completed, each with its time and whether it is
    done, current or still ahead."""
    finished = job.state in COMPLETED_STATES
    first = attempts[-1] if attempts else None
    launched = job.launched_at or (first.launched_at if first else None)
    ran = launched is not None
    steps = [
        {"name": "Submitted", "at": job.submitted_at, "status": "done"},
        {"name": "Waiting", "at": job.submitted_at,
         "status": "current" if job.state == JobState.WAITING else "done"},
        {"name": "Running", "at": launched,
         "status": "current" if job.state in ACTIVE_STATES else ("done" if ran else ("skipped" if finished else "ahead"))},
        {"name": job.state.title() if finished else "Completed", "at": job.completed_at,
         "status": "done" if finished else "ahead"},
    ]
    return steps


def _diagnosis(request, job, attempt):
    """How the job ended, in words: the exit spec row (phrase, reason, what to do), the task that
    ended it and the end of that task's log."""
    if job.state not in COMPLETED_STATES:
        return None
    code, spec_code, diagnostics, trigger = exit_of(job, attempt)
    if code is None:
        return None
    row = exitcodes.row(spec_code if spec_code is not None else code)
    result = {
        "code": code, "phrase": row.phrase, "type": row.type,
        "reason": row.reason, "solution": list(row.solution), "diagnostics": diagnostics, "trigger": trigger,
        "task_role": attempt.trigger_task_role if attempt else "", "task_index": attempt.trigger_task_index if attempt else None,
        "log_tail": None, "log_url": None,
    }
    if attempt is not None and attempt.trigger_task_role and attempt.trigger_task_index is not None:
        task_attempt = (
            TaskAttempt.objects.readable_by(request.user)
            .filter(task__job_attempt=attempt, task__task_role=attempt.trigger_task_role,
                    task__index=attempt.trigger_task_index)
            .order_by("-index").first()
        )
        if task_attempt is not None:
            read = read_log(task_attempt, tail=DIAGNOSIS_TAIL_BYTES)
            if read is not None:
                result["log_tail"] = _lines_tail(read[0], 40)
            result["log_url"] = reverse("portal:task-log", kwargs={
                "username": job.owner.username, "name": job.name, "attempt": attempt.index,
                "role": attempt.trigger_task_role, "index": attempt.trigger_task_index,
            })
    return result


def _lines_tail(data, lines):
    text = data.decode("utf-8", "replace")
    return "\n".join(text.splitlines()[-lines:])


def _gpus(job, task_attempt):
    role = (job.spec.get("taskRoles") or {}).get(task_attempt.task.task_role) or {}
    if not (role.get("resourcePerInstance") or {}).get("gpu"):
        return ""
    return ",".join(str(i) for i in task_attempt.device_indices or [])


@login_required
@require_GET
def job_detail(request, username, name):
    user = request.user
    job = _readable_job(request, username, name, full=True)
    attempts = list(JobAttempt.objects.readable_by(user).filter(job=job).order_by("-index"))
    shown = attempts[0] if attempts else None
    asked = request.GET.get("attempt")
    if asked not in (None, ""):
        shown = next((a for a in attempts if str(a.index) == asked), None)
        if shown is None:
            raise Http404("No such attempt.")
    roles = {role: [] for role in job.spec.get("taskRoles") or {}}
    ports = []
    tasks_cut = False
    if shown is not None:
        tasks = list(
            Task.objects.readable_by(user).filter(job_attempt=shown).prefetch_related("attempts")
            .order_by("task_role", "index")[:TASKS_SHOWN + 1]
        )
        tasks_cut = len(tasks) > TASKS_SHOWN
        for task in tasks[:TASKS_SHOWN]:
            history = list(task.attempts.all())
            for ta in history:
                ta.task = task
            current = history[-1] if history else None
            roles.setdefault(task.task_role, []).append({
                "task": task, "current": current, "history": history,
                "gpus": _gpus(job, current) if current else "",
                "log_url": reverse("portal:task-log", kwargs={
                    "username": job.owner.username, "name": job.name, "attempt": shown.index,
                    "role": task.task_role, "index": task.index,
                }),
            })
            if current is not None and current.ports and current.completed_at is None:
                ports.append({"task": task, "ip": current.ip, "node": current.node_name, "ports": current.ports})
    events = list(
        JobEvent.objects.readable_by(user).filter(job=job).select_related("task_attempt")
        .order_by("-last_seen", "-id")[:50]
    )
    manageable = is_manageable(job, user)
    finished = job.state in COMPLETED_STATES
    shares = (
        sorted(job.user_shares.filter(permission__codename="view_job").values_list("user__username", flat=True))
        if manageable else None
    )
    context = {
        "job": job,
        "finished": finished,
        "manageable": manageable,
        "attempts": attempts,
        "shown": shown,
        "roles": roles,
        "ports": ports,
        "tasks_cut": tasks_cut,
        "tasks_shown": TASKS_SHOWN,
        "events": events,
        "shares": shares,
        "timeline": _timeline(job, attempts),
        "diagnosis": _diagnosis(request, job, attempts[0] if attempts else None),
        # A link to the VC's page only for those who may see it (a job shared across teams is read
        # by people its VC answers 404 to).
        "vc_url": (reverse("portal:vc-detail", kwargs={"name": job.virtual_cluster.name})
                   if VirtualCluster.objects.visible_to(user).filter(pk=job.virtual_cluster_id).exists() else None),
        "clone_url": job_url(job, "portal:job-clone"),
        "refresh_seconds": None if finished else settings.PAI_PORTAL_REFRESH_SECONDS,
        "here": request.get_full_path(),
    }
    return render(request, "portal/job_detail.html", context)


def _next_url(request, default):
    target = request.POST.get("next") or ""
    if target and url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure()):
        return target
    return default


@login_required
@require_POST
def job_stop(request, username, name):
    wait = throttling.request_wait(request)
    if wait is not None:
        return throttling.too_many_page(request, wait)
    job = _readable_job(request, username, name)
    if not is_manageable(job, request.user):
        return render(request, "portal/error.html", {
            "title": "Read-only", "message": f"Job {username}~{name} is shared with you read-only: only its owner "
            "and its team's admins may stop it.",
        }, status=403)
    _stop(request, job)
    return redirect(_next_url(request, job_url(job)))


def _stop(request, job):
    if job.state in COMPLETED_STATES:
        messages.info(request, f"Job {job.framework_name} had already ended ({job.state}).")
        return False
    services.set_execution_type(request.user, job, "STOP")
    messages.success(request, f"Stopping job {job.framework_name}.")
    return True


class BulkForm(forms.Form):
    action = forms.ChoiceField(choices=[("stop", "Stop"), ("clone", "Clone")])


def _clone_name(owner, name):
    taken = set(Job.objects.filter(owner=owner, name__startswith=f"{name[:240]}_").values_list("name", flat=True))
    for n in range(1, 1000):
        candidate = f"{name[:240]}_{n}"
        if candidate not in taken:
            return candidate
    raise ConflictJobError(f"name: too many copies of {name}")


def _has_masked_values(spec):
    if spec.get("secrets"):
        return True
    return any(((item.get("auth") or {}).get("password") == MASK) for item in spec.get("prerequisites") or [])


def _clone(request, job):
    """Submit a copy of the job as the user, under the job's name with a number after it."""
    if _has_masked_values(job.spec):
        messages.error(request, f"Job {job.framework_name} has secrets, which are never shown: clone it on its own "
                                "and enter them again.")
        return None
    document = dict(job.spec)
    document["name"] = _clone_name(request.user, job.name)
    try:
        copy, _ = services.submit_job(request.user, document)
    except ApiError as exc:
        messages.error(request, f"Job {job.framework_name} was not cloned: {exc.detail}")
        return None
    messages.success(request, f"Cloned {job.framework_name} as {copy.framework_name}.")
    return copy


@login_required
@require_POST
def job_bulk(request):
    """Stop or clone the jobs ticked in the list (`jobs`: `user~name`, at most 100). The
    request counts against the API-wide rate, each copy against the job submission rate."""
    wait = throttling.request_wait(request)
    if wait is not None:
        return throttling.too_many_page(request, wait)
    form = BulkForm(request.POST)
    back = _next_url(request, reverse("portal:job-list"))
    selected = [v for v in request.POST.getlist("jobs") if isinstance(v, str)]
    if not form.is_valid():
        messages.error(request, "action: choose Stop or Clone.")
        return redirect(back)
    if not selected:
        messages.error(request, "jobs: tick at least one job.")
        return redirect(back)
    if len(selected) > BULK_LIMIT:
        messages.error(request, f"jobs: at most {BULK_LIMIT} at once, not {len(selected)}.")
        return redirect(back)
    action = form.cleaned_data["action"]
    for position, value in enumerate(selected):
        username, sep, name = value.partition("~")
        if not sep or not (storable_text(username) and storable_text(name)):
            messages.error(request, f"jobs: {value!r} is not user~name.")
            continue
        job = (
            Job.objects.readable_by(request.user).select_related("owner")
            .filter(owner__username=username, name=name).first()
        )
        if job is None:
            messages.error(request, f"Job {username}~{name} is not found.")
        elif action == "stop":
            if is_manageable(job, request.user):
                _stop(request, job)
            else:
                messages.error(request, f"Job {job.framework_name} is shared with you read-only: not stopped.")
        else:
            wait = throttling.submission_wait(request)
            if wait is not None:
                messages.error(request, f"Too many submissions: {len(selected) - position} job(s) not cloned, "
                                        f"from {job.framework_name} on; try again in {wait} second(s).")
                break
            _clone(request, job)
    return redirect(back)


@login_required
@require_POST
def job_resubmit(request, username, name):
    """Submit a job the user may read again, as it is, under its name with a number after it
    (`name_1`, `name_2`, ...), and land on the new job's page. A job with secrets goes to its
    clone page instead, where they are entered again (they are never shown)."""
    wait = throttling.request_wait(request)
    if wait is not None:
        return throttling.too_many_page(request, wait)
    job = _readable_job(request, username, name, full=True)
    if _has_masked_values(job.spec):
        messages.info(request, f"Job {job.framework_name} has secrets, which are never shown: enter them again "
                               "and submit.")
        return redirect(job_url(job, "portal:job-clone"))
    wait = throttling.submission_wait(request)
    if wait is not None:
        return throttling.too_many_page(request, wait, "submissions")
    copy = _clone(request, job)
    response = redirect(job_url(copy) if copy is not None else job_url(job))
    response.status_code = 303
    return response


# --- abnormal jobs --------------------------------------------------------------------


@login_required
@require_GET
def abnormal_job_list(request):
    """OpenPAI's "abnormal jobs": the running jobs the user may stop that ran more than
    PAI_ABNORMAL_JOB_DAYS days or stayed under PAI_ABNORMAL_GPU_PERCENT % GPU for
    PAI_ABNORMAL_GPU_MINUTES minutes (`apps.monitoring.abnormal`), each with why and a stop
    button. Platform admins see every team's, team admins their teams', members their own."""
    from apps.monitoring.abnormal import abnormal_jobs

    found = abnormal_jobs(request.user)
    rows = [
        {"found": item, "job": item.job, "key": item.job.framework_name, "url": job_url(item.job),
         "stop_url": job_url(item.job, "portal:job-stop"),
         "running_days": item.running_seconds / 86400 if item.running_seconds is not None else None}
        for item in found
    ]
    return render(request, "portal/abnormal_jobs.html", {
        "rows": rows, "here": request.get_full_path(), "days": settings.PAI_ABNORMAL_JOB_DAYS,
        "percent": settings.PAI_ABNORMAL_GPU_PERCENT, "minutes": settings.PAI_ABNORMAL_GPU_MINUTES,
    })


# --- logs -----------------------------------------------------------------------------


def _task_attempt(request, username, name, attempt, role, index):
    job = _readable_job(request, username, name, full=False)
    if not storable_text(role):
        raise Http404("No such task.")
    task = (
        Task.objects.readable_by(request.user).select_related("job_attempt").prefetch_related("attempts")
        .filter(job_attempt__job=job, job_attempt__index=attempt, task_role=role, index=index).first()
    )
    if task is None:
        raise Http404("No such task.")
    history = list(task.attempts.all())
    asked = request.GET.get("try")
    if asked not in (None, ""):
        chosen = next((ta for ta in history if str(ta.index) == asked), None)
        if chosen is None:
            raise Http404("No such task attempt.")
    else:
        chosen = history[-1] if history else None
    return job, task, history, chosen


def _int(value, default=None):
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


@login_required
@require_GET
def task_log(request, username, name, attempt, role, index):
    """One task attempt's log: its end on the page, followed live (`?follow=1`), whole as a download
    (`?download=1`); `?offset=N` answers the bytes from N on as text for the follower's script."""
    attempt, index = int(attempt), int(index)
    job, task, history, chosen = _task_attempt(request, username, name, attempt, role, index)
    if request.GET.get("offset") not in (None, ""):
        offset = _int(request.GET["offset"])
        if offset is None or offset < 0:
            return HttpResponse("offset: must be a whole number ≥ 0", status=400, content_type="text/plain")
        read = read_log(chosen, offset=offset, limit=LOG_FOLLOW_LIMIT) if chosen is not None else None
        data, size = read if read is not None else (b"", 0)
        response = HttpResponse(data, content_type="text/plain; charset=utf-8")
        response["X-Log-Offset"] = str(offset + len(data) if read is not None else 0)
        response["X-Log-Size"] = str(size)
        response["X-Log-Finished"] = "1" if (chosen is None or chosen.completed_at is not None) else "0"
        return response
    if request.GET.get("download"):
        if chosen is None or not has_log(chosen):
            raise Http404("This task attempt has no log yet.")
        filename = f"{job.owner.username}~{job.name}-{attempt}-{role}-{index}-{chosen.index}.log"
        path = log_file(chosen)
        if path is not None:
            return FileResponse(path.open("rb"), as_attachment=True, filename=filename,
                                content_type="text/plain; charset=utf-8")
        data, _ = read_log(chosen)
        response = HttpResponse(data, content_type="text/plain; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response
    read = read_log(chosen, tail=LOG_TAIL_BYTES) if chosen is not None else None
    text, size = (read[0].decode("utf-8", "replace"), read[1]) if read is not None else ("", 0)
    if read is not None and size > len(read[0]) and "\n" in text:
        text = text.split("\n", 1)[1]  # the tail starts on a whole line
    follow = bool(request.GET.get("follow")) and chosen is not None and chosen.completed_at is None
    base = reverse("portal:task-log", kwargs={"username": username, "name": name, "attempt": attempt,
                                              "role": role, "index": index})
    suffix = f"try={chosen.index}&" if chosen is not None and asked_try(request) else ""
    context = {
        "job": job, "task": task, "history": history, "chosen": chosen, "attempt": attempt,
        "text": text, "size": size, "has_log": read is not None, "truncated": size > len(read[0]) if read else False,
        "follow": follow, "base": base, "suffix": suffix,
        "finished": chosen is None or chosen.completed_at is not None,
        "job_url": job_url(job),
    }
    return render(request, "portal/task_log.html", context)


def asked_try(request):
    return request.GET.get("try") not in (None, "")
