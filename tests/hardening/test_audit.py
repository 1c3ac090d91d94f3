"""The audit log covers sign-ins, tokens, permission grants and admin actions; its admin page
is read-only and scoped."""

import pytest
from django.http import HttpResponse
from django.test import Client
from django_q.models import Schedule
from guardian.shortcuts import assign_perm, remove_perm

from apps.accounts import services as account_services
from apps.audit.models import AuditEntry
from apps.virtualclusters import services as vc_services
from pai.security import CurrentRequestMiddleware
from tests.factories import PASSWORD

from .conftest import login

pytestmark = pytest.mark.django_db


def actions():
    return list(AuditEntry.objects.order_by("id").values_list("action", "actor_name"))


def test_sign_in_failure_success_and_sign_out_are_audited(world):
    browser = Client(REMOTE_ADDR="10.9.0.1")
    browser.post("/accounts/login/", {"username": "a_member", "password": "not-the-Passw0rd"})
    browser.post("/accounts/login/", {"username": "a_member", "password": PASSWORD})
    browser.post("/accounts/logout/")

    assert actions() == [("auth.login_failed", "system"), ("auth.login", "a_member"), ("auth.logout", "a_member")]
    failed = AuditEntry.objects.get(action="auth.login_failed")
    assert failed.changes == {"username": "a_member", "address": "10.9.0.1"}
    assert "not-the-Passw0rd" not in str(list(AuditEntry.objects.values_list("changes", flat=True)))


def test_token_creation_and_revocation_are_audited(world, api):
    token = login(api(), "a_member", PASSWORD).json()["token"]
    assert login(api(), "a_member", "wrong").status_code == 400
    client = api()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    application = client.post("/api/v2/tokens/application").json()["token"]
    assert client.delete(f"/api/v2/tokens/{application}").status_code == 200
    assert client.delete("/api/v2/authn/basic/logout").status_code == 200

    assert [a for a, _ in actions()] == [
        "token.login", "auth.login_failed", "token.application", "token.revoke", "token.revoke",
    ]
    text = str(list(AuditEntry.objects.values_list("changes", "object_repr", "object_id")))
    assert token not in text and application not in text


def test_object_permission_grants_and_revocations_are_audited_with_their_actor(world):
    assign_perm("tenants.view_tenant", world.b_member, world.tenant_a)
    remove_perm("tenants.view_tenant", world.b_member, world.tenant_a)

    grant, revoke = AuditEntry.objects.order_by("id")
    assert (grant.action, revoke.action) == ("permission.grant", "permission.revoke")
    assert grant.object_type == "tenants.tenant" and grant.object_id == str(world.tenant_a.pk)
    assert grant.changes == {"permission": "view_tenant", "holder_type": "user", "holder": "b_member"}
    assert grant.actor_name == "system"  # no request: a management command or a shell


def test_a_grant_made_while_serving_a_request_names_the_requester(world, rf):
    # Whatever view assigns the permission (a sharing route, guardian's admin pages), the
    # middleware knows whose request it is.
    def view(request):
        assign_perm("tenants.view_tenant", world.b_member, world.tenant_a)
        return HttpResponse("granted")

    request = rf.post("/anything/")
    request.user = world.a_admin
    assert CurrentRequestMiddleware(view)(request).content == b"granted"

    grant = AuditEntry.objects.get(action="permission.grant")
    assert grant.actor_name == "a_admin"
    assert grant.tenant == world.tenant_a


def test_virtual_cluster_and_storage_grants_are_audited_by_their_services(world):
    vc_services.grant_virtual_cluster(world.root, world.vc_b, world.group_a)
    group = account_services.create_group(world.a_admin, name="team_a_readers", tenant=world.tenant_a,
                                          storages=[world.storage_a])

    grant = AuditEntry.objects.get(action="virtualcluster.grant")
    assert (grant.actor_name, grant.changes) == ("root", {"group": "team_a"})
    created = AuditEntry.objects.get(action="group.create", object_id=str(group.pk))
    assert created.actor_name == "a_admin"
    assert "team-a-data" in str(created.changes)


def test_admin_changes_are_audited_whichever_admin_makes_them(world):
    browser = Client()
    browser.force_login(world.root)
    node = world.cluster.nodes.get(name="cpu-node-2")
    schedule = Schedule.objects.create(name="nightly", func="math.floor", args="1.5", schedule_type=Schedule.ONCE)

    assert browser.post(f"/admin/clusters/node/{node.pk}/delete/", {"post": "yes"}).status_code == 302
    assert browser.post(f"/admin/django_q/schedule/{schedule.pk}/delete/", {"post": "yes"}).status_code == 302

    rows = AuditEntry.objects.filter(action__startswith="admin.").order_by("id")
    assert [(row.action, row.actor_name, row.object_id) for row in rows] == [
        ("admin.delete.node", "root", str(node.pk)),  # by AuditedAdminMixin, once
        ("admin.delete.schedule", "root", str(schedule.pk)),  # by the admin log entry
    ]


def test_the_audit_admin_is_read_only_and_scoped_to_the_readers_tenants(world):
    vc_services.grant_virtual_cluster(world.root, world.vc_a, world.group_b)
    vc_services.grant_virtual_cluster(world.b_admin, world.vc_b, world.group_a)
    entry_a = AuditEntry.objects.get(tenant=world.tenant_a)
    browser = Client()
    browser.force_login(world.a_admin)

    page = browser.get("/admin/audit/auditentry/")
    assert page.status_code == 200
    listed = list(page.context["cl"].queryset)
    assert listed == [entry_a]
    filters = {spec.title: spec for spec in page.context["cl"].filter_specs}
    assert {"actor", "created at"} <= set(filters)
    # The actor filter offers the names of the entries this reader sees, no one else's.
    assert [name for name, _ in filters["actor"].lookup_choices] == ["root"]
    assert browser.get("/admin/audit/auditentry/?actor_name=root").context["cl"].result_count == 1
    assert browser.get("/admin/audit/auditentry/?created_at__gte=2000-01-01+00:00:00%2B00:00").context["cl"].result_count == 1

    entry_b = AuditEntry.objects.get(tenant=world.tenant_b)
    assert browser.get(f"/admin/audit/auditentry/{entry_b.pk}/change/").status_code == 302  # not found → index
    assert browser.post(f"/admin/audit/auditentry/{entry_a.pk}/change/", {"action": "x"}).status_code == 403
    assert browser.post(f"/admin/audit/auditentry/{entry_a.pk}/delete/", {"post": "yes"}).status_code == 403
    assert browser.get("/admin/audit/auditentry/add/").status_code == 403
    assert AuditEntry.objects.filter(pk=entry_a.pk, action="virtualcluster.grant").exists()
