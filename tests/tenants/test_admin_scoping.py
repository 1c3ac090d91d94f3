"""The admin scoping matrix: platform admin, tenant admin of A, member of A, tenant admin of B.

Every model registered in the admin must declare who may open it below; a new
registration fails `test_every_admin_page_declares_its_rule` until it does.
"""

import pytest
from django.contrib import admin
from django.core import mail
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from apps.accounts.models import Group
from apps.audit.models import AuditEntry
from apps.tenants.models import Membership

# Models a tenant admin may open (scoped to their tenant); all others are platform-only.
TENANT_ADMIN_MODELS = {
    "tenants.tenant",
    "tenants.membership",
    "auth.user",
    "accounts.group",
    "virtualclusters.virtualcluster",
    "virtualclusters.virtualclustergrant",
    "storage.storageserver",
    "storage.storageconfig",
    "storage.storagegrant",
    "audit.auditentry",
    "jobs.job",
    "monitoring.abnormalrunningjob",  # the jobs they may stop (apps.monitoring.abnormal)
    "usage.usagerecord",
    "usage.gpuhourbudget",
}
PLATFORM_ONLY_MODELS = {
    "clusters.cluster",
    "clusters.celltype",
    "clusters.physicalcell",
    "clusters.node",
    "django_q.schedule",
    "django_q.success",
    "django_q.failure",
    "django_q.ormq",
    "oncall.alert",
    "oncall.alertroute",
    "oncall.chatwebhook",
    "oncall.followup",
    "oncall.githubrepository",
    "oncall.incident",
    "oncall.monitoringcalendar",
    "oncall.notification",
    "oncall.rotation",
    "oncall.rotationoverride",
    "oncall.slapolicy",
    "oncall.timelineentry",
}


def registered():
    return sorted(admin.site._registry.items(), key=lambda item: item[0]._meta.label_lower)


def changelist_url(model):
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")


def test_every_admin_page_declares_its_rule():
    labels = {model._meta.label_lower for model, _ in registered()}
    undeclared = labels - TENANT_ADMIN_MODELS - PLATFORM_ONLY_MODELS
    assert not undeclared, f"declare the scoping rule of {sorted(undeclared)} in this test"


@pytest.mark.parametrize("who", ["root", "a_admin", "b_admin", "a_member", "anonymous"])
def test_changelists_open_only_for_the_right_roles(world, client, who):
    if who != "anonymous":
        client.force_login(world.users()[who])
    for model, _ in registered():
        label = model._meta.label_lower
        response = client.get(changelist_url(model))
        if who == "root":
            expected = 200
        elif who in ("a_admin", "b_admin"):
            expected = 200 if label in TENANT_ADMIN_MODELS else 403
        else:
            expected = 302  # members and anonymous users are sent to the admin login
        assert response.status_code == expected, (who, label, response.status_code)


def visible(client, model):
    response = client.get(changelist_url(model))
    assert response.status_code == 200
    return {str(obj) for obj in response.context["cl"].queryset}


def test_tenant_admin_sees_only_their_tenant_rows(world, client):
    from django.contrib.auth import get_user_model

    from apps.storage.models import StorageConfig, StorageGrant
    from apps.tenants.models import Tenant
    from apps.virtualclusters.models import VirtualCluster, VirtualClusterGrant

    client.force_login(world.a_admin)
    assert visible(client, Tenant) == {"Team A"}
    assert visible(client, get_user_model()) == {"a_admin", "a_member"}
    assert visible(client, Group) == {"team_a"}
    assert visible(client, Membership) == {"a_admin in Team A (Team admin)", "a_member in Team A (Member)"}
    assert visible(client, VirtualCluster) == {"team_a"}
    assert visible(client, VirtualClusterGrant) == {"team_a → team_a"}
    assert visible(client, StorageConfig) == {"team-a-data"}
    assert visible(client, StorageGrant) == {"team-a-data → team_a"}


def test_platform_admin_sees_every_tenant(world, client):
    from apps.tenants.models import Tenant

    client.force_login(world.root)
    assert visible(client, Tenant) == {"Team A", "Team B"}
    assert {"team_a", "team_b", "default", "admingroup"} <= visible(client, Group)


def test_change_views_of_another_tenant_do_not_open(world, client):
    client.force_login(world.a_admin)
    others = [
        world.tenant_b,
        world.b_member,
        world.group_b,
        world.vc_b,
        world.storage_b,
        Membership.objects.get(user=world.b_member),
        world.vc_b.grants.get(),
    ]
    for obj in others:
        url = reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])
        response = client.get(url)
        assert response.status_code == 302, (obj, response.status_code)
        assert response.url == reverse("admin:index")
        # A POST is refused too (403 where the role may not change that model at all).
        assert client.post(url, {}).status_code in (302, 403)
    # ...while their own open.
    for obj in (world.tenant_a, world.a_member, world.group_a, world.vc_a, world.storage_a):
        url = reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])
        assert client.get(url).status_code == 200, obj


def test_member_cannot_log_in_to_the_admin(world, client):
    from tests.factories import PASSWORD

    response = client.post(reverse("admin:login"), {"username": "a_member", "password": PASSWORD})
    assert response.status_code == 200
    assert "not an administrator" in response.content.decode()
    response = client.post(reverse("admin:login"), {"username": "a_admin", "password": PASSWORD})
    assert response.status_code == 302


def test_form_choices_are_scoped(world, client):
    client.force_login(world.a_admin)
    response = client.get(reverse("admin:accounts_group_add"))
    tenant_choices = {label for _, label in response.context["adminform"].form.fields["tenant"].choices}
    assert tenant_choices == {"Team A"}
    response = client.get(reverse("admin:tenants_membership_add"))
    form = response.context["adminform"].form
    assert {str(u) for u in form.fields["user"].queryset} == {"a_admin", "a_member"}
    response = client.get(reverse("admin:virtualclusters_virtualclustergrant_add"))
    form = response.context["adminform"].form
    assert {str(g) for g in form.fields["group"].queryset} == {"team_a"}
    assert {str(v) for v in form.fields["virtual_cluster"].queryset} == {"team_a"}
    response = client.get(reverse("admin:auth_user_change", args=[world.a_member.pk]))
    form = response.context["adminform"].form
    assert {str(g) for g in form.fields["groups"].queryset} == {"team_a"}
    assert "is_superuser" not in form.fields


def test_tenant_admin_cannot_forge_a_choice_from_another_tenant(world, client):
    client.force_login(world.a_admin)
    response = client.post(
        reverse("admin:accounts_group_add"), {"name": "sneaky", "tenant": world.tenant_b.pk, "description": ""}
    )
    assert response.status_code == 200  # the form comes back with an error
    assert "tenant" in response.context["adminform"].form.errors
    assert not Group.objects.filter(name="sneaky").exists()


def test_editing_a_users_groups_keeps_groups_outside_the_admins_scope(world, client):
    # a_member also belongs to team_b's group (say, a shared project): a_admin cannot see or drop it.
    world.a_member.groups.add(world.group_b)
    client.force_login(world.a_admin)
    url = reverse("admin:auth_user_change", args=[world.a_member.pk])
    response = client.post(
        url,
        {
            "first_name": "Ada",
            "last_name": "",
            "email": "a_member@example.com",
            "is_active": "on",
            "groups": [],
            "memberships-TOTAL_FORMS": "1",
            "memberships-INITIAL_FORMS": "1",
            "memberships-MIN_NUM_FORMS": "0",
            "memberships-MAX_NUM_FORMS": "1000",
            "memberships-0-id": Membership.objects.get(user=world.a_member).pk,
            "memberships-0-user": world.a_member.pk,
            "memberships-0-tenant": world.tenant_a.pk,
            "memberships-0-role": "member",
        },
    )
    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else response
    names = set(world.a_member.groups.values_list("name", flat=True))
    assert names == {"default", "team_b"}
    world.a_member.refresh_from_db()
    assert world.a_member.first_name == "Ada"
    assert AuditEntry.objects.filter(action="admin.change.user", actor=world.a_admin).exists()


def test_bulk_delete_action_ignores_rows_out_of_scope(world, client):
    client.force_login(world.a_admin)
    response = client.post(
        changelist_url(Group),
        {"action": "delete_selected", "_selected_action": [world.group_b.pk], "post": "yes"},
    )
    assert response.status_code in (200, 302)
    assert Group.objects.filter(pk=world.group_b.pk).exists()


def test_bulk_delete_action_works_in_scope_and_is_audited(world, client):
    extra = Group.objects.create(name="team_a_tmp", tenant=world.tenant_a)
    client.force_login(world.a_admin)
    response = client.post(
        changelist_url(Group), {"action": "delete_selected", "_selected_action": [extra.pk], "post": "yes"}
    )
    assert response.status_code == 302
    assert not Group.objects.filter(pk=extra.pk).exists()
    assert AuditEntry.objects.filter(action="admin.delete.group", object_id=str(extra.pk)).exists()


def test_onboarding_pages_are_scoped(world, client):
    client.force_login(world.a_admin)
    assert client.get(reverse("admin:tenants_tenant_onboard", args=[world.tenant_a.pk])).status_code == 200
    assert client.get(reverse("admin:tenants_tenant_onboard", args=[world.tenant_b.pk])).status_code == 404
    assert client.get(reverse("admin:tenants_tenant_bulk_onboard", args=[world.tenant_b.pk])).status_code == 404
    client.force_login(world.a_member)
    assert client.get(reverse("admin:tenants_tenant_onboard", args=[world.tenant_a.pk])).status_code == 302


def test_onboard_one_user_through_the_admin(world, client, django_capture_on_commit_callbacks):
    client.force_login(world.a_admin)
    url = reverse("admin:tenants_tenant_onboard", args=[world.tenant_a.pk])
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            url, {"username": "eve", "email": "eve@example.com", "role": "member", "groups": [world.group_a.pk]}
        )
    assert response.status_code == 302
    assert Membership.objects.filter(user__username="eve", tenant=world.tenant_a).exists()
    assert mail.outbox[0].to == ["eve@example.com"]
    # A duplicate comes back with the error on the username field.
    response = client.post(
        url, {"username": "eve", "email": "eve2@example.com", "role": "member", "groups": [world.group_a.pk]}
    )
    assert response.status_code == 200
    assert "is taken" in str(response.context["form"].errors["username"])


def test_onboard_action_from_the_changelist_redirects_to_the_form(world, client):
    from apps.tenants.models import Tenant

    client.force_login(world.a_admin)
    response = client.post(
        changelist_url(Tenant), {"action": "bulk_onboard_action", "_selected_action": [world.tenant_a.pk]}
    )
    assert response.status_code == 302
    assert response.url == reverse("admin:tenants_tenant_bulk_onboard", args=[world.tenant_a.pk])


def test_bulk_onboard_through_the_admin_reports_lines(world, client, django_capture_on_commit_callbacks):
    client.force_login(world.a_admin)
    url = reverse("admin:tenants_tenant_bulk_onboard", args=[world.tenant_a.pk])
    bad = SimpleUploadedFile("people.csv", b"fay,fay@example.com,team_a\nb_member,x@example.com,\n")
    response = client.post(url, {"csv_file": bad})
    assert response.status_code == 200
    assert response.context["problems"] == ["line 2: username: 'b_member' is taken"]
    assert not Membership.objects.filter(user__username="fay").exists()
    good = SimpleUploadedFile("people.csv", b"fay,fay@example.com,team_a\ngus,gus@example.com,\n")
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, {"csv_file": good})
    assert response.status_code == 302
    assert set(Membership.objects.filter(tenant=world.tenant_a).values_list("user__username", flat=True)) >= {"fay", "gus"}
    assert len(mail.outbox) == 2
    # gus is in no group that grants a VC: the team page names him after the upload.
    page = client.get(response["Location"]).content.decode()
    assert "1 of them are in no group that grants a virtual cluster and cannot submit jobs anywhere: gus." in page
