"""Virtual cluster pages: the VCs you can see, and one VC's cells, queue and users.

Which VCs a user sees is the API's rule (`VirtualCluster.objects.visible_to`): their
teams' VCs and those granted or shared to their groups; platform admins see all. Any
other VC answers 404, like a name that exists nowhere. The figures are the API's
(`present_virtual_clusters`: guaranteed, used and total resources) and the engine's
(`apps.virtualclusters.status`: cells by type, as the scheduler counts them).

In a VC shared with another team, the jobs and users of teams the viewer does not
belong to are counted but not named: a job's name, owner and wait reason are shown
where the job list would show the job (`Job.objects.visible_to`).
"""

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, F, Prefetch, Sum
from django.http import Http404
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from apps.accounts.roles import is_platform_admin, member_tenant_ids
from apps.jobs.choices import ExecutionType, JobState
from apps.jobs.models import Job
from apps.virtualclusters.api.serializers import present_virtual_clusters
from apps.virtualclusters.models import PinnedCell, VirtualCluster
from apps.virtualclusters.status import cluster_state, vc_cells

QUEUE_PAGE_SIZE = 50
OTHER_TEAMS = "other teams"


def _visible_vcs(user):
    return (
        VirtualCluster.objects.visible_to(user)
        .select_related("cluster", "tenant")
        .prefetch_related(
            "cells", Prefetch("pinned_cells", queryset=PinnedCell.objects.select_related("physical_cell"))
        )
        .order_by("name")
    )


def _percent(part, whole):
    return min(100, round(100 * part / whole)) if whole else 0


@login_required
@require_GET
def vc_list(request):
    vcs = list(_visible_vcs(request.user))
    figures = present_virtual_clusters(vcs)
    rows = []
    for vc in vcs:
        fig = figures[vc.name]
        guaranteed, used = fig["resourcesGuaranteed"]["gpu"], fig["resourcesUsed"]["gpu"]
        rows.append({
            "vc": vc, "figures": fig, "gpu_guaranteed": guaranteed, "gpu_used": used,
            "used_percent": _percent(used, max(guaranteed, 1)) if guaranteed else (100 if used else 0),
        })
    return render(request, "portal/vc_list.html", {"rows": rows})


def _queue(vc):
    """The VC's queue in the engine's order: the position it last gave, then submission."""
    return (
        Job.objects.filter(
            virtual_cluster=vc, state=JobState.WAITING, placement__isnull=True, execution_type=ExecutionType.START
        )
        .select_related("owner")
        .only("pk", "name", "owner__username", "tenant_id", "submitted_at", "wait_reason", "queue_position",
              "total_gpu", "priority_class")
        .order_by(F("queue_position").asc(nulls_last=True), "submitted_at", "pk")
    )


def _usage_by_user(vc, user):
    """([{user, jobs, gpu, cpu, memory}], what the VC's jobs hold): per user, what their jobs
    hold now; users of teams the viewer is not in are one `other teams` row. The VC's total
    is the API's `resourcesUsed`, summed from the same rows (`Job.objects.holding_cells`), so
    the page reads those jobs once."""
    admin = is_platform_admin(user)
    mine = member_tenant_ids(user)
    rows = {}
    total = {"cpu": 0, "memory": 0, "gpu": 0}

    def row_for(username, tenant_id, owner_id):
        shown = admin or tenant_id in mine or owner_id == user.pk
        key = username if shown else OTHER_TEAMS
        return rows.setdefault(key, {"user": key, "named": shown, "jobs": 0, "gpu": 0, "cpu": 0, "memory": 0})

    holding = (
        Job.objects.holding_cells().filter(virtual_cluster=vc)
        .values("owner_id", "owner__username", "tenant_id")
        .annotate(jobs=Count("pk"), gpu=Sum("cell_gpu"), cpu=Sum("cell_cpu"), memory=Sum("cell_memory_mb"))
        .order_by()
    )
    for r in holding:
        row = row_for(r["owner__username"], r["tenant_id"], r["owner_id"])
        row["jobs"] += r["jobs"]
        for key in ("gpu", "cpu", "memory"):
            row[key] += r[key] or 0
            total[key] += r[key] or 0
    for row in rows.values():
        row["cpu"] = int(row["cpu"]) if float(row["cpu"]).is_integer() else round(row["cpu"], 1)
    total = {"cpu": int(total["cpu"]) if float(total["cpu"]).is_integer() else total["cpu"],
             "memory": int(total["memory"]), "gpu": int(total["gpu"])}
    ordered = sorted(rows.values(), key=lambda r: (not r["named"], -r["gpu"], -r["jobs"], r["user"]))
    return ordered, total


def _job_url(job):
    return reverse("portal:job-detail", kwargs={"username": job.owner.username, "name": job.name})


@login_required
@require_GET
def vc_detail(request, name):
    vcs = list(_visible_vcs(request.user).filter(name=name))
    if not vcs:
        raise Http404("No such virtual cluster.")
    vc = vcs[0]
    queue = _queue(vc)
    usage, used = _usage_by_user(vc, request.user)
    figures = present_virtual_clusters(vcs, used={vc.pk: used})[vc.name]
    state = cluster_state(vc.cluster)
    cells = used_leaves = opportunistic = None
    if state.engine is not None:
        cells, used_leaves, opportunistic = vc_cells(state, vc)
    # The count reads the queue's partial index only; the page sorts the VC's queue by the
    # engine's positions and reads 50 of it.
    page = Paginator(queue, QUEUE_PAGE_SIZE).get_page(request.GET.get("page"))
    entries = list(page.object_list)
    visible = set(Job.objects.visible_to(request.user).filter(pk__in=[j.pk for j in entries]).values_list("pk", flat=True))
    entries_shown = [
        {"job": job, "shown": job.pk in visible, "gpu": job.total_gpu,
         "url": _job_url(job) if job.pk in visible else None}
        for job in entries
    ]
    return render(request, "portal/vc_detail.html", {
        "vc": vc, "figures": figures, "cells": cells, "cells_error": state.error,
        "used_leaves": sorted((used_leaves or {}).items()), "opportunistic": sorted((opportunistic or {}).items()),
        "queue": entries_shown, "page": page, "usage": usage,
    })
