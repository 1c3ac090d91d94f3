"""Random query strings and bodies against the list and create routes: a 4xx at worst, never a 5xx."""

from urllib.parse import urlencode

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FIELDS = [
    "username", "password", "email", "virtualCluster", "admin", "extension", "groupname", "grouplist",
    "description", "externalName", "acls", "virtualClusters", "storageConfigs", "tenant", "data", "patch",
    "newPassword", "oldPassword", "expiration", "name", "cluster_class", "backend", "connection", "child",
    "child_count", "is_node_level", "gpu", "cpu", "memory_mb", "address", "cell_type", "parent", "pinned_id",
]
PARAMS = ["default", "ordering", "limit", "offset", "name", "leaf", "ready", "schedulable", "cluster_class",
          "backend", "namespace", "is_node_level", "parent", "cell_type"]

NAMES = st.sampled_from(["team_a", "team_b", "default", "admingroup", "a_member", "root", "team-a", "team-a-data",
                         "nope", "", "local", "A100", "A100-NODE", "rack-1", "gpu-node-1", "production"])
SCALARS = (
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30) | NAMES
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), inner,
                                                                max_size=5),
    max_leaves=12,
)
BODIES = st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=7) | VALUES
QUERIES = st.dictionaries(st.sampled_from(PARAMS) | st.text(max_size=6), st.text(max_size=20) | NAMES, max_size=4)

WRITES = [
    ("post", "/api/v2/users"),
    ("put", "/api/v2/users"),
    ("put", "/api/v2/users/me"),
    ("put", "/api/v2/users/a_member/group"),
    ("delete", "/api/v2/users/a_member/group"),
    ("put", "/api/v2/users/a_member/grouplist"),
    ("post", "/api/v2/groups"),
    ("put", "/api/v2/groups"),
    ("post", "/api/v2/authn/basic/login"),
    ("post", "/api/v2/clusters/"),
    ("patch", "/api/v2/clusters/local/"),
    ("post", "/api/v2/clusters/local/cell-types/"),
    ("post", "/api/v2/clusters/local/physical-cells/"),
]
LISTS = [
    "/api/v2/users", "/api/v2/groups", "/api/v2/virtual-clusters", "/api/v2/storages", "/api/v2/tokens",
    "/api/v2/kubernetes/nodes", "/api/v2/kubernetes/pods", "/api/v2/tenants/", "/api/v2/clusters/",
    "/api/v2/clusters/local/nodes/", "/api/v2/clusters/local/cell-types/", "/api/v2/clusters/local/physical-cells/",
]

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                       HealthCheck.too_slow])


@FUZZ
@given(who=st.sampled_from(["root", "a_admin", "a_member"]), route=st.sampled_from(WRITES), body=BODIES)
def test_random_bodies_never_5xx(world, clients, who, route, body):
    method, url = route
    response = getattr(clients[who], method)(url, body, format="json")
    assert response.status_code < 500, (method, url, body, response.content)
    if response.status_code >= 400:
        assert set(response.json()) >= {"code", "message"}


@FUZZ
@given(route=st.sampled_from(WRITES), text=st.binary(max_size=60),
       content_type=st.sampled_from(["application/json", "application/x-www-form-urlencoded", "text/plain"]))
def test_undecodable_bodies_never_5xx(world, clients, route, text, content_type):
    method, url = route
    response = getattr(clients["root"], method)(url, text, content_type=content_type)
    assert response.status_code < 500, (method, url, text, response.content)


@FUZZ
@given(who=st.sampled_from(["root", "a_member"]), url=st.sampled_from(LISTS), query=QUERIES)
def test_random_query_strings_never_5xx(world, clients, who, url, query):
    response = clients[who].get(f"{url}?{urlencode(query)}")
    assert response.status_code < 500, (url, query, response.content)
