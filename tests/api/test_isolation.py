"""The isolation matrix: who gets what from every identity and directory route, on Team A's objects.

Columns: anonymous, a_member, a_admin, b_member, root. Another team's objects answer 404
(their existence does not leak); a visible object the user may not change answers 403.
"""

import pytest
from rest_framework.test import APIClient

USERS = ("anonymous", "a_member", "a_admin", "b_member", "root")

READS = {
    "/api/v2/info": (200, 200, 200, 200, 200),
    "/api/v2/users": (401, 200, 200, 200, 200),
    "/api/v2/users/me": (401, 200, 200, 200, 200),
    "/api/v2/users/a_member": (401, 200, 200, 404, 200),
    "/api/v2/users/a_admin": (401, 404, 200, 404, 200),
    "/api/v2/groups": (401, 200, 200, 200, 200),
    "/api/v2/groups/team_a": (401, 200, 200, 404, 200),
    "/api/v2/groups/team_a/userlist": (401, 200, 200, 404, 200),
    "/api/v2/virtual-clusters": (401, 200, 200, 200, 200),
    "/api/v2/virtual-clusters/team_a": (401, 200, 200, 404, 200),
    "/api/v2/storages": (401, 200, 200, 200, 200),
    "/api/v2/storages/team-a-data": (401, 200, 200, 404, 200),
    "/api/v2/tokens": (401, 200, 200, 200, 200),
    "/api/v2/kubernetes/nodes": (401, 403, 403, 403, 200),
    "/api/v2/kubernetes/pods": (401, 403, 403, 403, 200),
    "/api/v2/tenants/": (401, 200, 200, 200, 200),
    "/api/v2/tenants/team-a/": (401, 200, 200, 404, 200),
    "/api/v2/clusters/": (401, 200, 200, 200, 200),
    "/api/v2/clusters/local/": (401, 200, 200, 200, 200),
    "/api/v2/clusters/local/cell-types/": (401, 200, 200, 200, 200),
    "/api/v2/clusters/local/physical-cells/": (401, 200, 200, 200, 200),
    "/api/v2/clusters/local/nodes/": (401, 200, 200, 200, 200),
}

WRITES = {
    "create user": ("post", "/api/v2/users", {"username": "carol", "password": "a-long-passphrase-1",
                                              "virtualCluster": ["team_a"]}, (401, 403, 201, 403, 201)),
    "update user": ("put", "/api/v2/users", {"data": {"username": "a_member", "email": "x@example.com"},
                                             "patch": True}, (401, 403, 201, 403, 201)),
    "delete user": ("delete", "/api/v2/users/a_member", None, (401, 403, 200, 404, 200)),
    "add group": ("put", "/api/v2/users/a_member/group", {"groupname": "team_a"}, (401, 403, 201, 403, 201)),
    "remove group": ("delete", "/api/v2/users/a_member/group", {"groupname": "team_a"}, (401, 403, 201, 403, 201)),
    "grouplist": ("put", "/api/v2/users/a_member/grouplist", {"grouplist": ["team_a"]}, (401, 403, 201, 403, 201)),
    "create group": ("post", "/api/v2/groups", {"groupname": "team_a_x", "tenant": "team-a"},
                     (401, 403, 201, 403, 201)),
    "update group": ("put", "/api/v2/groups", {"data": {"groupname": "team_a", "description": "x"}, "patch": True},
                     (401, 403, 201, 404, 201)),
    "delete group": ("delete", "/api/v2/groups/team_a", None, (401, 403, 201, 404, 201)),
    "application token": ("post", "/api/v2/tokens/application", None, (401, 200, 200, 200, 200)),
    "logout": ("delete", "/api/v2/authn/basic/logout", None, (401, 200, 200, 200, 200)),
    "create cluster": ("post", "/api/v2/clusters/", {"name": "gpu2"}, (401, 403, 403, 403, 201)),
    "change cluster": ("patch", "/api/v2/clusters/local/", {"description": "x"}, (401, 403, 403, 403, 200)),
    "create cell type": ("post", "/api/v2/clusters/local/cell-types/", {"name": "H100"}, (401, 403, 403, 403, 201)),
    "delete physical cell": ("delete", "/api/v2/clusters/local/physical-cells/cpu-node-2/", None,
                             (401, 403, 403, 403, 204)),
}


def client_of(name, clients):
    return APIClient() if name == "anonymous" else clients[name]


@pytest.mark.parametrize("url", READS)
def test_reads(world, clients, url):
    got = tuple(client_of(name, clients).get(url).status_code for name in USERS)
    assert got == READS[url], dict(zip(USERS, got))


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("action", WRITES)
def test_writes(world, client_for, action, user):
    method, url, body, expected = WRITES[action]
    client = APIClient() if user == "anonymous" else client_for(world.users()[user])
    response = getattr(client, method)(url, body, format="json")
    assert response.status_code == expected[USERS.index(user)], response.content


def test_lists_never_show_another_teams_objects(world, clients):
    client = clients["b_member"]
    for url in ("/api/v2/users", "/api/v2/groups", "/api/v2/virtual-clusters", "/api/v2/storages",
                "/api/v2/tenants/", "/api/v2/groups/default/userlist"):
        text = client.get(url).content.decode()
        for name in ("a_member", "a_admin", "team_a", "team-a"):
            assert name not in text, (url, name)
