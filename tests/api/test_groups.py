"""OpenPAI's group routes mapped onto pai's groups, VC grants and storage grants."""

import pytest

from apps.accounts.models import Group
from apps.audit.models import AuditEntry
from apps.storage.models import StorageGrant
from apps.virtualclusters.models import VirtualClusterGrant
from tests import factories as f

from .openpai import assert_error, assert_openpai


def test_group_object_maps_grants_to_acls(world, clients):
    response = clients["a_member"].get("/api/v2/groups/team_a")
    assert response.status_code == 200
    body = response.json()
    assert_openpai("Group", body)
    assert body == {
        "groupname": "team_a",
        "description": "",
        "externalName": "",
        "extension": {"acls": {"admin": False, "virtualClusters": ["team_a"], "storageConfigs": ["team-a-data"]}},
        "tenant": "team-a",
    }
    admin = clients["a_member"].get("/api/v2/groups/admingroup").json()
    assert admin["extension"]["acls"]["admin"] is True and admin["tenant"] is None


def test_group_list_is_scoped(world, clients):
    def names(who):
        response = clients[who].get("/api/v2/groups")
        assert response.status_code == 200
        assert_openpai("Group", response.json(), many=True)
        return [g["groupname"] for g in response.json()]

    assert names("root") == ["admingroup", "default", "team_a", "team_b"]
    assert names("a_member") == ["admingroup", "default", "team_a"]
    assert names("b_admin") == ["admingroup", "default", "team_b"]


def test_group_lists_page(world, clients):
    response = clients["root"].get("/api/v2/groups?limit=1&offset=2")
    assert [g["groupname"] for g in response.json()] == ["team_a"] and response["X-Total-Count"] == "4"
    response = clients["root"].get("/api/v2/groups/default/userlist?limit=2")
    assert [u["username"] for u in response.json()] == ["a_admin", "a_member"] and response["X-Total-Count"] == "5"


def test_other_teams_groups_are_404(world, clients):
    assert_error(clients["a_member"].get("/api/v2/groups/team_b"), 404, "NoGroupError")
    assert_error(clients["a_member"].get("/api/v2/groups/team_b/userlist"), 404, "NoGroupError")
    assert_error(clients["a_member"].get("/api/v2/groups/nope"), 404, "NoGroupError")


def test_userlist(world, clients):
    response = clients["a_member"].get("/api/v2/groups/team_a/userlist")
    assert response.status_code == 200
    assert_openpai("GroupMember", response.json(), many=True)
    assert response.json() == [
        {"username": "a_admin", "clusterAdmin": False},
        {"username": "a_member", "clusterAdmin": False},
    ]
    everyone = clients["root"].get("/api/v2/groups/default/userlist").json()
    assert {"username": "root", "clusterAdmin": True} in everyone and len(everyone) == 5
    # The built-in groups span teams: a member sees only the accounts they can see.
    assert clients["b_member"].get("/api/v2/groups/default/userlist").json() == [
        {"username": "b_member", "clusterAdmin": False}
    ]


def test_tenant_admin_creates_a_group_with_grants(world, clients):
    data = {
        "groupname": "team_a_vision",
        "description": "Vision",
        "externalName": "aad-vision",
        "extension": {"acls": {"virtualClusters": ["team_a"], "storageConfigs": ["team-a-data"]}},
    }
    response = clients["a_admin"].post("/api/v2/groups", data, format="json")
    assert response.status_code == 201 and response.json() == {"message": "group is created successfully"}
    group = Group.objects.get(name="team_a_vision")
    assert group.tenant == world.tenant_a and group.external_name == "aad-vision"
    assert VirtualClusterGrant.objects.filter(group=group, virtual_cluster=world.vc_a).exists()
    assert StorageGrant.objects.filter(group=group, storage=world.storage_a).exists()
    assert AuditEntry.objects.filter(action="group.create", actor=world.a_admin).exists()


def test_tenant_admin_cannot_grant_other_teams_resources(world, clients):
    data = {"groupname": "sneaky", "extension": {"acls": {"virtualClusters": ["team_b"]}}}
    assert_error(clients["a_admin"].post("/api/v2/groups", data, format="json"), 400, "NoVirtualClusterError")
    data = {"groupname": "sneaky", "extension": {"acls": {"storageConfigs": ["team-b-data"]}}}
    assert clients["a_admin"].post("/api/v2/groups", data, format="json").status_code == 400
    data = {"groupname": "sneaky", "tenant": "team-b"}
    assert clients["a_admin"].post("/api/v2/groups", data, format="json").status_code == 400
    assert not Group.objects.filter(name="sneaky").exists()


def test_platform_admin_must_name_the_team_when_nothing_implies_it(world, clients):
    response = clients["root"].post("/api/v2/groups", {"groupname": "orphan"}, format="json")
    assert response.status_code == 400 and response.json()["message"].startswith("tenant:")
    assert clients["root"].post("/api/v2/groups", {"groupname": "orphan", "tenant": "team-b"},
                                format="json").status_code == 201
    assert Group.objects.get(name="orphan").tenant == world.tenant_b


def test_group_grants_cannot_span_teams(world, clients):
    data = {"groupname": "mixed", "extension": {"acls": {"virtualClusters": ["team_a", "team_b"]}}}
    response = clients["root"].post("/api/v2/groups", data, format="json")
    assert response.status_code == 400 and not Group.objects.filter(name="mixed").exists()


@pytest.mark.parametrize("data,status,code", [
    ({"groupname": "team_a"}, 409, "ConflictGroupError"),
    ({"groupname": "default"}, 409, "ConflictGroupError"),
    ({"groupname": "bad name"}, 400, "InvalidParametersError"),
    ({"groupname": "x", "extension": {"acls": {"admin": True}}}, 400, "InvalidParametersError"),
    ({"groupname": "x", "extension": {"other": 1}}, 400, "InvalidParametersError"),
    ({"groupname": "x", "externalName": "aad-x", "extension": {"acls": {"virtualClusters": "team_a"}}}, 400,
     "InvalidParametersError"),
])
def test_create_group_errors(world, clients, data, status, code):
    assert_error(clients["a_admin"].post("/api/v2/groups", data, format="json"), status, code)


def test_duplicate_external_name_is_refused(world, clients):
    world.group_b.external_name = "aad-shared"
    world.group_b.save()
    response = clients["a_admin"].post("/api/v2/groups", {"groupname": "x", "externalName": "aad-shared"},
                                       format="json")
    assert response.status_code == 400 and "external" in response.json()["message"].lower()


def test_members_cannot_create_groups(world, clients):
    assert_error(clients["a_member"].post("/api/v2/groups", {"groupname": "x"}, format="json"), 403,
                 "ForbiddenUserError")


def test_update_group_patch_keeps_grants_and_replace_sets_them(world, clients):
    client = clients["a_admin"]
    patch = {"data": {"groupname": "team_a", "description": "Team A people"}, "patch": True}
    assert client.put("/api/v2/groups", patch, format="json").status_code == 201
    body = client.get("/api/v2/groups/team_a").json()
    assert body["description"] == "Team A people"
    assert body["extension"]["acls"]["virtualClusters"] == ["team_a"]
    replace = {"data": {"groupname": "team_a", "extension": {"acls": {"storageConfigs": ["team-a-data"]}}},
               "patch": False}
    assert client.put("/api/v2/groups", replace, format="json").status_code == 201
    body = client.get("/api/v2/groups/team_a").json()
    assert body["description"] == "" and body["extension"]["acls"]["virtualClusters"] == []
    assert body["extension"]["acls"]["storageConfigs"] == ["team-a-data"]


def test_update_group_scoping(world, clients):
    patch = {"data": {"groupname": "team_b", "description": "x"}, "patch": True}
    assert_error(clients["a_admin"].put("/api/v2/groups", patch, format="json"), 404, "NoGroupError")
    patch["data"]["groupname"] = "team_a"
    assert_error(clients["a_member"].put("/api/v2/groups", patch, format="json"), 403, "ForbiddenUserError")
    patch["data"]["groupname"] = "default"
    assert_error(clients["a_admin"].put("/api/v2/groups", patch, format="json"), 403, "ForbiddenUserError")
    assert clients["root"].put("/api/v2/groups", patch, format="json").status_code == 201


def test_delete_group(world, clients):
    f.GroupFactory(name="team_a_tmp", tenant=world.tenant_a)
    assert_error(clients["b_admin"].delete("/api/v2/groups/team_a_tmp"), 404, "NoGroupError")
    assert_error(clients["a_member"].delete("/api/v2/groups/team_a_tmp"), 403, "ForbiddenUserError")
    response = clients["a_admin"].delete("/api/v2/groups/team_a_tmp")
    assert response.status_code == 201 and response.json() == {"message": "group is removed successfully"}
    assert not Group.objects.filter(name="team_a_tmp").exists()


def test_builtin_groups_cannot_be_deleted(world, clients):
    response = clients["root"].delete("/api/v2/groups/default")
    assert response.status_code == 400 and "built-in" in response.json()["message"]
    assert Group.objects.filter(name="default").exists()
