"""Usage reports through the API and the admin: grouped, scoped to who asks, exported as CSV."""

import csv
import io
from datetime import UTC, date, datetime

import pytest
from rest_framework.test import APIClient

from apps.audit.models import AuditEntry
from apps.usage.models import GpuHourBudget, UsageRecord
from apps.usage.reports import ReportRequest, report_csv


def ledger_row(world, tenant_key, user, job_id, month, sku, gpu_hours, cpu_hours, job_name="job"):
    tenant, vc = getattr(world, f"tenant_{tenant_key}"), getattr(world, f"vc_{tenant_key}")
    start = datetime(month.year, month.month, 2, tzinfo=UTC)
    return UsageRecord.objects.create(
        tenant=tenant, virtual_cluster=vc, vc_name=vc.name, user=user, username=user.username, cluster_name="local",
        job_id=job_id, job_name=job_name, attempt_index=0, priority_class="test", sku=sku, gpus=1, cpus=8,
        month=month, started_at=start, ended_at=start, gpu_hours=gpu_hours, cpu_hours=cpu_hours,
    )


@pytest.fixture
def ledger(world):
    ledger_row(world, "a", world.a_member, 1, date(2026, 1, 1), "A100", 10, 80)
    ledger_row(world, "a", world.a_member, 2, date(2026, 2, 1), "A100", 5, 40)
    ledger_row(world, "a", world.a_admin, 3, date(2026, 2, 1), "A100", 2, 16)
    ledger_row(world, "b", world.b_member, 4, date(2026, 2, 1), "A100", 7, 56, job_name="=HYPERLINK(1)")
    return world


def report(user, **params):
    client = APIClient()
    client.force_authenticate(user)
    return client.get("/api/v2/usage", params)


def test_reports_group_by_what_is_asked_and_each_sees_only_their_scope(ledger):
    w = ledger
    everything = report(w.root, group_by="tenant,month").json()
    assert everything == [
        {"tenant": "team-a", "month": "2026-01", "gpu_hours": 10.0, "cpu_hours": 80.0},
        {"tenant": "team-a", "month": "2026-02", "gpu_hours": 7.0, "cpu_hours": 56.0},
        {"tenant": "team-b", "month": "2026-02", "gpu_hours": 7.0, "cpu_hours": 56.0},
    ]
    assert report(w.a_admin, group_by="user").json() == [
        {"user": "a_admin", "gpu_hours": 2.0, "cpu_hours": 16.0},
        {"user": "a_member", "gpu_hours": 15.0, "cpu_hours": 120.0},
    ]
    assert report(w.a_member, group_by="user,vc").json() == [
        {"user": "a_member", "vc": "team_a", "gpu_hours": 15.0, "cpu_hours": 120.0},
    ]
    assert report(w.b_admin, group_by="vc", **{"from": "2026-02", "to": "2026-02"}).json() == [
        {"vc": "team_b", "gpu_hours": 7.0, "cpu_hours": 56.0},
    ]
    # Another tenant's name as a filter finds nothing, as a name that does not exist.
    assert report(w.b_admin, tenant="team-a").json() == []


@pytest.mark.parametrize("params, field", [
    ({"group_by": "vc,planet"}, "group_by"),
    ({"group_by": "vc,vc"}, "group_by"),
    ({"from": "2026-13"}, "from"),
    ({"from": "2026-03", "to": "2026-01"}, "to"),
    ({"running": "maybe"}, "running"),
])
def test_a_bad_report_request_gets_a_400_naming_the_field(ledger, params, field):
    response = report(ledger.root, **params)
    assert response.status_code == 400
    assert response.json()["code"] == "InvalidParametersError"
    assert response.json()["message"].startswith(f"{field}: ")


def test_reports_export_as_csv_with_names_kept_as_text(ledger):
    response = report(ledger.b_admin, group_by="user,month", output="csv")
    assert response.status_code == 200 and response["Content-Type"] == "text/csv"
    assert list(csv.reader(io.StringIO(response.content.decode()))) == [
        ["user", "month", "gpu_hours", "cpu_hours"], ["b_member", "2026-02", "7.0", "56.0"],
    ]


def test_the_admin_report_groups_and_exports_for_a_team_admin(ledger, client):
    client.force_login(ledger.a_admin)
    page = client.get("/admin/usage/usagerecord/report/", {"group_by": "user,month"})
    assert page.status_code == 200
    html = page.content.decode()
    assert "a_member" in html and "b_member" not in html
    assert "Download CSV" in html
    exported = client.get("/admin/usage/usagerecord/report/", {"group_by": "user,month", "output": "csv"})
    assert exported["Content-Disposition"] == 'attachment; filename="pai-usage.csv"'
    assert exported.content.decode().splitlines() == [
        "user,month,gpu_hours,cpu_hours", "a_admin,2026-02,2.0,16.0", "a_member,2026-01,10.0,80.0",
        "a_member,2026-02,5.0,40.0",
    ]
    bad = client.get("/admin/usage/usagerecord/report/", {"group_by": "galaxy"})
    assert "group_by: " in bad.content.decode()
    ledger_page = client.get("/admin/usage/usagerecord/")
    assert ledger_page.status_code == 200 and "HYPERLINK" not in ledger_page.content.decode()


def test_user_written_names_cannot_become_spreadsheet_formulas(ledger):
    request = ReportRequest(group_by=("user",))
    text = report_csv(request, [{"user": "=HYPERLINK(1)", "gpu_hours": 1, "cpu_hours": 2}])
    assert text.splitlines()[1] == "'=HYPERLINK(1),1,2"


def test_budgets_are_set_by_platform_admins_and_seen_by_team_admins(world, client):
    client.force_login(world.root)
    response = client.post("/admin/usage/gpuhourbudget/add/", {
        "virtual_cluster": world.vc_a.pk, "gpu_hours_per_month": "1000", "note": "grant FY26",
    })
    assert response.status_code == 302, response.content.decode()[:2000]
    budget = GpuHourBudget.objects.get(virtual_cluster=world.vc_a)
    assert AuditEntry.objects.filter(action="admin.add.gpuhourbudget", tenant=world.tenant_a).exists()

    client.force_login(world.a_admin)
    listing = client.get("/admin/usage/gpuhourbudget/")
    assert listing.status_code == 200 and "team_a" in listing.content.decode()
    assert client.post(f"/admin/usage/gpuhourbudget/{budget.pk}/change/", {
        "virtual_cluster": world.vc_a.pk, "gpu_hours_per_month": "99999",
    }).status_code == 403
    client.force_login(world.b_admin)
    assert "team_a" not in client.get("/admin/usage/gpuhourbudget/").content.decode()
