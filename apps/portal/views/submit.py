"""Submitting a job from the browser: a YAML editor with "Check", a simple form that writes
the YAML, templates, import and export of a file, and "Clone" of a job one may read.

Every check and submission goes through `apps.jobs.services` — the code behind
`POST /api/v2/jobs` — with the API's submission throttles, so the page answers exactly what
the API would (errors as `path: rule`, warnings, quotas, size limit, audit). A page that
shows errors answers with the error's status (400, 403, 404, 409, 413 or 429).
"""

from django.contrib.auth.mixins import LoginRequiredMixin
from django.http import Http404, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views import View

from apps.jobs import services
from apps.jobs.models import Job
from apps.jobs.protocol.structure import storable_text
from apps.jobs.querysets import is_readable
from pai.api.errors import ApiError

from .. import submission, throttling
from ..submission import Problem

_EXPORT_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def check(user, text):
    """(errors, warnings, status) of a job YAML, as `POST /api/v2/jobs` would judge it, with
    nothing written."""
    try:
        parsed, *_ = services.check_job(user, text)
    except ApiError as exc:
        errors = getattr(exc, "errors", None) or [exc.message]
        return submission.locate(text, errors), [], exc.status_code
    return [], submission.locate(text, parsed.warnings), 200


def _context_window(lines, problems, around=2):
    """The annotated lines near an error: the place in the text each error points at."""
    marked = {p.line for p in problems if p.line is not None}
    if not marked:
        return []
    keep = {n for line in marked for n in range(line - around, line + around + 1)}
    return [row for row in lines if row[0] in keep]


def _page(request, *, text, form=None, roles=None, errors=(), warnings=(), notice="", status=200, checked=False):
    if form is None or roles is None:
        vcs = submission.usable_vcs(request.user)
        initial, rows = submission.form_initial(text)
        if not initial.get("virtual_cluster") and vcs:
            vc = services.default_virtual_cluster(request.user)
            initial["virtual_cluster"] = vc.name if vc else vcs[0][0]
        form = submission.JobForm(vcs=vcs, initial=initial)
        roles = submission.role_formset(vcs, initial=rows)
    errors, warnings = list(errors), list(warnings)
    context = {
        "text": text,
        "form": form,
        "roles": roles,
        "errors": errors,
        "warnings": warnings,
        "where": _context_window(submission.annotated_lines(text, errors), errors),
        "notice": notice,
        "checked": checked,
        "templates": submission.job_templates(),
        "upload_limit": submission.upload_limit(),
    }
    return render(request, "portal/submit.html", context, status=status)


class SubmitView(LoginRequiredMixin, View):
    """GET: the page, empty or with `?template=<slug>`. POST: `action` is one of form (write
    the YAML from the simple form), check, submit, import (a YAML file) or export."""

    def get(self, request):
        slug = request.GET.get("template")
        if slug:
            template = submission.job_template(slug)
            if template is None:
                raise Http404("No such template.")
            return _page(request, text=template.text, notice=f"Started from the template “{template.title}”.")
        return _page(request, text="")

    def post(self, request):
        action = request.POST.get("action", "check")
        text = request.POST.get("yaml", "")
        # Every action counts against the API-wide rate; a submission against the job
        # submission rate too (`_submit`), the very counters POST /api/v2/jobs uses.
        wait = throttling.request_wait(request)
        if wait is not None:
            return throttling.too_many(_page(request, text=text, errors=[Problem(
                "", f"Too many requests: try again in {wait} second(s).", None)]), wait)
        handler = {
            "form": self._from_form, "check": self._check, "submit": self._submit,
            "import": self._import, "export": self._export,
        }.get(action)
        if handler is None:
            return _page(request, text=text, errors=[Problem("action", "must be form, check, submit, import or "
                                                                       "export", None)], status=400)
        return handler(request, text)

    def _check(self, request, text):
        errors, warnings, status = check(request.user, text)
        return _page(request, text=text, errors=errors, warnings=warnings, status=status, checked=True)

    def _from_form(self, request, text):
        vcs = submission.usable_vcs(request.user)
        form = submission.JobForm(request.POST, vcs=vcs)
        roles = submission.role_formset(vcs, data=request.POST)
        if not (form.is_valid() and roles.is_valid()):
            return _page(request, text=text, form=form, roles=roles, status=400,
                         errors=[Problem("form", "correct the fields marked below", None)])
        text = submission.dump(submission.document_from_form(form, roles))
        errors, warnings, status = check(request.user, text)
        notice = "The YAML was written from the form."
        if errors:
            submission.attach_to_form(form, roles, errors)
            return _page(request, text=text, form=form, roles=roles, errors=errors, warnings=warnings,
                         status=status, checked=True, notice=notice)
        # The form again as the YAML reads, with an empty row for one more task role.
        return _page(request, text=text, warnings=warnings, checked=True, notice=notice)

    def _submit(self, request, text):
        wait = throttling.submission_wait(request)
        if wait is not None:
            return throttling.too_many(_page(request, text=text, errors=[Problem(
                "", f"Too many submissions: try again in {wait} second(s).", None)]), wait)
        try:
            job, _ = services.submit_job(request.user, text)
        except ApiError as exc:
            errors = getattr(exc, "errors", None) or [exc.message]
            return _page(request, text=text, errors=submission.locate(text, errors), status=exc.status_code)
        # 303: the browser follows with a GET, and a reload of the job page does not submit again.
        response = HttpResponseRedirect(
            reverse("portal:job-detail", kwargs={"username": job.owner.username, "name": job.name})
        )
        response.status_code = 303
        return response

    def _import(self, request, text):
        upload = request.FILES.get("file")
        if upload is None:
            return _page(request, text=text, status=400, errors=[Problem("file", "choose a YAML file to import", None)])
        limit = submission.upload_limit()
        if upload.size > limit:
            return _page(request, text=text, status=413, errors=[Problem(
                "file", f"the file is {upload.size} bytes; the limit is {limit} bytes", None)])
        try:
            imported = upload.read(limit + 1).decode("utf-8")
        except UnicodeDecodeError as exc:
            return _page(request, text=text, status=400, errors=[Problem(
                "file", f"is not UTF-8 text ({exc.reason} at byte {exc.start})", None)])
        if not storable_text(imported):
            return _page(request, text=text, status=400, errors=[Problem(
                "file", "must be text without NUL characters", None)])
        errors, warnings, status = check(request.user, imported)
        return _page(request, text=imported, errors=errors, warnings=warnings, status=status, checked=True,
                     notice=f"Imported {upload.name}.")

    def _export(self, request, text):
        limit = submission.upload_limit()
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > limit:
            return _page(request, text="", status=413, errors=[Problem(
                "yaml", f"the job document is {size} bytes; the limit is {limit} bytes", None)])
        document = submission._safe_load(text) or {}
        name = document.get("name")
        if not (isinstance(name, str) and name and set(name) <= _EXPORT_NAME_CHARS and len(name) <= 255):
            name = "job"
        response = HttpResponse(text.encode("utf-8", "replace"), content_type="text/yaml; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{name}.yaml"'
        return response


class SubmitCheckView(LoginRequiredMixin, View):
    """POST `yaml`: {"ok", "errors": [{path, message, line}], "warnings": [...]} with the
    status the submission would get. The page calls it as the user types."""

    def post(self, request):
        wait = throttling.request_wait(request)
        if wait is not None:
            return throttling.too_many(JsonResponse({"ok": False, "errors": [{
                "path": "", "message": f"Too many requests: try again in {wait} second(s).", "line": None,
            }], "warnings": []}), wait)
        text = request.POST.get("yaml", "")
        errors, warnings, status = check(request.user, text)
        return JsonResponse({
            "ok": not errors,
            "errors": [p.as_json() for p in errors],
            "warnings": [p.as_json() for p in warnings],
        }, status=status)


class CloneView(LoginRequiredMixin, View):
    """The submit page filled with a job's YAML under a new name: any job the user may read."""

    def get(self, request, username, name):
        if not (storable_text(username) and storable_text(name)):
            raise Http404("No such job.")
        job = (
            Job.objects.visible_to(request.user).select_related("owner")
            .filter(owner__username=username, name=name).first()
        )
        if job is None or not is_readable(job, request.user):
            raise Http404("No such job.")
        prefix = job.name[:240]
        taken = set(
            Job.objects.filter(owner=request.user, name__startswith=prefix).values_list("name", flat=True)
        )
        text, emptied = submission.clone_text(job, submission.clone_name(job, taken))
        notice = f"Cloned from {job.owner.username}~{job.name}."
        if emptied:
            notice += " Secrets are not copied: fill in " + ", ".join(emptied) + "."
        return _page(request, text=text, notice=notice)
