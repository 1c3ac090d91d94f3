"""Contract tests of the Kubernetes API test server, through the official client over HTTP.

Each test states a rule of the real API server that pai's backend relies on, so the
backend's own tests stand on verified ground.
"""

import base64
import json
import threading
import time

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from tests.kubeserver.server import ApiError

MERGE = "application/merge-patch+json"


def pod_body(name, *, node=None, gpus=None, labels=None, containers=None, **spec):
    container = {"name": "main", "image": "busybox:1.36", "command": ["sleep", "1"]}
    if gpus is not None:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    body = {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [container] if containers is None else containers, "restartPolicy": "Never", **spec},
    }
    if node:
        body["spec"]["nodeName"] = node
    return body


def status_of(exc):
    return json.loads(exc.body)


@pytest.fixture
def core(kube_server):
    return client.CoreV1Api(kube_server.api_client())


@pytest.fixture
def ns(core):
    core.create_namespace({"metadata": {"name": "team-a"}})
    return "team-a"


@pytest.fixture
def node(kube_server):
    kube_server.add_node("gpu-1", gpus=8, labels={"pai.sku": "A100"})
    return "gpu-1"


def events_of(watcher, func, *args, count=None, **kwargs):
    """The (type, object) events of a watch: the first `count` of them, or all until the
    server's timeout ends the stream."""
    events = []
    for event in watcher.stream(func, *args, **kwargs):
        events.append((event["type"], event["object"]))
        if count is not None and len(events) == count:
            watcher.stop()
    return events


# --------------------------------------------------------------------------- discovery
def test_discovery_lists_core_v1_scheduling_group_and_version(kube_server):
    api_client = kube_server.api_client()
    assert client.CoreApi(api_client).get_api_versions().versions == ["v1"]
    core_resources = {r.name: r for r in client.CoreV1Api(api_client).get_api_resources().resources}
    for name in ("namespaces", "nodes", "nodes/status", "pods", "pods/status", "pods/binding", "pods/log",
                 "events", "resourcequotas", "persistentvolumeclaims"):
        assert name in core_resources
    assert core_resources["pods"].namespaced and not core_resources["nodes"].namespaced
    assert core_resources["pods/binding"].verbs == ["create"]
    groups = client.ApisApi(api_client).get_api_versions().groups
    assert [g.name for g in groups] == ["scheduling.k8s.io", "storage.k8s.io"]
    scheduling = client.SchedulingV1Api(api_client).get_api_resources()
    assert scheduling.group_version == "scheduling.k8s.io/v1"
    assert [r.name for r in scheduling.resources] == ["priorityclasses"]
    storage = client.StorageV1Api(api_client).get_api_resources()
    assert storage.group_version == "storage.k8s.io/v1" and [r.name for r in storage.resources] == ["storageclasses"]
    assert client.VersionApi(api_client).get_code().git_version.startswith("v1.")


def test_unknown_paths_are_404_status(kube_server):
    for path in ("/api/v1/widgets", "/apis/apps/v1/deployments", "/api/v1/namespaces/default/nodes"):
        response = urllib3.request("GET", kube_server.host + path)
        assert response.status == 404
        assert json.loads(response.data)["kind"] == "Status"


def test_token_is_required_when_set_and_kubeconfig_files_carry_it(tmp_path):
    from kubernetes import config

    from tests.kubeserver import KubeServer

    with KubeServer(token="s3cret") as server:
        anonymous = client.CoreV1Api(client.ApiClient(client.Configuration(host=server.host)))
        with pytest.raises(ApiException) as exc:
            anonymous.list_namespace()
        assert exc.value.status == 401 and status_of(exc.value)["reason"] == "Unauthorized"
        assert [n.metadata.name for n in client.CoreV1Api(server.api_client()).list_namespace().items] == ["default", "kube-system"]
        path = server.write_kubeconfig(tmp_path / "kubeconfig", context="cluster-a")
        loaded = client.CoreV1Api(config.new_client_from_config(config_file=str(path), context="cluster-a"))
        assert len(loaded.list_namespace().items) == 2


# --------------------------------------------------------------------------- metadata and CRUD
def test_create_sets_uid_resource_version_timestamp_and_generated_name(core, ns):
    pod = core.create_namespaced_pod(ns, {"metadata": {"generateName": "worker-"}, "spec": pod_body("x")["spec"]})
    assert pod.metadata.name.startswith("worker-") and len(pod.metadata.name) == len("worker-") + 5
    assert pod.metadata.uid and pod.metadata.creation_timestamp is not None
    assert int(pod.metadata.resource_version) > 0
    assert pod.kind == "Pod" and pod.api_version == "v1"
    assert pod.status.phase == "Pending"
    assert pod.spec.termination_grace_period_seconds == 30
    other = core.create_namespaced_pod(ns, {"metadata": {"generateName": "worker-"}, "spec": pod_body("x")["spec"]})
    assert other.metadata.name != pod.metadata.name and other.metadata.uid != pod.metadata.uid


def test_resource_version_is_one_counter_across_kinds(kube_server, core, ns):
    pod = core.create_namespaced_pod(ns, pod_body("a"))
    rv_node = int(kube_server.add_node("n-1"))
    quota = core.create_namespaced_resource_quota(ns, {"metadata": {"name": "q"}, "spec": {"hard": {"pods": "10"}}})
    versions = [int(pod.metadata.resource_version), rv_node, int(quota.metadata.resource_version)]
    assert versions == sorted(versions) and len(set(versions)) == 3
    listing = core.list_namespaced_pod(ns)
    assert int(listing.metadata.resource_version) >= versions[-1]


def test_get_missing_object_is_404_not_found_status(core, ns):
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_pod("ghost", ns)
    assert exc.value.status == 404
    body = status_of(exc.value)
    assert body["kind"] == "Status" and body["reason"] == "NotFound" and body["code"] == 404
    assert body["message"] == 'pods "ghost" not found'
    assert body["details"] == {"name": "ghost", "kind": "pods"}


def test_create_twice_is_409_already_exists(core, ns):
    core.create_namespaced_pod(ns, pod_body("dup"))
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(ns, pod_body("dup"))
    assert exc.value.status == 409 and status_of(exc.value)["reason"] == "AlreadyExists"


def test_create_in_missing_namespace_is_404(core):
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod("nowhere", pod_body("a"))
    assert exc.value.status == 404 and status_of(exc.value)["message"] == 'namespaces "nowhere" not found'


def test_replace_with_stale_resource_version_is_409_conflict(core, ns):
    pod = core.create_namespaced_pod(ns, pod_body("a"))
    stale = pod.metadata.resource_version
    pod.metadata.labels = {"step": "one"}
    updated = core.replace_namespaced_pod("a", ns, pod)
    assert int(updated.metadata.resource_version) > int(stale)
    pod.metadata.labels = {"step": "two"}
    pod.metadata.resource_version = stale
    with pytest.raises(ApiException) as exc:
        core.replace_namespaced_pod("a", ns, pod)
    assert exc.value.status == 409 and status_of(exc.value)["reason"] == "Conflict"
    assert "the object has been modified" in status_of(exc.value)["message"]
    assert core.read_namespaced_pod("a", ns).metadata.labels == {"step": "one"}


def test_pod_spec_is_immutable_except_image(core, ns):
    core.create_namespaced_pod(ns, pod_body("a"))
    patched = core.patch_namespaced_pod("a", ns, {"spec": {"containers": [{"name": "main", "image": "busybox:1.37"}]}})
    assert patched.spec.containers[0].image == "busybox:1.37"
    with pytest.raises(ApiException) as exc:
        core.patch_namespaced_pod("a", ns, {"spec": {"nodeName": "elsewhere"}}, _content_type=MERGE)
    assert exc.value.status == 422
    assert status_of(exc.value)["details"]["causes"][0]["field"] == "spec"


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "body, field, reason",
    [
        (pod_body("Bad_Name"), "metadata.name", "FieldValueInvalid"),
        (pod_body("a", containers=[]), "spec.containers", "FieldValueRequired"),
        (pod_body("a", containers=[{"name": "main"}]), "spec.containers[0].image", "FieldValueRequired"),
        (pod_body("a", containers=[{"name": "Main", "image": "x"}]), "spec.containers[0].name", "FieldValueInvalid"),
        (
            pod_body("a", containers=[{"name": "m", "image": "x"}, {"name": "m", "image": "y"}]),
            "spec.containers[1].name",
            "FieldValueDuplicate",
        ),
        (
            pod_body("a", containers=[{"name": "m", "image": "x", "resources": {"limits": {"cpu": "-1"}}}]),
            "spec.containers[0].resources.limits[cpu]",
            "FieldValueInvalid",
        ),
        (
            pod_body("a", containers=[{"name": "m", "image": "x", "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "2"}}}]),
            "spec.containers[0].resources.requests",
            "FieldValueInvalid",
        ),
        (
            pod_body("a", containers=[{"name": "m", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "1"}}}]),
            "spec.containers[0].resources.requests",
            "FieldValueInvalid",
        ),
        (
            pod_body("a", containers=[{"name": "m", "image": "x", "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}]}]),
            "spec.containers[0].volumeMounts[0].name",
            "FieldValueNotSupported",
        ),
        (pod_body("a", labels={"pai.job": "has space"}), "metadata.labels", "FieldValueInvalid"),
        (pod_body("a", restartPolicy="Sometimes"), "spec.restartPolicy", "FieldValueNotSupported"),
    ],
)
def test_invalid_pod_is_422_with_causes(core, ns, body, field, reason):
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(ns, body)
    assert exc.value.status == 422
    status = status_of(exc.value)
    assert status["reason"] == "Invalid" and status["details"]["kind"] == "Pod"
    assert status["message"].startswith(f'Pod "{body["metadata"]["name"]}" is invalid: ')
    assert {"field": field, "reason": reason} in [{"field": c["field"], "reason": c["reason"]} for c in status["details"]["causes"]]
    assert core.list_namespaced_pod(ns).items == []


def test_unparseable_quantity_is_400_bad_request(core, ns):
    body = pod_body("a", containers=[{"name": "m", "image": "x", "resources": {"limits": {"memory": "lots"}}}])
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(ns, body)
    assert exc.value.status == 400 and "quantities must match the regular expression" in status_of(exc.value)["message"]


def test_namespace_names_are_dns_labels(core):
    with pytest.raises(ApiException) as exc:
        core.create_namespace({"metadata": {"name": "team.a"}})
    assert exc.value.status == 422
    created = core.create_namespace({"metadata": {"name": "team-b"}})
    assert created.status.phase == "Active"
    assert created.metadata.labels == {"kubernetes.io/metadata.name": "team-b"}


def test_pod_defaults_requests_from_limits_and_its_qos_class(core, ns):
    pod = core.create_namespaced_pod(ns, pod_body("a", gpus=2))
    assert pod.spec.containers[0].resources.requests == {"nvidia.com/gpu": "2"}
    assert pod.status.qos_class == "BestEffort"
    sized = {"limits": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"}}
    pod = core.create_namespaced_pod(ns, pod_body("b", containers=[{"name": "m", "image": "x", "resources": sized}]))
    assert pod.status.qos_class == "Guaranteed"
    burstable = {"requests": {"cpu": "1"}}
    pod = core.create_namespaced_pod(ns, pod_body("c", containers=[{"name": "m", "image": "x", "resources": burstable}]))
    assert pod.status.qos_class == "Burstable"


def test_a_body_of_the_wrong_shape_is_400(kube_server, ns):
    response = urllib3.request(
        "POST", f"{kube_server.host}/api/v1/namespaces/{ns}/pods",
        body=json.dumps({"metadata": {"name": "a"}, "spec": {"containers": "main"}}), headers={"Content-Type": "application/json"},
    )
    assert response.status == 400 and json.loads(response.data)["reason"] == "BadRequest"


# --------------------------------------------------------------------------- patches
def test_merge_patch_sets_and_removes_labels_and_annotations(core, ns):
    core.create_namespaced_pod(ns, pod_body("a", labels={"keep": "1", "drop": "1"}))
    patched = core.patch_namespaced_pod(
        "a", ns, {"metadata": {"labels": {"drop": None, "new": "2"}, "annotations": {"pai/node": "gpu-1"}}}, _content_type=MERGE
    )
    assert patched.metadata.labels == {"keep": "1", "new": "2"}
    assert patched.metadata.annotations == {"pai/node": "gpu-1"}


def test_json_patch_applies_operations_and_test_failure_is_422(core, ns):
    core.create_namespaced_pod(ns, pod_body("a", labels={"x": "1"}))
    patched = core.patch_namespaced_pod(
        "a", ns, [{"op": "test", "path": "/metadata/labels/x", "value": "1"}, {"op": "add", "path": "/metadata/labels/y", "value": "2"},
                  {"op": "remove", "path": "/metadata/labels/x"}],
    )
    assert patched.metadata.labels == {"y": "2"}
    with pytest.raises(ApiException) as exc:
        core.patch_namespaced_pod("a", ns, [{"op": "test", "path": "/metadata/labels/y", "value": "3"}])
    assert exc.value.status == 422
    with pytest.raises(ApiException) as exc:
        core.patch_namespaced_pod("a", ns, [{"op": "remove", "path": "/metadata/labels/missing"}])
    assert exc.value.status == 400


def test_object_patch_body_to_a_json_patch_content_type_is_400(core, ns):
    core.create_namespaced_pod(ns, pod_body("a"))
    request = core.api_client.param_serialize(
        "PATCH", "/api/v1/namespaces/{namespace}/pods/{name}", path_params={"namespace": ns, "name": "a"},
        header_params={"Content-Type": "application/json-patch+json"}, body=[],
    )
    method, url, headers, _ = request[:4]
    response = urllib3.PoolManager().request(method, url, body=b'{"metadata": {}}', headers=headers)
    assert response.status == 400


def test_strategic_merge_patch_is_the_default_for_object_bodies(kube_server, core, node):
    patched = core.patch_node(node, {"spec": {"unschedulable": True}})
    assert patched.spec.unschedulable is True
    assert kube_server.requests[-1][0] == "PATCH"
    patched = core.patch_node(node, {"spec": {"taints": [{"key": "pai/drain", "effect": "NoSchedule"}]}})
    patched = core.patch_node(node, {"spec": {"taints": [{"key": "other", "effect": "NoExecute"}]}})
    assert sorted(t.key for t in patched.spec.taints) == ["other", "pai/drain"]
    patched = core.patch_node(node, {"spec": {"taints": [{"key": "other", "$patch": "delete"}]}})
    assert [t.key for t in patched.spec.taints] == ["pai/drain"]


def test_strategic_merge_patch_merges_containers_by_name(core, ns):
    containers = [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y:1"}]
    core.create_namespaced_pod(ns, pod_body("p", containers=containers))
    patched = core.patch_namespaced_pod("p", ns, {"spec": {"containers": [{"name": "b", "image": "y:2"}]}})
    assert [(c.name, c.image) for c in patched.spec.containers] == [("a", "x:1"), ("b", "y:2")]


def test_patch_with_stale_resource_version_is_409(core, ns):
    pod = core.create_namespaced_pod(ns, pod_body("a"))
    core.patch_namespaced_pod("a", ns, {"metadata": {"labels": {"v": "1"}}}, _content_type=MERGE)
    with pytest.raises(ApiException) as exc:
        core.patch_namespaced_pod(
            "a", ns, {"metadata": {"labels": {"v": "2"}, "resourceVersion": pod.metadata.resource_version}}, _content_type=MERGE
        )
    assert exc.value.status == 409


# --------------------------------------------------------------------------- status subresource
def test_status_writes_change_only_status_and_pod_writes_never_status(core, ns, node):
    core.create_namespaced_pod(ns, pod_body("a", node=node))
    patched = core.patch_namespaced_pod_status(
        "a", ns, {"metadata": {"labels": {"sneaky": "1"}}, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    )
    assert patched.status.phase == "Running"
    assert not (patched.metadata.labels or {}).get("sneaky")
    assert {c.type for c in patched.status.conditions} == {"PodScheduled", "Ready"}
    patched = core.patch_namespaced_pod("a", ns, {"metadata": {"labels": {"x": "1"}}, "status": {"phase": "Failed"}}, _content_type=MERGE)
    assert patched.status.phase == "Running" and patched.metadata.labels == {"x": "1"}
    pod = core.read_namespaced_pod("a", ns)
    pod.status.phase = "Succeeded"
    replaced = core.replace_namespaced_pod("a", ns, pod)
    assert replaced.status.phase == "Running"
    replaced.status.phase = "Succeeded"
    assert core.replace_namespaced_pod_status("a", ns, replaced).status.phase == "Succeeded"


def test_node_status_and_spec_are_written_separately(core, node):
    current = core.read_node_status(node)
    assert current.status.capacity["nvidia.com/gpu"] == "8"
    patched = core.patch_node_status(node, {"status": {"allocatable": {"nvidia.com/gpu": "7"}}})
    assert patched.status.allocatable["nvidia.com/gpu"] == "7"
    assert patched.status.capacity["nvidia.com/gpu"] == "8"
    patched = core.patch_node(node, {"status": {"allocatable": {"nvidia.com/gpu": "1"}}})
    assert patched.status.allocatable["nvidia.com/gpu"] == "7"


# --------------------------------------------------------------------------- selectors
@pytest.mark.parametrize(
    "selector, expected",
    [
        ("role=worker", ["p1", "p2"]),
        ("role==worker", ["p1", "p2"]),
        ("role!=worker", ["p3", "p4"]),
        ("role in (worker,ps)", ["p1", "p2", "p3"]),
        ("role notin (worker)", ["p3", "p4"]),
        ("role", ["p1", "p2", "p3"]),
        ("!role", ["p4"]),
        ("role=worker,idx=1", ["p2"]),
        ("role in (worker, ps),idx!=0", ["p2", "p3"]),
    ],
)
def test_label_selectors(core, ns, selector, expected):
    for name, labels in [("p1", {"role": "worker", "idx": "0"}), ("p2", {"role": "worker", "idx": "1"}),
                         ("p3", {"role": "ps", "idx": "2"}), ("p4", {"other": "x"})]:
        core.create_namespaced_pod(ns, pod_body(name, labels=labels))
    assert [p.metadata.name for p in core.list_namespaced_pod(ns, label_selector=selector).items] == expected


def test_malformed_label_selector_is_400(core, ns):
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_pod(ns, label_selector="role in worker")
    assert exc.value.status == 400


def test_field_selectors_on_pods_and_across_namespaces(kube_server, core, ns, node):
    core.create_namespace({"metadata": {"name": "team-b"}})
    core.create_namespaced_pod(ns, pod_body("a", node=node))
    core.create_namespaced_pod(ns, pod_body("b"))
    core.create_namespaced_pod("team-b", pod_body("c", node=node))
    kube_server.run_pod(ns, "a")

    def names(**kwargs):
        return sorted(p.metadata.name for p in core.list_pod_for_all_namespaces(**kwargs).items)

    assert names(field_selector=f"spec.nodeName={node}") == ["a", "c"]
    assert names(field_selector="spec.nodeName=") == ["b"]
    assert names(field_selector="status.phase=Running") == ["a"]
    assert names(field_selector="status.phase!=Running,metadata.namespace=team-a") == ["b"]
    assert names(field_selector="metadata.name=c") == ["c"]
    with pytest.raises(ApiException) as exc:
        core.list_pod_for_all_namespaces(field_selector="spec.image=x")
    assert exc.value.status == 400 and status_of(exc.value)["message"] == "field label not supported: spec.image"


def test_event_field_selectors_on_involved_object(kube_server, core, ns, node):
    a = core.create_namespaced_pod(ns, pod_body("a", node=node))
    core.create_namespaced_pod(ns, pod_body("b", node=node))
    kube_server.run_pod(ns, "a")
    kube_server.run_pod(ns, "b")
    by_name = core.list_namespaced_event(ns, field_selector="involvedObject.kind=Pod,involvedObject.name=a").items
    assert [e.reason for e in by_name] and {e.involved_object.name for e in by_name} == {"a"}
    assert {e.reason for e in by_name} >= {"Pulled", "Created", "Started"}
    by_uid = core.list_namespaced_event(ns, field_selector=f"involvedObject.uid={a.metadata.uid}").items
    assert {e.metadata.name for e in by_uid} == {e.metadata.name for e in by_name}
    assert core.list_namespaced_event(ns, field_selector="reason=Started,source=kubelet").items


# --------------------------------------------------------------------------- paging
def test_limit_and_continue_page_through_a_consistent_snapshot(core, ns):
    for i in range(7):
        core.create_namespaced_pod(ns, pod_body(f"p{i}"))
    first = core.list_namespaced_pod(ns, limit=3)
    assert [p.metadata.name for p in first.items] == ["p0", "p1", "p2"]
    assert first.metadata.remaining_item_count == 4 and first.metadata._continue
    core.create_namespaced_pod(ns, pod_body("p00"))
    core.delete_namespaced_pod("p5", ns)
    second = core.list_namespaced_pod(ns, limit=3, _continue=first.metadata._continue)
    third = core.list_namespaced_pod(ns, limit=3, _continue=second.metadata._continue)
    assert [p.metadata.name for p in second.items + third.items] == ["p3", "p4", "p5", "p6"]
    assert not third.metadata._continue
    assert second.metadata.resource_version == first.metadata.resource_version


def test_continue_token_after_compaction_is_410(kube_server, core, ns):
    for i in range(3):
        core.create_namespaced_pod(ns, pod_body(f"p{i}"))
    first = core.list_namespaced_pod(ns, limit=1)
    core.create_namespaced_pod(ns, pod_body("later"))
    kube_server.compact()
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_pod(ns, limit=1, _continue=first.metadata._continue)
    assert exc.value.status == 410 and status_of(exc.value)["reason"] == "Expired"


def test_list_at_an_exact_resource_version_and_410_once_compacted(kube_server, core, ns):
    core.create_namespaced_pod(ns, pod_body("a"))
    at = core.list_namespaced_pod(ns).metadata.resource_version
    core.create_namespaced_pod(ns, pod_body("b"))
    core.patch_namespaced_pod("a", ns, {"metadata": {"labels": {"later": "1"}}}, _content_type=MERGE)
    past = core.list_namespaced_pod(ns, resource_version=at, resource_version_match="Exact")
    assert [p.metadata.name for p in past.items] == ["a"] and past.items[0].metadata.labels in (None, {})
    latest = core.list_namespaced_pod(ns, resource_version=at)
    assert [p.metadata.name for p in latest.items] == ["a", "b"]
    kube_server.compact()
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_pod(ns, resource_version=at, resource_version_match="Exact")
    assert exc.value.status == 410 and "too old resource version" in status_of(exc.value)["message"]


# --------------------------------------------------------------------------- watch
def test_watch_from_a_resource_version_streams_added_modified_deleted(kube_server, core, ns, node):
    start = core.list_namespaced_pod(ns).metadata.resource_version
    core.create_namespaced_pod(ns, pod_body("a", node=node))
    kube_server.run_pod(ns, "a")
    core.delete_namespaced_pod("a", ns, grace_period_seconds=0)
    events = events_of(watch.Watch(), core.list_namespaced_pod, ns, resource_version=start, timeout_seconds=5, count=3)
    assert [(t, o.metadata.name) for t, o in events] == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]
    assert events[1][1].status.phase == "Running"
    versions = [int(o.metadata.resource_version) for _, o in events]
    assert versions == sorted(versions) and versions[0] > int(start)


def test_watch_without_version_starts_with_the_current_objects(core, ns):
    core.create_namespaced_pod(ns, pod_body("a"))
    core.create_namespaced_pod(ns, pod_body("b"))
    events = events_of(watch.Watch(), core.list_namespaced_pod, ns, timeout_seconds=5, count=2)
    assert [(t, o.metadata.name) for t, o in events] == [("ADDED", "a"), ("ADDED", "b")]


def test_watch_streams_live_changes_to_an_open_watch(kube_server, core, ns):
    seen = []
    watcher = watch.Watch()

    def consume():
        for event in watcher.stream(core.list_namespaced_pod, ns, resource_version="1", timeout_seconds=5):
            seen.append((event["type"], event["object"].metadata.name))
            if len(seen) == 2:
                watcher.stop()

    thread = threading.Thread(target=consume)
    thread.start()
    assert kube_server.wait_for_watches(1)
    core.create_namespaced_pod(ns, pod_body("live"))
    core.delete_namespaced_pod("live", ns)
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert seen == [("ADDED", "live"), ("DELETED", "live")]


def test_watch_with_a_selector_sees_objects_enter_and_leave_it(core, ns):
    start = core.list_namespaced_pod(ns).metadata.resource_version
    core.create_namespaced_pod(ns, pod_body("a", labels={"pai.job": "j1"}))
    core.create_namespaced_pod(ns, pod_body("b", labels={"pai.job": "j2"}))
    core.patch_namespaced_pod("a", ns, {"metadata": {"labels": {"pai.job": "j2"}}}, _content_type=MERGE)
    core.patch_namespaced_pod("b", ns, {"metadata": {"labels": {"pai.job": "j1"}}}, _content_type=MERGE)
    events = events_of(watch.Watch(), core.list_namespaced_pod, ns, resource_version=start, label_selector="pai.job=j1", timeout_seconds=1)
    assert [(t, o.metadata.name) for t, o in events] == [("ADDED", "a"), ("DELETED", "a"), ("ADDED", "b")]


def test_watch_across_namespaces_and_of_nodes(kube_server, core, ns):
    start = core.list_namespaced_pod(ns).metadata.resource_version
    core.create_namespace({"metadata": {"name": "team-b"}})
    core.create_namespaced_pod("team-b", pod_body("b"))
    core.create_namespaced_pod(ns, pod_body("a"))
    kube_server.add_node("n1")
    kube_server.set_node_ready("n1", False)
    pods = events_of(watch.Watch(), core.list_pod_for_all_namespaces, resource_version=start, timeout_seconds=5, count=2)
    assert [(o.metadata.namespace, o.metadata.name) for _, o in pods] == [("team-b", "b"), ("team-a", "a")]
    nodes = events_of(watch.Watch(), core.list_node, resource_version=start, timeout_seconds=5, count=2)
    assert [t for t, _ in nodes] == ["ADDED", "MODIFIED"]
    ready = [c for c in nodes[-1][1].status.conditions if c.type == "Ready"][0]
    assert (ready.status, ready.reason) == ("False", "KubeletNotReady")


def test_watch_of_pod_events_across_namespaces(kube_server, core, ns, node):
    """What a controller keeping pods' events in memory watches: every namespace, events
    about pods only, as kubelets and controllers write them."""
    start = core.list_event_for_all_namespaces().metadata.resource_version
    core.create_namespace({"metadata": {"name": "team-b"}})
    core.create_namespaced_pod(ns, pod_body("a", node=node))
    core.create_namespaced_pod("team-b", pod_body("b", node=node))
    kube_server.run_pod("team-b", "b")
    core.create_namespaced_event(ns, {
        "metadata": {"name": "n1"}, "involvedObject": {"kind": "Node", "name": node}, "reason": "Rebooted", "message": "x",
    })
    events = events_of(watch.Watch(), core.list_event_for_all_namespaces, resource_version=start, timeout_seconds=5,
                       field_selector="involvedObject.kind=Pod", count=3)
    assert [(t, e.involved_object.namespace, e.involved_object.name, e.reason) for t, e in events] == [
        ("ADDED", "team-b", "b", "Pulled"), ("ADDED", "team-b", "b", "Created"), ("ADDED", "team-b", "b", "Started"),
    ]


def test_a_deleted_namespace_takes_its_events_out_of_the_lists_by_object(kube_server, core, ns, node):
    core.create_namespaced_pod(ns, pod_body("a", node=node))
    kube_server.run_pod(ns, "a")
    assert core.list_event_for_all_namespaces(field_selector="involvedObject.name=a").items
    core.delete_namespace(ns)
    assert core.list_event_for_all_namespaces(field_selector="involvedObject.name=a").items == []


def test_watch_timeout_ends_the_stream_and_bookmarks_are_accepted(core, ns):
    began = time.monotonic()
    events = events_of(watch.Watch(), core.list_namespaced_pod, ns, resource_version="1", timeout_seconds=1, allow_watch_bookmarks=True)
    elapsed = time.monotonic() - began
    assert events == [] and 0.9 <= elapsed < 3


def test_watch_from_a_compacted_version_gets_an_error_event_410(kube_server, core, ns):
    start = core.list_namespaced_pod(ns).metadata.resource_version
    core.create_namespaced_pod(ns, pod_body("a"))
    core.create_namespaced_pod(ns, pod_body("b"))
    kube_server.compact()
    response = core.list_namespaced_pod(ns, watch=True, resource_version=start, timeout_seconds=1, _preload_content=False)
    assert response.status == 200
    lines = [json.loads(line) for line in response.data.decode().splitlines()]
    assert len(lines) == 1 and lines[0]["type"] == "ERROR"
    assert lines[0]["object"]["kind"] == "Status" and lines[0]["object"]["code"] == 410
    assert lines[0]["object"]["reason"] == "Expired" and "too old resource version" in lines[0]["object"]["message"]
    with pytest.raises(ApiException) as exc:
        list(watch.Watch().stream(core.list_namespaced_pod, ns, resource_version=start, timeout_seconds=1))
    assert exc.value.status == 410
    current = core.list_namespaced_pod(ns).metadata.resource_version
    assert events_of(watch.Watch(), core.list_namespaced_pod, ns, resource_version=current, timeout_seconds=1) == []


def test_bounded_history_compacts_the_oldest_versions(core, ns):
    from tests.kubeserver import KubeServer

    with KubeServer(history_limit=5) as small:
        api = client.CoreV1Api(small.api_client())
        start = api.list_namespace().metadata.resource_version
        for i in range(6):
            api.create_namespace({"metadata": {"name": f"ns-{i}"}})
        with pytest.raises(ApiException) as exc:
            list(watch.Watch().stream(api.list_namespace, resource_version=start, timeout_seconds=1))
        assert exc.value.status == 410


def _watch_in_thread(core, ns, **kwargs):
    outcome = {}

    def run():
        try:
            outcome["events"] = events_of(watch.Watch(), core.list_namespaced_pod, ns, resource_version="1", **kwargs)
        except Exception as exc:  # what the client raised is the observation
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_dropped_watch_ends_the_stream_early(kube_server, core, ns):
    thread, outcome = _watch_in_thread(core, ns, timeout_seconds=30)
    assert kube_server.wait_for_watches(1)
    kube_server.drop_watches()
    thread.join(timeout=10)
    assert not thread.is_alive() and outcome == {"events": []}
    assert kube_server.wait_for_watches_closed()


def test_client_watch_resumes_after_a_drop_from_its_last_version_without_a_gap(kube_server, core, ns):
    """Without timeout_seconds the client's Watch reconnects from the last resourceVersion
    it saw, so changes made while it was away still arrive, once each."""
    seen = []
    watcher = watch.Watch()

    def consume():
        for event in watcher.stream(core.list_namespaced_pod, ns, resource_version="1"):
            seen.append((event["type"], event["object"].metadata.name))
            if event["object"].metadata.name == "last":
                watcher.stop()

    thread = threading.Thread(target=consume)
    thread.start()
    assert kube_server.wait_for_watches(1)
    core.create_namespaced_pod(ns, pod_body("before"))
    deadline = time.monotonic() + 5
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)
    kube_server.drop_watches()
    core.create_namespaced_pod(ns, pod_body("during"))
    core.create_namespaced_pod(ns, pod_body("last"))
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert seen == [("ADDED", "before"), ("ADDED", "during"), ("ADDED", "last")]
    assert kube_server.count_requests("GET", r"/namespaces/team-a/pods$") == 2


def test_abruptly_dropped_watch_breaks_the_connection(kube_server, core, ns):
    thread, outcome = _watch_in_thread(core, ns, timeout_seconds=30)
    assert kube_server.wait_for_watches(1)
    kube_server.drop_watches(abrupt=True)
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert isinstance(outcome.get("error"), (urllib3.exceptions.HTTPError, OSError))
    assert kube_server.wait_for_watches_closed()


# --------------------------------------------------------------------------- deletion
def test_unbound_pod_is_deleted_at_once(core, ns):
    core.create_namespaced_pod(ns, pod_body("a"))
    deleted = core.delete_namespaced_pod("a", ns)
    assert deleted.metadata.name == "a"
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_pod("a", ns)
    assert exc.value.status == 404


def test_bound_pod_deletion_is_graceful_until_the_kubelet_finalises_it(kube_server, core, ns, node):
    start = core.create_namespaced_pod(ns, pod_body("a", node=node)).metadata.resource_version
    kube_server.run_pod(ns, "a")
    deleted = core.delete_namespaced_pod("a", ns, grace_period_seconds=20)
    assert deleted.metadata.deletion_timestamp is not None
    assert deleted.metadata.deletion_grace_period_seconds == 20
    still = core.read_namespaced_pod("a", ns)
    assert still.status.phase == "Running" and still.metadata.deletion_timestamp is not None
    assert "Killing" in {e.reason for e in core.list_namespaced_event(ns, field_selector="involvedObject.name=a").items}
    assert kube_server.finalize_deletions() == [(ns, "a")]
    with pytest.raises(ApiException):
        core.read_namespaced_pod("a", ns)
    events = events_of(watch.Watch(), core.list_namespaced_pod, ns, resource_version=start, timeout_seconds=5, count=4)
    assert [t for t, _ in events] == ["MODIFIED", "MODIFIED", "MODIFIED", "DELETED"]
    terminated = events[2][1].status.container_statuses[0].state.terminated
    assert (events[2][1].status.phase, terminated.exit_code) == ("Failed", 143)


def test_grace_zero_and_terminal_pods_are_deleted_at_once(kube_server, core, ns, node):
    core.create_namespaced_pod(ns, pod_body("a", node=node))
    core.create_namespaced_pod(ns, pod_body("b", node=node))
    kube_server.run_pod(ns, "b")
    kube_server.finish_pod(ns, "b", 0)
    core.delete_namespaced_pod("a", ns, body=client.V1DeleteOptions(grace_period_seconds=0))
    core.delete_namespaced_pod("b", ns)
    assert core.list_namespaced_pod(ns).items == []


def test_delete_with_a_uid_precondition(core, ns):
    pod = core.create_namespaced_pod(ns, pod_body("a"))
    with pytest.raises(ApiException) as exc:
        core.delete_namespaced_pod("a", ns, body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="other-uid")))
    assert exc.value.status == 409 and "Precondition failed: UID in precondition: other-uid" in status_of(exc.value)["message"]
    core.delete_namespaced_pod("a", ns, body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=pod.metadata.uid)))
    assert core.list_namespaced_pod(ns).items == []


def test_delete_collection_by_label(core, ns):
    core.create_namespaced_pod(ns, pod_body("a", labels={"pai.job": "j"}))
    core.create_namespaced_pod(ns, pod_body("b", labels={"pai.job": "k"}))
    core.delete_collection_namespaced_pod(ns, label_selector="pai.job=j")
    assert [p.metadata.name for p in core.list_namespaced_pod(ns).items] == ["b"]


def test_namespace_deletion_removes_its_contents(core, ns):
    core.create_namespaced_pod(ns, pod_body("a"))
    gone_ns = core.delete_namespace(ns)
    assert gone_ns["status"]["phase"] == "Terminating"
    assert core.list_pod_for_all_namespaces().items == []
    assert ns not in [n.metadata.name for n in core.list_namespace().items]


def _owned_secret(name, owner, **meta):
    ref = {"apiVersion": "v1", "kind": "Pod", "name": owner.metadata.name, "uid": owner.metadata.uid}
    return {"metadata": {"name": name, "ownerReferences": [ref], **meta}, "data": {"k": "dg=="}}


def _secret_names(core, ns):
    return [s.metadata.name for s in core.list_namespaced_secret(ns).items]


def test_the_garbage_collector_deletes_what_a_removed_owner_owned(kube_server, core, ns, node):
    owner = core.create_namespaced_pod(ns, pod_body("a", node=node))
    other = core.create_namespaced_pod(ns, pod_body("b"))
    core.create_namespaced_secret(ns, _owned_secret("a-files", owner))
    both = _owned_secret("shared", owner)
    both["metadata"]["ownerReferences"].append({"apiVersion": "v1", "kind": "Pod", "name": "b", "uid": other.metadata.uid})
    core.create_namespaced_secret(ns, both)
    core.create_namespaced_secret(ns, {"metadata": {"name": "unowned"}, "data": {}})
    kube_server.run_pod(ns, "a")
    core.delete_namespaced_pod("a", ns)
    # While the owner terminates gracefully, it is still there: so are its dependents.
    assert _secret_names(core, ns) == ["a-files", "shared", "unowned"]
    kube_server.finalize_deletions()
    assert _secret_names(core, ns) == ["shared", "unowned"]
    # A dependent that keeps an owner only loses the reference to the gone one.
    assert [r.name for r in core.read_namespaced_secret("shared", ns).metadata.owner_references] == ["b"]
    core.delete_namespaced_pod("b", ns)
    assert _secret_names(core, ns) == ["unowned"]


def test_an_object_created_with_only_gone_owners_is_collected(core, ns):
    pod = core.create_namespaced_pod(ns, pod_body("a"))
    core.delete_namespaced_pod("a", ns)
    created = core.create_namespaced_secret(ns, _owned_secret("late", pod))
    assert created.metadata.name == "late"
    assert _secret_names(core, ns) == []
    # The same name with another uid is not the owner either.
    core.create_namespaced_pod(ns, pod_body("a"))
    core.create_namespaced_secret(ns, _owned_secret("late", pod))
    assert _secret_names(core, ns) == []


@pytest.mark.parametrize(
    "change, field",
    [
        ({"uid": ""}, "metadata.ownerReferences.uid"),
        ({"kind": ""}, "metadata.ownerReferences.kind"),
        ({"apiVersion": "apps/"}, "metadata.ownerReferences.apiVersion"),
    ],
)
def test_owner_references_need_api_version_kind_name_and_uid(core, ns, change, field):
    pod = core.create_namespaced_pod(ns, pod_body("a"))
    body = _owned_secret("s", pod)
    body["metadata"]["ownerReferences"][0].update(change)
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_secret(ns, body)
    assert exc.value.status == 422
    assert [c["field"] for c in status_of(exc.value)["details"]["causes"]] == [field]


def test_a_pod_with_a_missing_secret_volume_waits_for_the_secret(kube_server, core, ns, node):
    volume = {"name": "files", "secret": {"secretName": "a-files", "defaultMode": 0o400}}
    container = {"name": "main", "image": "busybox:1.36", "volumeMounts": [{"name": "files", "mountPath": "/s", "readOnly": True}]}
    core.create_namespaced_pod(ns, pod_body("a", node=node, containers=[container], volumes=[volume]))
    assert kube_server.run_pod(ns, "a") is None
    assert core.read_namespaced_pod("a", ns).status.phase == "Pending"
    [event] = core.list_namespaced_event(ns, field_selector="involvedObject.name=a,reason=FailedMount").items
    assert event.type == "Warning" and 'secret "a-files" not found' in event.message
    core.create_namespaced_secret(ns, {"metadata": {"name": "a-files"}, "data": {"k": "dg=="}})
    assert kube_server.run_pod(ns, "a") is not None
    assert core.read_namespaced_pod("a", ns).status.phase == "Running"
    bad = dict(volume, secret={"secretName": "a-files", "defaultMode": 0o1000})
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(ns, pod_body("b", containers=[container], volumes=[bad]))
    assert [c["field"] for c in status_of(exc.value)["details"]["causes"]] == ["spec.volumes[0].secret.defaultMode"]


# --------------------------------------------------------------------------- binding
def test_binding_sets_the_node_and_answers_a_status(kube_server, core, ns, node):
    core.create_namespaced_pod(ns, pod_body("a"))
    body = client.V1Binding(metadata=client.V1ObjectMeta(name="a"), target=client.V1ObjectReference(kind="Node", name=node))
    response = core.create_namespaced_binding(ns, body, _preload_content=False)
    assert response.status == 201
    reply = json.loads(response.data)
    assert reply["kind"] == "Status" and reply["status"] == "Success"
    pod = core.read_namespaced_pod("a", ns)
    assert pod.spec.node_name == node
    assert any(c.type == "PodScheduled" and c.status == "True" for c in pod.status.conditions)
    # The API server writes no event for a binding: kube-scheduler writes "Scheduled".
    assert core.list_namespaced_event(ns, field_selector="involvedObject.name=a").items == []
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod_binding("a", ns, body, _preload_content=False)
    assert exc.value.status == 409 and "already assigned to node" in status_of(exc.value)["message"]


def test_binding_reply_does_not_deserialise_into_a_binding(core, ns, node):
    """The real server's reply is a Status; the client expects a V1Binding and fails, which
    is why callers must pass `_preload_content=False`."""
    core.create_namespaced_pod(ns, pod_body("a"))
    body = client.V1Binding(metadata=client.V1ObjectMeta(name="a"), target=client.V1ObjectReference(kind="Node", name=node))
    with pytest.raises(Exception) as exc:
        core.create_namespaced_binding(ns, body)
    assert not isinstance(exc.value, ApiException)
    assert core.read_namespaced_pod("a", ns).spec.node_name == node


# --------------------------------------------------------------------------- logs
def test_pod_log_serves_the_hook_text_with_tail_and_container(kube_server, core, ns, node):
    containers = [{"name": "main", "image": "x"}, {"name": "sidecar", "image": "y"}]
    core.create_namespaced_pod(ns, pod_body("a", node=node, containers=containers))
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_pod_log("a", ns, container="main")
    assert exc.value.status == 400 and "is waiting to start: ContainerCreating" in status_of(exc.value)["message"]
    kube_server.run_pod(ns, "a")
    kube_server.set_pod_log(ns, "a", "one\ntwo\nthree\n", container="main")
    kube_server.set_pod_log(ns, "a", "side\n", container="sidecar")
    assert core.read_namespaced_pod_log("a", ns, container="main") == "one\ntwo\nthree\n"
    assert core.read_namespaced_pod_log("a", ns, container="main", tail_lines=2) == "two\nthree\n"
    assert core.read_namespaced_pod_log("a", ns, container="sidecar") == "side\n"
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_pod_log("a", ns)
    assert exc.value.status == 400 and "a container name must be specified" in status_of(exc.value)["message"]
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_pod_log("a", ns, container="nope")
    assert exc.value.status == 400
    kube_server.finish_pod(ns, "a", 1)
    assert core.read_namespaced_pod_log("a", ns, container="main", tail_lines=1) == "three\n"


# --------------------------------------------------------------------------- quota admission
def test_quota_admission_counts_pods_and_gpus_of_non_terminal_pods(kube_server, core, ns, node):
    core.create_namespaced_resource_quota(
        ns, {"metadata": {"name": "pai-quota"}, "spec": {"hard": {"pods": "3", "requests.nvidia.com/gpu": "4"}}}
    )
    core.create_namespaced_pod(ns, pod_body("a", node=node, gpus=3))
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(ns, pod_body("b", node=node, gpus=2))
    assert exc.value.status == 403
    status = status_of(exc.value)
    assert status["reason"] == "Forbidden"
    assert status["message"] == (
        'pods "b" is forbidden: exceeded quota: pai-quota, requested: requests.nvidia.com/gpu=2, '
        "used: requests.nvidia.com/gpu=3, limited: requests.nvidia.com/gpu=4"
    )
    core.create_namespaced_pod(ns, pod_body("b", node=node, gpus=1))
    quota = core.read_namespaced_resource_quota("pai-quota", ns)
    assert quota.status.used == {"pods": "2", "requests.nvidia.com/gpu": "4"}
    assert quota.status.hard == {"pods": "3", "requests.nvidia.com/gpu": "4"}
    kube_server.run_pod(ns, "a")
    kube_server.finish_pod(ns, "a", 0)
    core.create_namespaced_pod(ns, pod_body("c", node=node, gpus=3))
    core.create_namespaced_pod(ns, pod_body("d"))
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(ns, pod_body("e"))
    assert exc.value.status == 403 and "exceeded quota: pai-quota, requested: pods=1, used: pods=3, limited: pods=3" in status_of(exc.value)["message"]


def test_quota_on_limits_and_cpu_requires_them_to_be_specified(core, ns):
    core.create_namespaced_resource_quota(
        ns, {"metadata": {"name": "q"}, "spec": {"hard": {"limits.nvidia.com/gpu": "1", "requests.cpu": "2"}}}
    )
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(ns, pod_body("a", gpus=1))
    assert exc.value.status == 403 and "failed quota: q: must specify requests.cpu for: main" in status_of(exc.value)["message"]
    sized = [{"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "1500m"}}}]
    core.create_namespaced_pod(ns, pod_body("a", containers=sized))
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(ns, pod_body("b", containers=sized))
    assert "requested: limits.nvidia.com/gpu=1,requests.cpu=1500m, used: limits.nvidia.com/gpu=1,requests.cpu=1500m" in status_of(exc.value)["message"]


def test_a_quota_scoped_to_priority_classes_counts_only_their_pods(kube_server, core, ns, node):
    scope = {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}
    core.create_namespaced_resource_quota(
        ns, {"metadata": {"name": "q"}, "spec": {"hard": {"requests.nvidia.com/gpu": "2"}, "scopeSelector": scope}}
    )
    for name in ("high", "low"):
        kube_server.create_object("priorityclasses", {"metadata": {"name": name}, "value": 10 if name == "high" else 1})

    def prioritised(name, priority, gpus):
        body = pod_body(name, node=node, gpus=gpus)
        body["spec"]["priorityClassName"] = priority
        return body

    core.create_namespaced_pod(ns, prioritised("a", "high", 2))
    core.create_namespaced_pod(ns, prioritised("b", "low", 4))  # outside the scope
    core.create_namespaced_pod(ns, pod_body("c", node=node, gpus=1))  # no class: outside too
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(ns, prioritised("d", "high", 1))
    assert exc.value.status == 403 and "exceeded quota: q" in status_of(exc.value)["message"]
    assert core.read_namespaced_resource_quota("q", ns).status.used == {"requests.nvidia.com/gpu": "2"}
    # The totals follow pods ending and going: a terminal pod no longer counts.
    kube_server.run_pod(ns, "a")
    kube_server.finish_pod(ns, "a", 0)
    assert core.read_namespaced_resource_quota("q", ns).status.used == {"requests.nvidia.com/gpu": "0"}
    core.create_namespaced_pod(ns, prioritised("d", "high", 2))
    core.delete_namespaced_pod("d", ns, grace_period_seconds=0)
    core.create_namespaced_pod(ns, prioritised("e", "high", 2))
    assert core.read_namespaced_resource_quota("q", ns).status.used == {"requests.nvidia.com/gpu": "2"}


def test_resource_quota_update_and_patch(core, ns):
    quota = core.create_namespaced_resource_quota(ns, {"metadata": {"name": "q"}, "spec": {"hard": {"pods": "1"}}})
    quota.spec.hard = {"pods": "5"}
    assert core.replace_namespaced_resource_quota("q", ns, quota).status.hard == {"pods": "5"}
    patched = core.patch_namespaced_resource_quota("q", ns, {"spec": {"hard": {"requests.nvidia.com/gpu": "8"}}})
    assert patched.spec.hard == {"pods": "5", "requests.nvidia.com/gpu": "8"}


# --------------------------------------------------------------------------- kubelet and node hooks
def test_run_pod_reports_running_containers_and_an_ip(kube_server, core, ns, node):
    core.create_namespaced_pod(ns, pod_body("a", node=node))
    kube_server.run_pod(ns, "a")
    pod = core.read_namespaced_pod("a", ns)
    assert pod.status.phase == "Running" and pod.status.pod_ip and pod.status.host_ip
    status = pod.status.container_statuses[0]
    assert status.ready and status.state.running.started_at is not None
    assert {c.type: c.status for c in pod.status.conditions}["Ready"] == "True"
    core.create_namespaced_pod(ns, pod_body("unbound"))
    with pytest.raises(ValueError):
        kube_server.run_pod(ns, "unbound")


@pytest.mark.parametrize(
    "exit_code, reason, phase, container_reason, pod_reason",
    [
        (0, None, "Succeeded", "Completed", None),
        (1, None, "Failed", "Error", None),
        (137, "OOMKilled", "Failed", "OOMKilled", None),
        (137, "Evicted", "Failed", "Error", "Evicted"),
        (0, "DeadlineExceeded", "Failed", "Completed", "DeadlineExceeded"),
        (0, "NodeLost", "Failed", "Completed", "NodeLost"),
    ],
)
def test_finish_pod_sets_phase_exit_code_and_reasons(kube_server, core, ns, node, exit_code, reason, phase, container_reason, pod_reason):
    core.create_namespaced_pod(ns, pod_body("a", node=node))
    kube_server.run_pod(ns, "a")
    kube_server.finish_pod(ns, "a", exit_code, reason=reason)
    pod = core.read_namespaced_pod("a", ns)
    terminated = pod.status.container_statuses[0].state.terminated
    assert (pod.status.phase, terminated.exit_code, terminated.reason, pod.status.reason) == (phase, exit_code, container_reason, pod_reason)
    conditions = {c.type: c.status for c in pod.status.conditions}
    assert conditions["Ready"] == "False"
    assert ("DisruptionTarget" in conditions) == (pod_reason == "Evicted")
    if pod_reason in {"Evicted", "DeadlineExceeded"}:
        warnings = core.list_namespaced_event(ns, field_selector=f"involvedObject.name=a,reason={pod_reason}").items
        assert warnings and warnings[0].type == "Warning"


def test_image_pull_failure_leaves_the_pod_pending_with_a_waiting_reason(kube_server, core, ns, node):
    core.create_namespaced_pod(ns, pod_body("a", node=node))
    kube_server.wait_image_pull(ns, "a", "ImagePullBackOff")
    pod = core.read_namespaced_pod("a", ns)
    assert pod.status.phase == "Pending"
    assert pod.status.container_statuses[0].state.waiting.reason == "ImagePullBackOff"


def test_node_hooks_capacity_labels_ready_and_unschedulable(kube_server, core):
    kube_server.add_node("n1", gpus=4, labels={"pai.sku": "V100"}, extra_resources={"rdma/hca": "1"})
    kube_server.add_nodes(3, prefix="bulk-", gpus=8)
    nodes = {n.metadata.name: n for n in core.list_node().items}
    assert sorted(nodes) == ["bulk-0", "bulk-1", "bulk-2", "n1"]
    n1 = nodes["n1"]
    assert n1.status.allocatable["nvidia.com/gpu"] == "4" and n1.status.capacity["rdma/hca"] == "1"
    assert n1.metadata.labels["pai.sku"] == "V100"
    assert [(c.type, c.status) for c in n1.status.conditions] == [("Ready", "True")]
    kube_server.set_node_ready("n1", status="Unknown")
    kube_server.set_node_unschedulable("n1")
    n1 = core.read_node("n1")
    assert [(c.type, c.status, c.reason) for c in n1.status.conditions] == [("Ready", "Unknown", "NodeStatusUnknown")]
    assert n1.spec.unschedulable is True
    assert [n.metadata.name for n in core.list_node(field_selector="spec.unschedulable=true").items] == ["n1"]
    kube_server.update_node("bulk-1", labels={"pai.sku": "A100", "kubernetes.io/os": None}, allocatable={"nvidia.com/gpu": 7})
    bulk = core.read_node("bulk-1")
    assert bulk.metadata.labels.get("pai.sku") == "A100" and "kubernetes.io/os" not in bulk.metadata.labels
    assert (bulk.status.allocatable["nvidia.com/gpu"], bulk.status.capacity["nvidia.com/gpu"]) == ("7", "8")
    kube_server.delete_node("bulk-0")
    assert len(core.list_node(label_selector="kubernetes.io/os=linux").items) == 2


# --------------------------------------------------------------------------- other kinds
def test_priority_classes_crud_and_validation(kube_server):
    scheduling = client.SchedulingV1Api(kube_server.api_client())
    created = scheduling.create_priority_class({"metadata": {"name": "pai-prod"}, "value": 1000, "description": "prod"})
    assert created.preemption_policy == "PreemptLowerPriority" and created.api_version == "scheduling.k8s.io/v1"
    with pytest.raises(ApiException) as exc:
        scheduling.create_priority_class({"metadata": {"name": "pai-prod"}, "value": 1000})
    assert exc.value.status == 409 and status_of(exc.value)["message"] == 'priorityclasses.scheduling.k8s.io "pai-prod" already exists'
    for bad in ({"metadata": {"name": "system-x"}, "value": 1}, {"metadata": {"name": "huge"}, "value": 2_000_000_000}):
        with pytest.raises(ApiException) as exc:
            scheduling.create_priority_class(bad)
        assert exc.value.status == 422
    assert [p.metadata.name for p in scheduling.list_priority_class().items] == ["pai-prod"]
    assert scheduling.read_priority_class("pai-prod").value == 1000
    scheduling.delete_priority_class("pai-prod")
    with pytest.raises(ApiException) as exc:
        scheduling.read_priority_class("pai-prod")
    assert exc.value.status == 404


def test_pod_priority_comes_from_its_priority_class(kube_server, core, ns):
    scheduling = client.SchedulingV1Api(kube_server.api_client())
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(ns, pod_body("a", priorityClassName="pai-high"))
    assert exc.value.status == 403
    assert status_of(exc.value)["message"] == 'pods "a" is forbidden: no PriorityClass with name pai-high was found'
    scheduling.create_priority_class({"metadata": {"name": "pai-high"}, "value": 1000, "preemptionPolicy": "Never"})
    pod = core.create_namespaced_pod(ns, pod_body("a", priorityClassName="pai-high"))
    assert (pod.spec.priority, pod.spec.preemption_policy) == (1000, "Never")
    assert core.create_namespaced_pod(ns, pod_body("b")).spec.priority == 0
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(ns, pod_body("c", priorityClassName="pai-high", priority=5))
    assert exc.value.status == 403 and "must not be provided in pod spec" in status_of(exc.value)["message"]
    scheduling.create_priority_class({"metadata": {"name": "pai-default"}, "value": 10, "globalDefault": True})
    pod = core.create_namespaced_pod(ns, pod_body("d"))
    assert (pod.spec.priority, pod.spec.priority_class_name) == (10, "pai-default")


def test_events_created_through_the_api_and_listed(core, ns):
    core.create_namespaced_event(ns, {
        "metadata": {"name": "e1"}, "involvedObject": {"kind": "Pod", "name": "a", "namespace": ns},
        "reason": "Preempted", "message": "by job x", "type": "Warning", "source": {"component": "pai"},
    })
    events = core.list_namespaced_event(ns, field_selector="source=pai,type=Warning").items
    assert [(e.metadata.name, e.reason, e.count) for e in events] == [("e1", "Preempted", 1)]


def test_image_pull_secrets(core, ns):
    config = base64.b64encode(json.dumps({"auths": {"registry.example.org": {"auth": "dTpw"}}}).encode()).decode()
    created = core.create_namespaced_secret(ns, {
        "metadata": {"name": "pai-job-1-registry", "labels": {"pai.job": "job-1"}},
        "type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": config},
    })
    assert created.type == "kubernetes.io/dockerconfigjson"
    assert [s.metadata.name for s in core.list_namespaced_secret(ns, label_selector="pai.job=job-1").items] == ["pai-job-1-registry"]
    plain = core.create_namespaced_secret(ns, {"metadata": {"name": "plain"}, "stringData": {"token": "abc"}})
    assert (plain.type, plain.data) == ("Opaque", {"token": base64.b64encode(b"abc").decode()})
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_secret(ns, {"metadata": {"name": "bad"}, "type": "kubernetes.io/dockerconfigjson", "data": {}})
    assert exc.value.status == 422
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_secret(ns, {"metadata": {"name": "bad"}, "data": {"k": "not base64!"}})
    assert exc.value.status == 400
    for key, message in (("..", "must not be '..'"), ("..data", "must not start with '..'"), ("a b", "a valid config key")):
        with pytest.raises(ApiException) as exc:
            core.create_namespaced_secret(ns, {"metadata": {"name": "bad"}, "data": {key: "dg=="}})
        assert exc.value.status == 422 and message in status_of(exc.value)["message"]
    core.delete_namespaced_secret("plain", ns)
    assert [s.metadata.name for s in core.list_namespaced_secret(ns).items] == ["pai-job-1-registry"]


def test_persistent_volume_claims(kube_server, core, ns):
    kube_server.add_pvc(ns, "team-a-data", storage="100Gi")
    claims = core.list_namespaced_persistent_volume_claim(ns).items
    assert [(c.metadata.name, c.status.phase) for c in claims] == [("team-a-data", "Bound")]
    assert core.read_namespaced_persistent_volume_claim("team-a-data", ns).status.capacity == {"storage": "100Gi"}
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_persistent_volume_claim("missing", ns)
    assert exc.value.status == 404


# --------------------------------------------------------------------------- faults
def test_injected_500s_fail_the_next_matching_requests_only(kube_server, core, ns):
    kube_server.inject_fault("POST", r"/pods$", status=500, count=2)
    for _ in range(2):
        with pytest.raises(ApiException) as exc:
            core.create_namespaced_pod(ns, pod_body("a"))
        assert exc.value.status == 500 and status_of(exc.value)["reason"] == "InternalError"
    core.list_namespaced_pod(ns)
    assert core.create_namespaced_pod(ns, pod_body("a")).metadata.name == "a"
    assert kube_server.count_requests("POST", r"/pods$") == 3


def test_injected_429_carries_retry_after(kube_server, core, ns):
    kube_server.inject_fault("POST", r"/namespaces/team-a/pods$", status=429, retry_after=2)
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(ns, pod_body("a"))
    assert exc.value.status == 429 and exc.value.headers["Retry-After"] == "2"
    assert status_of(exc.value)["details"]["retryAfterSeconds"] == 2
    assert core.create_namespaced_pod(ns, pod_body("a")).metadata.name == "a"


def test_client_retries_an_idempotent_429_by_itself(kube_server, core, ns):
    """urllib3's default Retry honours Retry-After on 429/503 for GET, PUT and DELETE, so
    the backend sees such a fault only on POST/PATCH or with `retries=False`."""
    kube_server.inject_fault("GET", r"/namespaces/team-a/pods$", status=429, retry_after=0)
    assert core.list_namespaced_pod(ns).items == []
    assert kube_server.count_requests("GET", r"/namespaces/team-a/pods$") == 2
    strict = client.CoreV1Api(kube_server.api_client(retries=False))
    kube_server.inject_fault("GET", r"/namespaces/team-a/pods$", status=429, retry_after=0)
    with pytest.raises(ApiException) as exc:
        strict.list_namespaced_pod(ns)
    assert exc.value.status == 429


def test_committed_fault_creates_the_object_but_loses_the_reply(kube_server, core, ns):
    kube_server.inject_fault("POST", r"/pods$", status=500, commit=True)
    with pytest.raises(ApiException):
        core.create_namespaced_pod(ns, pod_body("a"))
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(ns, pod_body("a"))
    assert exc.value.status == 409
    assert [p.metadata.name for p in core.list_namespaced_pod(ns).items] == ["a"]


def test_an_outage_starts_after_some_requests_and_lasts_its_time_whatever_the_count(kube_server, ns):
    strict = client.CoreV1Api(kube_server.api_client(retries=False))
    kube_server.inject_fault("*", r"/namespaces/team-a/pods$", status=503, after=2, seconds=0.3)
    strict.list_namespaced_pod(ns)
    strict.create_namespaced_pod(ns, pod_body("a"))
    began = time.monotonic()
    failures = 0
    while time.monotonic() - began < 0.2:
        with pytest.raises(ApiException) as exc:
            strict.list_namespaced_pod(ns)
        assert exc.value.status == 503 and status_of(exc.value)["reason"] == "ServiceUnavailable"
        failures += 1
    assert failures > 3
    time.sleep(0.15)
    assert [p.metadata.name for p in strict.list_namespaced_pod(ns).items] == ["a"]
    assert kube_server.count_requests(status=503) == failures


def test_an_outage_fails_every_request_for_its_time_and_cuts_the_watches(kube_server, ns):
    strict = client.CoreV1Api(kube_server.api_client(retries=False))
    stream = strict.list_namespaced_pod(ns, watch=True, _preload_content=False)
    kube_server.wait_for_watches(1)
    kube_server.inject_outage(0.3, method="POST", path_regex=r"/pods$", after=1)
    strict.create_namespaced_pod(ns, pod_body("a"))
    with pytest.raises(ApiException) as exc:
        strict.create_namespaced_pod(ns, pod_body("b"))
    assert exc.value.status == 503
    with pytest.raises(urllib3.exceptions.ProtocolError):
        for _ in stream.stream():
            pass
    for call in (strict.list_namespaced_pod, strict.read_namespace):
        with pytest.raises(ApiException) as exc:
            call(ns)
        assert exc.value.status == 503
    time.sleep(0.35)
    assert [p.metadata.name for p in strict.list_namespaced_pod(ns).items] == ["a"]


def test_latency_delays_answers_without_failing_them(kube_server, core, ns):
    kube_server.inject_latency("POST", r"/pods$", 0.2, count=1)
    began = time.monotonic()
    core.create_namespaced_pod(ns, pod_body("a"))
    assert time.monotonic() - began >= 0.2
    began = time.monotonic()
    core.create_namespaced_pod(ns, pod_body("b"))
    assert time.monotonic() - began < 0.2


def test_requests_are_recorded_with_the_clients_user_agent(kube_server, ns):
    api_client = kube_server.api_client()
    api_client.user_agent = "pai-worker (test; pid 1)"
    client.CoreV1Api(api_client).create_namespaced_pod(ns, pod_body("a"))
    assert kube_server.count_requests("POST", r"/pods$", agent="pid 1", status=201) == 1
    assert kube_server.count_requests("POST", r"/pods$", agent="pid 2") == 0


def test_hanging_request_times_out_the_client(kube_server, ns):
    core = client.CoreV1Api(kube_server.api_client(retries=False))
    kube_server.inject_fault("POST", r"/pods$", hang=2)
    began = time.monotonic()
    with pytest.raises(urllib3.exceptions.HTTPError):
        core.create_namespaced_pod(ns, pod_body("a"), _request_timeout=0.2)
    assert time.monotonic() - began < 1.5
    assert core.list_namespaced_pod(ns).items == []
    kube_server.clear_faults()


# --------------------------------------------------------------------------- RBAC bookkeeping
def test_api_calls_record_what_rbac_would_check(kube_server, core, ns, node):
    core.create_namespaced_pod(ns, pod_body("a"))
    core.read_namespaced_pod("a", ns)
    core.list_pod_for_all_namespaces()
    events_of(watch.Watch(), core.list_namespaced_pod, ns, count=1, timeout_seconds=5)
    core.patch_namespaced_pod("a", ns, {"metadata": {"labels": {"x": "1"}}})
    core.patch_namespaced_pod_status("a", ns, {"status": {"phase": "Pending"}})
    body = client.V1Binding(metadata=client.V1ObjectMeta(name="a"), target=client.V1ObjectReference(kind="Node", name=node))
    core.create_namespaced_pod_binding("a", ns, body, _preload_content=False)
    with pytest.raises(ApiException):
        core.read_namespaced_pod_log("a", ns)
    core.delete_collection_namespaced_pod(ns)
    client.SchedulingV1Api(kube_server.api_client()).list_priority_class()
    client.VersionApi(kube_server.api_client()).get_code()
    assert kube_server.api_calls() == {
        ("", "namespaces", "create"),
        ("", "pods", "create"), ("", "pods", "get"), ("", "pods", "list"), ("", "pods", "watch"),
        ("", "pods", "patch"), ("", "pods/status", "patch"), ("", "pods/binding", "create"),
        ("", "pods/log", "get"), ("", "pods", "deletecollection"), ("scheduling.k8s.io", "priorityclasses", "list"),
    }


# --------------------------------------------------------------------------- in-process hooks
def test_in_process_reads_and_writes_match_the_api(kube_server, core, ns, node):
    created = kube_server.create_object("pods", pod_body("a", node=node), namespace=ns)
    assert created["kind"] == "Pod" and created["status"]["phase"] == "Pending"
    assert core.read_namespaced_pod("a", ns).metadata.uid == created["metadata"]["uid"]
    with pytest.raises(ApiError) as exc:
        kube_server.create_object("pods", pod_body("a"), namespace=ns)
    assert (exc.value.code, exc.value.reason) == (409, "AlreadyExists")
    assert int(created["metadata"]["resourceVersion"]) == kube_server.resource_version
    kube_server.record_event(ns, "a", "BackOff", "Back-off pulling image", event_type="Warning")
    events = core.list_namespaced_event(ns, field_selector="reason=BackOff").items
    assert [(e.type, e.involved_object.uid, e.source.component) for e in events] == [("Warning", created["metadata"]["uid"], "kubelet")]
    copy_of_pod = kube_server.get_object("pods", "a", namespace=ns)
    copy_of_pod["metadata"]["labels"] = {"changed": "locally"}
    assert kube_server.get_object("pods", "a", namespace=ns)["metadata"]["labels"] == {}
    assert kube_server.get_object("pods", "missing", namespace=ns) is None
    assert [n["metadata"]["name"] for n in kube_server.list_objects("nodes")] == [node]
    assert [p["metadata"]["name"] for p in kube_server.list_objects("pods", namespace=ns)] == ["a"]
    assert kube_server.list_objects("pods", namespace="default") == []


def test_a_pod_waits_for_its_claims_and_a_wait_for_first_consumer_claim_is_bound_on_its_selected_node(kube_server):
    api = client.CoreV1Api(kube_server.api_client())
    kube_server.add_node("node-a")
    kube_server.add_node("node-b")
    kube_server.add_storage_class("local", binding_mode="WaitForFirstConsumer")
    sc = client.StorageV1Api(kube_server.api_client()).read_storage_class("local")
    assert sc.volume_binding_mode == "WaitForFirstConsumer"
    kube_server.add_pvc("default", "late", phase="Pending", storage_class="local")

    def pod(name):
        return {"metadata": {"name": name}, "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "x"}],
                "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "late"}}]}}

    kube_server.create_object("pods", pod("p"), namespace="default")
    # No node selected for the claim: no volume, the pod cannot start.
    assert kube_server.run_pod("default", "p") is None
    events = api.list_namespaced_event("default", field_selector="involvedObject.name=p").items
    assert [e.reason for e in events] == ["FailedMount"] and "late" in events[0].message
    # Selected for another node: still no volume for this pod.
    api.patch_namespaced_persistent_volume_claim(
        "late", "default", {"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "node-b"}}},
        _content_type="application/merge-patch+json")
    assert kube_server.run_pod("default", "p") is None
    api.patch_namespaced_persistent_volume_claim(
        "late", "default", {"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "node-a"}}},
        _content_type="application/merge-patch+json")
    assert kube_server.run_pod("default", "p") is not None
    claim = api.read_namespaced_persistent_volume_claim("late", "default")
    assert claim.status.phase == "Bound" and claim.spec.volume_name
