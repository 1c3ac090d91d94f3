"""Usage reports: GPU-hours and CPU-hours grouped by tenant, VC, user, SKU and month.

The ledger's rows are grouped in the database; attempts still running are added as far as
they have run (`include_running`), so this month's figures include today's jobs.
"""

import csv
import io
from dataclasses import dataclass
from datetime import date

from django.db.models import Sum
from django.utils import timezone

from apps.accounts.roles import admin_tenant_ids, is_platform_admin
from apps.tenants.models import Tenant

from .ledger import running_pieces
from .models import UsageRecord

DIMENSIONS = {
    "tenant": "tenant__slug",
    "vc": "vc_name",
    "user": "username",
    "sku": "sku",
    "month": "month",
}
DEFAULT_GROUP_BY = ("tenant", "vc", "month")


class ReportError(ValueError):
    """A bad report request; `field` names the parameter."""

    def __init__(self, field, message):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class ReportRequest:
    group_by: tuple = DEFAULT_GROUP_BY
    month_from: date | None = None
    month_to: date | None = None
    tenant: str | None = None
    vc: str | None = None
    user: str | None = None
    include_running: bool = True


def parse_month(field, text):
    try:
        year, month = (int(part) for part in text.split("-"))
        return date(year, month, 1)
    except (ValueError, TypeError):
        raise ReportError(field, f"'{text[:40]}' is not a month (YYYY-MM)") from None


def parse_request(params):
    """A ReportRequest from query parameters (`group_by=vc,month`, `from=2026-01`,
    `to=2026-12`, `tenant`, `vc`, `user`, `running=false`)."""
    group_by = tuple(part.strip() for part in (params.get("group_by") or ",".join(DEFAULT_GROUP_BY)).split(","))
    unknown = [part for part in group_by if part not in DIMENSIONS]
    if unknown or not group_by or len(set(group_by)) != len(group_by):
        raise ReportError("group_by", f"a comma-separated list of {', '.join(DIMENSIONS)}, each once")
    month_from = parse_month("from", params["from"]) if params.get("from") else None
    month_to = parse_month("to", params["to"]) if params.get("to") else None
    if month_from and month_to and month_from > month_to:
        raise ReportError("to", "comes before from")
    running = (params.get("running") or "true").lower()
    if running not in ("true", "false"):
        raise ReportError("running", "true or false")
    return ReportRequest(
        group_by=group_by, month_from=month_from, month_to=month_to, tenant=params.get("tenant") or None,
        vc=params.get("vc") or None, user=params.get("user") or None, include_running=running == "true",
    )


def scoped_records(user):
    return UsageRecord.objects.readable_by(user)


def usage_report(user, request, now=None):
    """Rows {dimension: value, ..., gpu_hours, cpu_hours} the user may see, sorted."""
    now = now or timezone.now()
    records = scoped_records(user)
    filters = {}
    if request.month_from:
        filters["month__gte"] = request.month_from
    if request.month_to:
        filters["month__lte"] = request.month_to
    if request.tenant:
        filters["tenant__slug"] = request.tenant
    if request.vc:
        filters["vc_name"] = request.vc
    if request.user:
        filters["username"] = request.user
    columns = [DIMENSIONS[d] for d in request.group_by]
    totals = {}
    grouped = (
        records.filter(**filters).values(*columns)
        .annotate(gpu_hours=Sum("gpu_hours"), cpu_hours=Sum("cpu_hours"))
        .order_by()
    )
    for row in grouped:
        key = tuple(row[c] for c in columns)
        totals[key] = [row["gpu_hours"] or 0.0, row["cpu_hours"] or 0.0]
    if request.include_running:
        _add_running(user, request, columns, totals, now)
    rows = []
    for key in sorted(totals, key=lambda k: tuple(str(v) for v in k)):
        gpu, cpu = totals[key]
        row = {dimension: _show(value) for dimension, value in zip(request.group_by, key)}
        row.update(gpu_hours=round(gpu, 3), cpu_hours=round(cpu, 3))
        rows.append(row)
    return rows


def _add_running(user, request, columns, totals, now):
    slugs = dict(Tenant.objects.values_list("pk", "slug"))
    visible = None if is_platform_admin(user) else set(admin_tenant_ids(user))
    for piece in running_pieces(now):
        job = piece.job
        if visible is not None and job["tenant_id"] not in visible and job["owner_id"] != user.pk:
            continue
        values = {
            "tenant__slug": slugs.get(job["tenant_id"]), "vc_name": job["virtual_cluster__name"],
            "username": job["owner__username"], "sku": piece.sku, "month": piece.month,
        }
        if (request.month_from and piece.month < request.month_from) or (
            request.month_to and piece.month > request.month_to
        ):
            continue
        if any(wanted and values[column] != wanted for column, wanted in (
            ("tenant__slug", request.tenant), ("vc_name", request.vc), ("username", request.user)
        )):
            continue
        key = tuple(values[c] for c in columns)
        entry = totals.setdefault(key, [0.0, 0.0])
        entry[0] += piece.gpus * piece.hours
        entry[1] += piece.cpus * piece.hours


def _show(value):
    return value.strftime("%Y-%m") if isinstance(value, date) else value


def report_csv(request, rows):
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([*request.group_by, "gpu_hours", "cpu_hours"])
    for row in rows:
        # Names are user-written: keep a spreadsheet from reading one as a formula.
        writer.writerow([_cell(row[d]) for d in request.group_by] + [row["gpu_hours"], row["cpu_hours"]])
    return out.getvalue()


def _cell(value):
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
