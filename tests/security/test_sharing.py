"""Per-object sharing: what a share allows, who may grant it, and the admin pages for it."""

import copy

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse

from apps.accounts import sharing
from apps.audit.models import AuditEntry
from apps.jobs import services as job_services
from apps.jobs.models import Job
from apps.storage.models import StorageConfig
from apps.virtualclusters.models import VirtualCluster
from tests.jobs.conftest import job_document
from tests.jobs.factories import submitted_job


def test_a_shared_vc_is_visible_and_usable_by_the_groups_members(world, clients):
    client = clients["b_member"]
    assert client.get("/api/v2/virtual-clusters/team_a").status_code == 404
    with pytest.raises(Exception, match="not found"):
        job_services.submit_job(world.b_member, job_document(name="j1", defaults={"virtualCluster": "team_a"}))

    sharing.share_with_group(world.a_admin, world.vc_a, world.group_b)
    assert client.get("/api/v2/virtual-clusters/team_a").status_code == 200
    assert "team_a" in client.get("/api/v2/virtual-clusters").json()
    job, _ = job_services.submit_job(world.b_member, job_document(name="j2", defaults={"virtualCluster": "team_a"}))
    assert job.virtual_cluster == world.vc_a
    # Members of other groups gain nothing.
    assert not VirtualCluster.objects.usable_by(world.a_member).filter(name="team_b").exists()

    sharing.unshare_with_group(world.a_admin, world.vc_a, world.group_b)
    assert client.get("/api/v2/virtual-clusters/team_a").status_code == 404
    # One row per change, the service's: not also guardian's generic permission rows.
    actions = AuditEntry.objects.filter(object_type="virtualclusters.virtualcluster", object_id=str(world.vc_a.pk))
    assert list(actions.order_by("pk").values_list("action", "actor__username", "changes")) == [
        ("share.grant.virtualcluster", "a_admin", {"group": "team_b"}),
        ("share.revoke.virtualcluster", "a_admin", {"group": "team_b"}),
    ]


def test_a_shared_storage_is_visible_and_mountable(world, clients):
    client = clients["b_member"]
    document = job_document("storage_plugins.yaml", name="mounts_a", defaults={"virtualCluster": "team_b"})
    with pytest.raises(Exception, match="team-a-data"):
        job_services.submit_job(world.b_member, copy.deepcopy(document))
    assert client.get("/api/v2/storages/team-a-data").status_code == 404

    sharing.share_with_group(world.a_admin, world.storage_a, world.group_b)
    assert client.get("/api/v2/storages/team-a-data").status_code == 200
    assert "team-a-data" in client.get("/api/v2/storages").content.decode()
    job, _ = job_services.submit_job(world.b_member, copy.deepcopy(document))
    assert job.name == "mounts_a"
    assert StorageConfig.objects.visible_to(world.b_member).filter(name="team-a-data").exists()
    entry = AuditEntry.objects.get(action="share.grant.storageconfig")
    assert entry.actor == world.a_admin and entry.changes == {"group": "team_b"}


def test_a_shared_job_is_readable_not_manageable(shared_world, clients):
    w, client = shared_world, clients["b_member"]
    for suffix in ("", "/config", "/events", "/job-attempts"):
        assert client.get(f"/api/v2/jobs/a_member~shared_job{suffix}").status_code == 200, suffix
        # The job not shared stays invisible, as any other team's job.
        assert client.get(f"/api/v2/jobs/a_member~private_job{suffix}").status_code == 404, suffix
    names = {row["name"] for row in client.get("/api/v2/jobs").json()}
    assert "shared_job" in names and "private_job" not in names
    stop = client.put("/api/v2/jobs/a_member~shared_job/executionType", {"value": "STOP"}, format="json")
    assert stop.status_code == 403 and stop.json()["code"] == "ForbiddenUserError"
    assert client.put("/api/v2/jobs/a_member~shared_job/tag", {"value": "x"}, format="json").status_code == 403
    assert client.delete("/api/v2/jobs/a_member~shared_job/tag", {"value": "x"}, format="json").status_code == 403
    w.shared_job.refresh_from_db()
    assert w.shared_job.execution_type != "STOP"
    assert not Job.objects.manageable_by(w.b_member).filter(pk=w.shared_job.pk).exists()
    # The owner still manages it.
    assert clients["a_member"].put("/api/v2/jobs/a_member~shared_job/tag", {"value": "x"},
                                   format="json").status_code == 200

    sharing.unshare_with_user(w.a_member, w.shared_job, w.b_member)
    assert client.get("/api/v2/jobs/a_member~shared_job").status_code == 404


def test_only_the_objects_managers_may_share(world):
    for actor in (world.a_member, world.b_admin, world.b_member):
        with pytest.raises(PermissionDenied):
            sharing.share_with_group(actor, world.vc_a, world.group_b)
    sharing.share_with_group(world.root, world.storage_a, world.group_b)
    job = submitted_job(world.a_member, name="mine", vc="team_a")
    with pytest.raises(PermissionDenied):
        sharing.share_with_user(world.b_member, job, world.b_member)
    sharing.share_with_user(world.a_admin, job, world.b_member)
    assert Job.objects.readable_by(world.b_member).filter(pk=job.pk).exists()


def test_shares_that_grants_cover_are_refused(world):
    from apps.accounts.models import Group

    with pytest.raises(ValidationError, match="another team"):
        sharing.share_with_group(world.a_admin, world.vc_a, world.group_a)
    with pytest.raises(ValidationError, match="another team"):
        sharing.share_with_group(world.a_admin, world.vc_a, Group.objects.get(name="default"))
    with pytest.raises(ValidationError, match="cannot be shared"):
        sharing.share_with_user(world.a_admin, world.vc_a, world.b_member)
    assert not world.vc_a.group_shares.exists()


def test_job_shares_replace_as_a_set(shared_world):
    w = shared_world
    assert sharing.set_user_shares(w.a_member, w.shared_job, [w.a_admin]) == ["a_admin"]
    assert list(w.shared_job.user_shares.values_list("user__username", flat=True)) == ["a_admin"]
    assert not Job.objects.readable_by(w.b_member).filter(pk=w.shared_job.pk).exists()


# --- the admin's object-permission pages -------------------------------------------------

def _permissions_url(obj, *rest):
    kind = "".join(f"_manage_{r}" for r in rest[:1])
    return reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_permissions{kind}",
                   args=[obj.pk, *rest[1:]])


def test_permission_pages_open_only_for_who_may_share(shared_world, client):
    w = shared_world
    for obj in (w.vc_a, w.storage_a, w.shared_job):
        url = _permissions_url(obj)
        client.force_login(w.a_admin)
        page = client.get(url)
        assert page.status_code == 200, obj
        assert "team_b" in page.content.decode() or "b_member" in page.content.decode()
        client.force_login(w.b_admin)
        assert client.get(url).status_code == 404, obj
        client.force_login(w.root)
        assert client.get(url).status_code == 200, obj
    # b_admin reads the shared job's page (staff and a share holder) but cannot manage its shares.
    client.force_login(w.b_admin)
    w.shared_job.user_shares.create(user=w.b_admin, permission=w.shared_job.user_shares.first().permission)
    page = client.get(reverse("admin:jobs_job_change", args=[w.shared_job.pk]))
    assert page.status_code == 200 and _permissions_url(w.shared_job) not in page.content.decode()
    assert client.get(_permissions_url(w.shared_job)).status_code == 404
    client.force_login(w.a_admin)
    page = client.get(reverse("admin:jobs_job_change", args=[w.shared_job.pk]))
    assert _permissions_url(w.shared_job) in page.content.decode()
    client.force_login(w.a_member)
    assert client.get(_permissions_url(w.vc_a)).status_code == 302  # to the admin login


def test_share_a_vc_through_the_admin(world, client):
    client.force_login(world.a_admin)
    response = client.post(_permissions_url(world.vc_a), {"group": "team_b", "submit_manage_group": "1"})
    manage = _permissions_url(world.vc_a, "group", world.group_b.pk)
    assert response.status_code == 302 and response.url == manage
    page = client.get(manage)
    assert [c[0] for c in page.context["form"].fields["permissions"].choices] == ["view_virtualcluster"]
    assert client.post(manage, {"permissions": ["view_virtualcluster"]}).status_code == 302
    assert VirtualCluster.objects.usable_by(world.b_member).filter(pk=world.vc_a.pk).exists()
    assert AuditEntry.objects.filter(action="share.grant.virtualcluster", actor=world.a_admin).exists()
    # Another permission cannot be slipped in.
    response = client.post(manage, {"permissions": ["change_virtualcluster"]})
    assert response.status_code == 200 and response.context["form"].errors
    # Unticking revokes.
    assert client.post(manage, {}).status_code == 302
    assert not VirtualCluster.objects.usable_by(world.b_member).filter(pk=world.vc_a.pk).exists()
    # A VC is shared with groups, not users; the team's own group is refused with a message.
    response = client.post(_permissions_url(world.vc_a), {"user": "b_member", "submit_manage_user": "1"})
    assert response.status_code == 200 and "groups only" in response.content.decode()
    own = _permissions_url(world.vc_a, "group", world.group_a.pk)
    response = client.post(own, {"permissions": ["view_virtualcluster"]})
    assert response.status_code == 200 and "another team" in response.content.decode()
    assert not world.vc_a.group_shares.exists()


def test_share_a_job_through_the_admin(shared_world, client):
    w = shared_world
    client.force_login(w.a_admin)
    response = client.post(_permissions_url(w.private_job), {"user": "b_admin", "submit_manage_user": "1"})
    manage = _permissions_url(w.private_job, "user", w.b_admin.pk)
    assert response.status_code == 302 and response.url == manage
    assert client.post(manage, {"permissions": ["view_job"]}).status_code == 302
    assert Job.objects.readable_by(w.b_admin).filter(pk=w.private_job.pk).exists()
    # Holding a share, b_admin cannot stop it through the admin action either.
    client.force_login(w.b_admin)
    client.post(reverse("admin:jobs_job_changelist"),
                {"action": "stop_jobs", "_selected_action": [w.private_job.pk]})
    w.private_job.refresh_from_db()
    assert w.private_job.execution_type != "STOP"


# --- the pai-native shares route ----------------------------------------------------------

def test_owner_shares_a_job_through_the_api(shared_world, clients):
    w, owner = shared_world, clients["a_member"]
    url = "/api/v2/jobs/a_member~private_job/shares"
    assert owner.get(url).json() == {"users": []}
    assert clients["b_member"].get(f"{url}").status_code == 404
    response = owner.put(url, {"users": ["b_member", "a_admin"]}, format="json")
    assert response.status_code == 200 and response.json() == {"users": ["a_admin", "b_member"]}
    assert clients["b_member"].get("/api/v2/jobs/a_member~private_job/config").status_code == 200
    # A holder of a share reads the job but cannot change who else may.
    denied = clients["b_member"].put(url, {"users": ["b_member", "b_admin"]}, format="json")
    assert denied.status_code == 403
    assert owner.put(url, {"users": []}, format="json").json() == {"users": []}
    assert clients["b_member"].get("/api/v2/jobs/a_member~private_job/config").status_code == 404
    # Usernames are unique whatever their case: a name typed in capitals finds its user.
    assert owner.put(url, {"users": ["B_Member"]}, format="json").json() == {"users": ["b_member"]}
    assert owner.put(url, {"users": []}, format="json").json() == {"users": []}
    assert list(AuditEntry.objects.filter(action__startswith="share.", object_id=str(w.private_job.pk))
                .order_by("pk").values_list("action", "changes")) == [
        ("share.grant.job", {"user": "a_admin"}), ("share.grant.job", {"user": "b_member"}),
        ("share.revoke.job", {"user": "a_admin"}), ("share.revoke.job", {"user": "b_member"}),
        ("share.grant.job", {"user": "b_member"}), ("share.revoke.job", {"user": "b_member"}),
    ]


@pytest.mark.parametrize("body, field", [
    ({"users": ["nobody"]}, "users: no active user named nobody"),
    ({"users": "b_member"}, "users:"),
    ({}, "users:"),
])
def test_bad_share_lists_are_refused_naming_the_field(shared_world, clients, body, field):
    response = clients["a_member"].put("/api/v2/jobs/a_member~private_job/shares", body, format="json")
    assert response.status_code == 400 and response.json()["message"].startswith(field)
    assert not shared_world.private_job.user_shares.exists()


def test_the_share_pages_name_no_account_or_group_by_its_number(shared_world, client):
    """A team admin walking the manage pages' ids (user 1, 2, 3…) learns no other team's user or
    group name: only accounts and groups they see, that hold a share, or that they named open."""
    from apps.accounts.models import Group

    w = shared_world
    hidden_group = Group.objects.create(name="team_b_private", tenant=w.tenant_b)
    client.force_login(w.a_admin)
    for obj, kind, target, name in ((w.private_job, "user", w.b_admin, "b_admin"),
                                    (w.vc_a, "group", hidden_group, "team_b_private")):
        walked = client.get(_permissions_url(obj, kind, target.pk))
        assert walked.status_code == 404, (kind, walked.content[:300])
        assert name not in walked.content.decode()
        assert client.post(_permissions_url(obj, kind, target.pk), {"permissions": [f"view_{obj._meta.model_name}"]}
                           ).status_code == 404
    assert not Job.objects.readable_by(w.b_admin).filter(pk=w.private_job.pk).exists()
    assert not w.vc_a.group_shares.filter(group=hidden_group).exists()
    # Those holding a share open (to be unticked), and those the admin sees.
    assert client.get(_permissions_url(w.shared_job, "user", w.b_member.pk)).status_code == 200
    assert client.get(_permissions_url(w.vc_a, "group", w.group_b.pk)).status_code == 200
    assert client.get(_permissions_url(w.private_job, "user", w.a_member.pk)).status_code == 200
    # Naming one on the object's page opens its page, as before.
    for obj, kind, name in ((w.private_job, "user", "b_admin"), (w.vc_a, "group", "team_b_private")):
        named = client.post(_permissions_url(obj), {kind: name, f"submit_manage_{kind}": "1"})
        assert named.status_code == 302 and client.get(named.url).status_code == 200
