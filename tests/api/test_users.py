"""OpenPAI's user routes: the user object, basic-mode VC ↔ group translation, who may change whom."""

import pytest
from rest_framework.test import APIClient

from apps.accounts.models import ApiToken
from apps.audit.models import AuditEntry
from apps.tenants.models import Membership
from tests import factories as f

from .openpai import assert_error, assert_openpai

NEW_PASSWORD = "a-much-longer-passphrase-42"


def create(client, **fields):
    data = {"username": "carol", "password": NEW_PASSWORD, "email": "carol@example.com", "virtualCluster": ["team_a"],
            **fields}
    return client.post("/api/v2/users", data, format="json")


def user_json(client, username):
    return client.get(f"/api/v2/users/{username}").json()


def test_user_object_has_openpai_shape_and_vc_storage_lists(world, clients):
    body = user_json(clients["root"], "a_member")
    assert_openpai("UserInfo", body)
    assert body == {
        "username": "a_member",
        "grouplist": ["default", "team_a"],
        "email": "a_member@example.com",
        "extension": {},
        "admin": False,
        "virtualCluster": ["team_a"],
        "storageConfig": ["team-a-data"],
    }


def test_admins_have_every_virtual_cluster(world, clients):
    body = clients["root"].get("/api/v2/users/me").json()
    assert body["admin"] is True and body["virtualCluster"] == ["team_a", "team_b"]


def test_user_list_pages_stay_bare_arrays(world, clients):
    response = clients["root"].get("/api/v2/users?limit=2&offset=1")
    assert response.status_code == 200
    assert [u["username"] for u in response.json()] == ["a_member", "b_admin"]
    assert response["X-Total-Count"] == "5"
    assert "X-Total-Count" not in clients["root"].get("/api/v2/users")
    for query in ("limit=0", "limit=1001", "offset=-1", "limit=x"):
        response = clients["root"].get(f"/api/v2/users?{query}")
        assert response.status_code == 400 and response.json()["message"].startswith(query.split("=")[0])


def test_user_list_is_scoped(world, clients):
    def names(who):
        response = clients[who].get("/api/v2/users")
        assert response.status_code == 200
        assert_openpai("UserInfo", response.json(), many=True)
        return [u["username"] for u in response.json()]

    assert names("root") == ["a_admin", "a_member", "b_admin", "b_member", "root"]
    assert names("a_admin") == ["a_admin", "a_member"]
    assert names("a_member") == ["a_member"]
    assert names("b_member") == ["b_member"]


def test_platform_admin_creates_a_user_into_a_vc(world, clients):
    response = create(clients["root"], extension={"team": "vision"})
    assert response.status_code == 201 and response.json() == {"message": "User is created successfully"}
    body = user_json(clients["root"], "carol")
    assert body["grouplist"] == ["default", "team_a"]
    assert body["virtualCluster"] == ["team_a"] and body["extension"] == {"team": "vision"}
    assert Membership.objects.filter(user__username="carol", tenant=world.tenant_a).exists()
    login = APIClient().post("/api/v2/authn/basic/login", {"username": "carol", "password": NEW_PASSWORD})
    assert login.status_code == 200
    entry = AuditEntry.objects.get(action="user.create")
    assert entry.actor == world.root and NEW_PASSWORD not in str(entry.changes)


def test_platform_admin_creates_an_admin(world, clients):
    assert create(clients["root"], username="dave", admin=True, virtualCluster=[]).status_code == 201
    body = user_json(clients["root"], "dave")
    assert body["admin"] is True and "admingroup" in body["grouplist"]


def test_tenant_admin_creates_users_only_into_their_team(world, clients):
    assert create(clients["a_admin"]).status_code == 201
    assert user_json(clients["a_admin"], "carol")["virtualCluster"] == ["team_a"]
    assert create(clients["a_admin"], username="erin", virtualCluster=[]).status_code == 201
    assert Membership.objects.filter(user__username="erin", tenant=world.tenant_a).exists()
    assert_error(create(clients["a_admin"], username="fay", virtualCluster=["team_b"]), 400, "NoVirtualClusterError")
    assert_error(create(clients["a_admin"], username="gus", admin=True), 403, "ForbiddenUserError")


def test_members_cannot_create_users(world, clients):
    assert_error(create(clients["a_member"]), 403, "ForbiddenUserError")


def test_duplicate_username_is_a_conflict(world, clients):
    assert_error(create(clients["root"], username="a_member"), 409, "ConflictUserError")


@pytest.mark.parametrize("fields,field", [
    ({"username": "bad name!"}, "username"),
    ({"password": "123"}, "password"),
    ({"email": "not-an-email"}, "email"),
    ({"virtualCluster": "team_a"}, "virtualCluster"),
    ({"extension": []}, "extension"),
])
def test_create_user_validation_names_the_field(world, clients, fields, field):
    response = create(clients["root"], **fields)
    assert response.status_code == 400
    assert field in response.json()["message"]
    assert not Membership.objects.filter(user__username="carol").exists()


def test_unknown_vc_on_create_is_openpai_bad_request(world, clients):
    assert_error(create(clients["root"], virtualCluster=["nope"]), 400, "NoVirtualClusterError")


def test_update_user_patch_and_replace(world, clients):
    root = clients["root"]
    response = root.put("/api/v2/users", {"data": {"username": "a_member", "email": "new@example.com"}, "patch": True},
                        format="json")
    assert response.status_code == 201
    assert user_json(root, "a_member")["email"] == "new@example.com"
    incomplete = root.put("/api/v2/users", {"data": {"username": "a_member", "email": "x@example.com"}}, format="json")
    assert incomplete.status_code == 400 and "data.password" in incomplete.json()["message"]
    full = {"username": "a_member", "email": "full@example.com", "virtualCluster": ["team_b"], "admin": False,
            "password": NEW_PASSWORD, "extension": {"k": 1}}
    assert root.put("/api/v2/users", {"data": full, "patch": False}, format="json").status_code == 201
    body = user_json(root, "a_member")
    assert body["virtualCluster"] == ["team_b"] and body["grouplist"] == ["default", "team_b"]
    assert body["extension"] == {"k": 1}


def test_new_password_revokes_login_and_application_tokens(world, clients, client_for):
    # An application token minted with a stolen password must not survive the reset (issue 13).
    member = client_for(world.a_member)
    app_token = member.post("/api/v2/tokens/application").json()["token"]
    data = {"data": {"username": "a_member", "password": NEW_PASSWORD}, "patch": True}
    assert clients["root"].put("/api/v2/users", data, format="json").status_code == 201
    assert member.get("/api/v2/users/me").status_code == 401
    app = APIClient()
    app.credentials(HTTP_AUTHORIZATION=f"Bearer {app_token}")
    assert app.get("/api/v2/users/me").status_code == 401


def test_tenant_admin_updates_their_members_but_not_others(world, clients):
    patch = {"data": {"username": "a_member", "email": "a@example.com"}, "patch": True}
    assert clients["a_admin"].put("/api/v2/users", patch, format="json").status_code == 201
    patch["data"]["username"] = "b_member"
    assert_error(clients["a_admin"].put("/api/v2/users", patch, format="json"), 404, "NoUserError")
    patch["data"] = {"username": "a_member", "admin": True}
    assert_error(clients["a_admin"].put("/api/v2/users", patch, format="json"), 403, "ForbiddenUserError")
    patch["data"] = {"username": "a_member", "virtualCluster": ["team_b"]}
    assert_error(clients["a_admin"].put("/api/v2/users", patch, format="json"), 400, "NoVirtualClusterError")


def test_tenant_admin_setting_vcs_leaves_other_teams_vc_groups(world, clients):
    world.a_member.groups.add(world.group_b)
    f.GroupFactory(name="team_a2", tenant=world.tenant_a)
    vc = f.VirtualClusterFactory(name="team_a2", tenant=world.tenant_a, cluster=world.cluster)
    f.VirtualClusterGrantFactory(virtual_cluster=vc, group=world.tenant_a.groups.get(name="team_a2"))
    patch = {"data": {"username": "a_member", "virtualCluster": ["team_a2"]}, "patch": True}
    assert clients["a_admin"].put("/api/v2/users", patch, format="json").status_code == 201
    assert user_json(clients["root"], "a_member")["grouplist"] == ["default", "team_a2", "team_b"]


def test_tenant_admin_cannot_change_a_user_who_is_also_in_another_team(world, clients):
    f.MembershipFactory(tenant=world.tenant_b, user=world.a_member)
    patch = {"data": {"username": "a_member", "email": "a@example.com"}, "patch": True}
    assert_error(clients["a_admin"].put("/api/v2/users", patch, format="json"), 403, "ForbiddenUserError")


def test_members_cannot_update_users(world, clients):
    patch = {"data": {"username": "a_member", "email": "a@example.com"}, "patch": True}
    assert_error(clients["a_member"].put("/api/v2/users", patch, format="json"), 403, "ForbiddenUserError")


def test_update_me(world, clients):
    me = clients["a_member"]
    response = me.put("/api/v2/users/me", {"data": {"username": "a_member", "email": "me@example.com"}, "patch": True},
                      format="json")
    assert response.status_code == 201
    assert me.get("/api/v2/users/me").json()["email"] == "me@example.com"


def test_update_me_password_needs_the_old_one(world, clients):
    me = clients["a_member"]
    data = {"data": {"username": "a_member", "newPassword": NEW_PASSWORD, "oldPassword": "wrong"}, "patch": True}
    response = me.put("/api/v2/users/me", data, format="json")
    assert response.status_code == 400 and "oldPassword" in response.json()["message"]
    data["data"]["oldPassword"] = world.password
    assert me.put("/api/v2/users/me", data, format="json").status_code == 201
    assert me.get("/api/v2/users/me").status_code == 401, "login tokens are revoked with a new password"
    login = APIClient().post("/api/v2/authn/basic/login", {"username": "a_member", "password": NEW_PASSWORD})
    assert login.status_code == 200


def test_update_me_rejects_weak_password_and_other_usernames(world, clients):
    me = clients["a_member"]
    weak = {"data": {"username": "a_member", "newPassword": "123", "oldPassword": world.password}, "patch": True}
    response = me.put("/api/v2/users/me", weak, format="json")
    assert response.status_code == 400 and "newPassword" in response.json()["message"]
    other = {"data": {"username": "b_member", "email": "x@example.com"}, "patch": True}
    assert_error(me.put("/api/v2/users/me", other, format="json"), 403, "ForbiddenUserError")
    assert me.put("/api/v2/users/me", {"data": {"username": "a_member"}}, format="json").status_code == 400


def test_get_user_is_scoped(world, clients):
    assert clients["a_admin"].get("/api/v2/users/a_member").status_code == 200
    assert_error(clients["a_member"].get("/api/v2/users/a_admin"), 404, "NoUserError")
    assert_error(clients["b_admin"].get("/api/v2/users/a_member"), 404, "NoUserError")
    assert_error(clients["root"].get("/api/v2/users/nobody"), 404, "NoUserError")


def test_delete_user(world, clients):
    create(clients["root"])
    assert_error(clients["a_member"].delete("/api/v2/users/carol"), 404, "NoUserError")
    assert_error(clients["b_admin"].delete("/api/v2/users/carol"), 404, "NoUserError")
    response = clients["a_admin"].delete("/api/v2/users/carol")
    assert response.status_code == 200 and response.json() == {"message": "user is removed successfully"}
    assert_error(clients["root"].get("/api/v2/users/carol"), 404, "NoUserError")
    assert AuditEntry.objects.filter(action="user.delete", actor=world.a_admin).exists()


def test_admins_cannot_be_deleted_and_nobody_deletes_themselves(world, clients):
    f.MembershipFactory(tenant=world.tenant_a, user=world.root)
    assert_error(clients["a_admin"].delete("/api/v2/users/root"), 403, "RemoveAdminError")
    assert_error(clients["root"].delete("/api/v2/users/root"), 403, "RemoveAdminError")
    response = clients["a_admin"].delete("/api/v2/users/a_admin")
    assert response.status_code == 400 and "own account" in response.json()["message"]


def test_user_with_jobs_cannot_be_deleted(world, clients):
    from apps.jobs.models import Job

    Job.objects.create(owner=world.a_member, tenant=world.tenant_a, virtual_cluster=world.vc_a, name="keep",
                       protocol_text="", spec={})
    assert_error(clients["root"].delete("/api/v2/users/a_member"), 409, "ConflictUserError")
    assert clients["root"].get("/api/v2/users/a_member").status_code == 200


def test_add_and_remove_a_group(world, clients):
    f.GroupFactory(name="team_a_vision", tenant=world.tenant_a)
    client = clients["a_admin"]
    response = client.put("/api/v2/users/a_member/group", {"groupname": "team_a_vision"}, format="json")
    assert response.status_code == 201
    assert "team_a_vision" in user_json(client, "a_member")["grouplist"]
    response = client.delete("/api/v2/users/a_member/group", {"groupname": "team_a_vision"}, format="json")
    assert response.status_code == 201
    assert "team_a_vision" not in user_json(client, "a_member")["grouplist"]


def test_openpai_paths_answer_with_a_trailing_slash_too(world, clients):
    # OpenPAI's swagger writes these two with the slash; its clients call them without.
    response = clients["root"].put("/api/v2/users/a_member/group/", {"groupname": "team_b"}, format="json")
    assert response.status_code == 201
    response = clients["root"].put("/api/v2/users/a_member/grouplist/", {"grouplist": ["team_a"]}, format="json")
    assert response.status_code == 201
    assert clients["root"].get("/api/v2/users/a_member/").json()["grouplist"] == ["default", "team_a"]


def test_group_changes_are_checked(world, clients):
    client = clients["a_admin"]
    assert_error(client.put("/api/v2/users/a_member/group", {"groupname": "nope"}, format="json"), 404, "NoGroupError")
    assert_error(client.put("/api/v2/users/a_member/group", {"groupname": "team_b"}, format="json"), 404,
                 "NoGroupError")
    assert_error(client.put("/api/v2/users/a_member/group", {"groupname": "admingroup"}, format="json"), 403,
                 "ForbiddenUserError")
    assert_error(client.put("/api/v2/users/b_member/group", {"groupname": "team_a"}, format="json"), 404,
                 "NoUserError")
    response = client.delete("/api/v2/users/a_member/group", {"groupname": "default"}, format="json")
    assert response.status_code == 400 and "default" in response.json()["message"]
    assert_error(clients["a_member"].put("/api/v2/users/a_member/group", {"groupname": "team_a"}, format="json"),
                 403, "ForbiddenUserError")
    assert client.put("/api/v2/users/a_member/group", {}, format="json").status_code == 400


def test_joining_a_group_of_another_team_makes_a_member(world, clients):
    response = clients["root"].put("/api/v2/users/a_member/group", {"groupname": "team_b"}, format="json")
    assert response.status_code == 201
    assert Membership.objects.filter(user=world.a_member, tenant=world.tenant_b).exists()


def test_replace_grouplist(world, clients):
    root = clients["root"]
    response = root.put("/api/v2/users/a_member/grouplist", {"grouplist": ["team_b"]}, format="json")
    assert response.status_code == 201
    assert user_json(root, "a_member")["grouplist"] == ["default", "team_b"]
    assert_error(root.put("/api/v2/users/a_member/grouplist", {"grouplist": ["team_b", "nope"]}, format="json"),
                 404, "NoGroupError")
    assert user_json(root, "a_member")["grouplist"] == ["default", "team_b"]


def test_admins_keep_their_own_admin_rights(world, clients):
    response = clients["root"].put("/api/v2/users/root/grouplist", {"grouplist": ["team_a"]}, format="json")
    assert response.status_code == 400 and "admin rights" in response.json()["message"]
    response = clients["root"].delete("/api/v2/users/root/group", {"groupname": "admingroup"}, format="json")
    assert response.status_code == 400
    response = clients["root"].put("/api/v2/users", {"data": {"username": "root", "admin": False}, "patch": True},
                                   format="json")
    assert response.status_code == 400
    assert clients["root"].get("/api/v2/users/me").json()["admin"] is True


def test_tenant_admin_replaces_only_their_groups(world, clients):
    clients["root"].put("/api/v2/users/a_member/group", {"groupname": "team_b"}, format="json")
    world.a_member.memberships.filter(tenant=world.tenant_b).delete()
    f.GroupFactory(name="team_a_vision", tenant=world.tenant_a)
    response = clients["a_admin"].put("/api/v2/users/a_member/grouplist", {"grouplist": ["team_a_vision"]},
                                      format="json")
    assert response.status_code == 201
    assert user_json(clients["root"], "a_member")["grouplist"] == ["default", "team_a_vision", "team_b"]


def test_user_routes_other_than_reads_do_not_exist_in_oidc_mode(world, clients, settings):
    settings.PAI_AUTH_MODE = "oidc"
    assert clients["root"].get("/api/v2/users").status_code == 200
    assert_error(create(clients["root"]), 404, "NoApiError")
    assert_error(clients["root"].delete("/api/v2/users/a_member"), 404, "NoApiError")


def test_no_token_rows_leak_into_user_objects(world, clients):
    clients["a_member"].post("/api/v2/tokens/application")
    text = clients["root"].get("/api/v2/users").content.decode()
    for row in ApiToken.objects.all():
        assert row.digest not in text and row.prefix not in text
