"""The Kubernetes backend against the API test server: pods, namespaces, inventory, feed, errors."""

import base64
import json
from pathlib import Path

import pytest
import yaml

from scheduler.backends import (
    ClusterUnavailableError,
    CursorExpiredError,
    ImagePullAuth,
    PermanentCreationError,
    PodNotFoundError,
    PodSpec,
    PortRequest,
    StorageMount,
    TransientCreationError,
    pod_labels,
    pod_name,
)
from scheduler.backends.kubernetes import API_CALLS, PodOptions, TokenBucket
from scheduler.backends.kubernetes.config import ConnectionFormatError, parse

from .conftest import eventually, make_backend

CHART_VERBS = Path(__file__).resolve().parents[2] / "helm" / "pai" / "rbac-verbs.yaml"


def spec(index=0, node="gpu-node-1", namespace="pai-team-x", **kwargs):
    return PodSpec(
        name=pod_name("pai-7-1", "worker", index, 0, 0),
        node=node,
        commands="echo hi",
        namespace=namespace,
        labels=pod_labels("pai-7-1", "worker", index, 0, 0),
        **kwargs,
    )


def quota_for(hard):
    return lambda namespace: hard if namespace.startswith("pai-") else None


def test_creation_makes_the_namespace_quota_priority_class_and_pull_secret(kube_server):
    hard = {"requests.nvidia.com/gpu": "2", "requests.cpu": "4", "requests.memory": "8Gi"}
    kube_server.add_node("gpu-node-1", gpus=8)
    backend = make_backend(kube_server, namespace_quota=quota_for(hard))
    try:
        auth = ImagePullAuth(username="u", password="p", registry="registry.example.com")
        created = backend.create_pod(spec(0, devices=(0, 1), gpu=2, priority_class="prod", image="registry.example.com/x:1",
                                          image_pull_auth=auth, cpu=1, memory_mb=1024))
        namespace = kube_server.get_object("namespaces", "pai-team-x")
        assert namespace["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "pai"
        quota = kube_server.get_object("resourcequotas", "pai-virtual-clusters", "pai-team-x")
        assert quota["spec"]["hard"] == hard
        # Only guaranteed pods count against the tenant's virtual clusters.
        assert quota["spec"]["scopeSelector"]["matchExpressions"][0]["values"] == ["pai-prod", "pai-test"]
        assert kube_server.get_object("priorityclasses", "pai-prod")["value"] == 100
        pod = kube_server.get_object("pods", created.name, "pai-team-x")
        [secret_ref] = pod["spec"]["imagePullSecrets"]
        secret = kube_server.get_object("secrets", secret_ref["name"], "pai-team-x")
        config = json.loads(base64.b64decode(secret["data"][".dockerconfigjson"]))
        assert config["auths"]["registry.example.com"]["username"] == "u"
        # Over quota: refused for now, not forever.
        with pytest.raises(TransientCreationError, match="exceeded quota"):
            backend.create_pod(spec(1, devices=(2,), gpu=1, priority_class="prod", cpu=1, memory_mb=1024))
        # Opportunistic pods are outside the quota's scope.
        backend.create_pod(spec(2, devices=(2, 3), gpu=2, priority_class="oppo", cpu=1, memory_mb=1024))
        # A changed quota is applied when the namespace is looked at again.
        backend.quota_refresh_seconds = 0
        hard["requests.nvidia.com/gpu"] = "3"
        backend.create_pod(spec(1, devices=(2,), gpu=1, priority_class="prod", cpu=1, memory_mb=1024))
        assert kube_server.get_object("resourcequotas", "pai-virtual-clusters", "pai-team-x")["spec"]["hard"]["requests.nvidia.com/gpu"] == "3"
    finally:
        backend.close()


def test_the_pod_carries_storage_ports_shm_and_optionally_assigned_devices(kube_server):
    kube_server.add_node("gpu-node-1", gpus=4)
    kube_server.create_object("namespaces", {"metadata": {"name": "pai-team-x"}})
    kube_server.add_pvc("pai-team-x", "shared")
    backend = make_backend(kube_server, pod_options=PodOptions(assign_devices=True))
    try:
        mounts = (
            StorageMount(name="data", claim="shared", mount_path="/data", sub_path="users/alice", read_only=True),
            StorageMount(name="scratch", claim="scratch", mount_path="/scratch", host_path="/srv/scratch/alice"),
        )
        created = backend.create_pod(spec(0, devices=(1, 3), gpu=2, storage_mounts=mounts, shm_mb=2048,
                                          ports=(PortRequest("http", (20001, 20002)),), env={"PAI_X": "1"},
                                          working_dir="/work", grace_seconds=12.5))
        pod = kube_server.get_object("pods", created.name, "pai-team-x")
        container = pod["spec"]["containers"][0]
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env == {"PAI_X": "1", "NVIDIA_VISIBLE_DEVICES": "1,3"}
        assert "nvidia.com/gpu" not in container["resources"]["limits"]
        assert {"name": "storage-0", "mountPath": "/data", "readOnly": True, "subPath": "users/alice"} in container["volumeMounts"]
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        assert volumes["storage-0"]["persistentVolumeClaim"] == {"claimName": "shared", "readOnly": True}
        assert volumes["storage-1"]["hostPath"]["path"] == "/srv/scratch/alice"
        assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "2048Mi"}
        assert [(p["containerPort"], p["hostPort"]) for p in container["ports"]] == [(20001, 20001), (20002, 20002)]
        assert pod["spec"]["terminationGracePeriodSeconds"] == 13
        assert pod["spec"]["restartPolicy"] == "Never" and container["workingDir"] == "/work"
        assert container["command"] == ["/bin/bash", "-c", "echo hi"]
        # A claim that does not exist (yet) is a transient refusal, before any pod is made.
        missing = (StorageMount(name="gone", claim="gone", mount_path="/gone"),)
        with pytest.raises(TransientCreationError, match="'gone' does not exist"):
            backend.create_pod(spec(1, storage_mounts=missing))
        assert kube_server.get_object("pods", spec(1).name, "pai-team-x") is None
    finally:
        backend.close()


def test_an_invalid_pod_is_permanent_and_an_unreachable_api_pauses_the_cluster(kube_server, backend):
    with pytest.raises(PermanentCreationError, match="422"):
        backend.create_pod(spec(0, env={"1-not-a-name": "x"}))
    with pytest.raises(PermanentCreationError):
        backend.create_pod(PodSpec(name="Not_A_Name", node="gpu-node-1", commands="true"))
    kube_server.inject_fault("POST", r"/pods$", status=503, count=100, retry_after=0)
    with pytest.raises(ClusterUnavailableError, match="unavailable"):
        backend.create_pod(spec(1))
    assert not backend.availability().available
    kube_server.clear_faults()
    eventually(lambda: backend.availability().retry_in == 0)
    kube_server.inject_fault("POST", r"/pods$", status=400, count=1)
    with pytest.raises(PermanentCreationError):
        backend.create_pod(spec(2))


def test_a_webhook_refusal_is_transient(kube_server, backend):
    # Admission webhooks refuse with 403 Forbidden unless they choose another code.
    kube_server.inject_fault("POST", r"/pods$", status=403, count=1)
    with pytest.raises(TransientCreationError, match="403"):
        backend.create_pod(spec(0))
    assert backend.create_pod(spec(0)).uid


def test_inventory_from_the_node_watch(kube_server):
    kube_server.add_node("b-node", gpus=8, cpu="64", memory="512Gi",
                         labels={"pai.sku": "A100", "topology.kubernetes.io/zone": "z1", "pai.rack": "r7"})
    kube_server.add_node("a-node", gpus=0, cpu="16", memory="64Gi", extra_resources={"example.com/npu": 4})
    kube_server.update_node("b-node", allocatable={"nvidia.com/gpu": 7, "cpu": "63500m"})
    changes = []
    backend = make_backend(kube_server, on_node_change=changes.append, device_resources=("nvidia.com/gpu", "example.com/npu"))
    try:
        a, b = backend.list_nodes()
        assert (a.name, a.gpu, a.cpu, a.memory_mb) == ("a-node", 4, 16.0, 65536)
        assert (b.name, b.gpu, b.cpu) == ("b-node", 7, 63.5)
        assert b.labels["pai/sku"] == "A100" and b.labels["pai/topology"] == "z1/r7"
        assert b.ip.startswith("10.0.") and b.ready and b.schedulable
        assert sorted(n.name for n in changes) == ["a-node", "b-node"]
        changes.clear()
        kube_server.set_node_ready("b-node", False)
        kube_server.set_node_unschedulable("a-node")
        eventually(lambda: backend.poll(backend.cursor()) is not None and len(changes) == 2)
        assert {(n.name, n.ready, n.schedulable) for n in changes} == {("b-node", False, True), ("a-node", True, False)}
        kube_server.delete_node("a-node")
        eventually(lambda: [n.name for n in backend.list_nodes()] == ["b-node"])
        assert (changes[-1].name, changes[-1].ready) == ("a-node", False)
    finally:
        backend.close()


def test_the_feed_reports_phases_exit_codes_and_reasons(kube_server, backend):
    names = {}
    for i, outcome in enumerate(["ok", "oom", "evicted", "deadline", "pull"]):
        names[outcome] = backend.create_pod(spec(i)).name
    cursor = backend.cursor()
    ns = "pai-team-x"
    for outcome in ("ok", "oom", "evicted", "deadline"):
        kube_server.run_pod(ns, names[outcome])
    kube_server.finish_pod(ns, names["ok"], 0)
    kube_server.finish_pod(ns, names["oom"], 137, reason="OOMKilled")
    kube_server.finish_pod(ns, names["evicted"], 137, reason="Evicted")
    kube_server.finish_pod(ns, names["deadline"], 137, reason="DeadlineExceeded")
    kube_server.wait_image_pull(ns, names["pull"], reason="ImagePullBackOff")

    def last():
        seen = {}
        for o in backend.poll(cursor):
            seen[o.name] = o
        return seen if len(seen) == 5 and all(seen[names[k]].terminal for k in ("ok", "oom", "evicted", "deadline")) else None

    seen = eventually(last)
    ok, oom, evicted, deadline, pull = (seen[names[k]] for k in ("ok", "oom", "evicted", "deadline", "pull"))
    assert (ok.phase, ok.exit_code, ok.container_reason) == ("Succeeded", 0, "Completed")
    assert ok.started_at is not None and ok.finished_at is not None and ok.ip
    assert (oom.phase, oom.exit_code, oom.container_reason) == ("Failed", 137, "OOMKilled")
    assert (evicted.phase, evicted.reason) == ("Failed", "Evicted") and "low on resource" in evicted.message
    assert deadline.reason == "DeadlineExceeded"
    assert (pull.phase, pull.container_reason) == ("Pending", "ImagePullBackOff") and "failed to pull" in pull.message
    versions = [int(o.resource_version) for o in backend.poll(cursor)]
    assert versions == sorted(versions)
    with pytest.raises(CursorExpiredError):
        backend.poll("0")  # older than the watch's start


def test_delete_is_graceful_with_a_uid_precondition_then_reported_deleted(kube_server, backend):
    created = backend.create_pod(spec(0))
    kube_server.run_pod("pai-team-x", created.name)
    cursor = backend.cursor()
    assert backend.delete_pod(created.name, uid=created.uid, grace_seconds=7) is True
    pod = kube_server.get_object("pods", created.name, "pai-team-x")
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 7
    [listed] = backend.list_pods({"pai.job": "pai-7-1"})
    assert listed.deletion_requested
    kube_server.finalize_deletion("pai-team-x", created.name)
    final = eventually(lambda: [o for o in backend.poll(cursor) if o.deleted])
    assert (final[-1].name, final[-1].exit_code) == (created.name, 143)
    assert backend.list_pods() == []
    assert backend.delete_pod(created.name) is False
    backend.forget_pod(created.name)
    with pytest.raises(PodNotFoundError):
        backend.read_log(created.name)


FILES = {"api_key": "sk-live-0123456789", "db.password": "pa55-w0rd", "port": "8080"}
NS = "pai-team-x"


def test_secret_files_are_a_secret_the_pod_owns_mounted_read_only_and_deleted_with_it(kube_server, backend):
    given = spec(0, secrets=FILES, env={"PAI_SECRETS_DIR": "/usr/local/pai/secrets"})
    assert "sk-live" not in repr(given)
    created = backend.create_pod(given)
    pod = kube_server.get_object("pods", created.name, NS)
    secret = kube_server.get_object("secrets", f"{created.name}-secrets", NS)
    assert secret["type"] == "Opaque"
    assert {key: base64.b64decode(value).decode() for key, value in secret["data"].items()} == FILES
    assert secret["metadata"]["labels"] == pod["metadata"]["labels"]
    assert secret["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": created.name, "uid": created.uid}
    ]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["pai-secrets"]["secret"] == {"secretName": f"{created.name}-secrets", "defaultMode": 0o400}
    container = pod["spec"]["containers"][0]
    assert {"name": "pai-secrets", "mountPath": "/usr/local/pai/secrets", "readOnly": True} in container["volumeMounts"]
    assert {"name": "PAI_SECRETS_DIR", "value": "/usr/local/pai/secrets"} in container["env"]
    # The pod holds no value, plain or encoded: only the Secret does.
    text = json.dumps(pod)
    for value in ("sk-live-0123456789", "pa55-w0rd"):
        assert value not in text and base64.b64encode(value.encode()).decode() not in text
    # Asked again (as after a lost reply): the same pod and Secret.
    assert backend.create_pod(given).uid == created.uid
    assert kube_server.run_pod(NS, created.name) is not None
    backend.delete_pod(created.name, uid=created.uid)
    assert kube_server.get_object("secrets", f"{created.name}-secrets", NS) is not None  # still stopping
    kube_server.finalize_deletion(NS, created.name)
    assert kube_server.get_object("secrets", f"{created.name}-secrets", NS) is None


def test_a_pod_without_secrets_gets_no_secret_and_no_mount(kube_server, backend):
    created = backend.create_pod(spec(0))
    pod = kube_server.get_object("pods", created.name, NS)
    assert [v["name"] for v in pod["spec"]["volumes"]] == ["dshm"]
    assert kube_server.list_objects("secrets", NS) == []


def test_a_secret_that_cannot_be_made_undoes_the_pod_or_is_made_by_the_next_call(kube_server, backend):
    name = spec(0).name
    # An admission webhook refuses the Secret: the pod goes again.
    kube_server.inject_fault("POST", r"/secrets$", status=403, count=100)
    with pytest.raises(TransientCreationError, match="403"):
        backend.create_pod(spec(0, secrets=FILES))
    assert kube_server.get_object("pods", name, NS) is None
    # The undoing fails too: the pod is left as a worker dying between the two calls leaves it.
    kube_server.inject_fault("DELETE", r"/pods/", status=503, count=100, retry_after=0)
    with pytest.raises(TransientCreationError):
        backend.create_pod(spec(0, secrets=FILES))
    kube_server.clear_faults()
    eventually(lambda: backend.availability().retry_in == 0)
    waiting = kube_server.get_object("pods", name, NS)
    assert kube_server.run_pod(NS, name) is None  # the kubelet cannot mount the files: the task does not start
    assert backend.create_pod(spec(0, secrets=FILES)).uid == waiting["metadata"]["uid"]
    secret = kube_server.get_object("secrets", f"{name}-secrets", NS)
    assert secret["metadata"]["ownerReferences"][0]["uid"] == waiting["metadata"]["uid"]
    assert kube_server.run_pod(NS, name) is not None


@pytest.mark.parametrize(
    "secrets, message",
    [({"..data": "x"}, r"secret names \['..data'\] cannot be file names"), ({"big": "x" * (2**20 + 1)}, "more than")],
)
def test_secrets_no_secret_can_hold_are_refused_before_anything_is_made(kube_server, backend, secrets, message):
    with pytest.raises(PermanentCreationError, match=message):
        backend.create_pod(spec(0, secrets=secrets))
    assert kube_server.list_objects("pods") == [] and kube_server.list_objects("secrets", NS) == []


def test_logs_and_events_of_a_pod(kube_server, backend):
    created = backend.create_pod(spec(0))
    assert backend.read_log(created.name) == ""  # not started yet
    kube_server.run_pod("pai-team-x", created.name)
    kube_server.set_pod_log("pai-team-x", created.name, "a\nb\nc\n")
    assert backend.read_log(created.name, tail_lines=2) == "b\nc\n"
    kube_server.record_event("pai-team-x", created.name, "Killing", "Stopping container main", event_type="Warning")
    events = eventually(lambda: len(backend.read_events(created.name)) == 4 and backend.read_events(created.name))
    assert [e.reason for e in events][:3] == ["Pulled", "Created", "Started"]
    assert (events[-1].reason, events[-1].type) == ("Killing", "Warning")
    assert backend.read_events("pai-never-was-0-0-0") == []


def test_events_come_from_one_watch_kept_within_bounds(kube_server):
    kube_server.add_node("gpu-node-1", gpus=4)
    kube_server.create_object("namespaces", {"metadata": {"name": "elsewhere"}})
    backend = make_backend(kube_server, events_limit=8, events_per_pod=3)
    try:
        pods = [backend.create_pod(spec(i)) for i in range(3)]
        kube_server.run_pod(NS, pods[0].name)  # Pulled, Created, Started
        kube_server.record_event(NS, pods[0].name, "Killing", "Stopping container main")
        # At most three per pod: the oldest goes.
        eventually(lambda: [e.reason for e in backend.read_events(pods[0].name)] == ["Created", "Started", "Killing"])
        # A pod outside pai's namespaces: its events are not kept.
        kube_server.create_object("pods", {"metadata": {"name": pods[0].name}, "spec": {
            "nodeName": "gpu-node-1", "containers": [{"name": "main", "image": "busybox"}]}}, namespace="elsewhere")
        kube_server.run_pod("elsewhere", pods[0].name)
        for pod in pods[1:]:
            kube_server.run_pod(NS, pod.name)
        eventually(lambda: [e.reason for e in backend.read_events(pods[2].name)] == ["Pulled", "Created", "Started"])
        # At most eight in all: the first pod's go.
        assert backend.read_events(pods[0].name) == []
        assert [e.reason for e in backend.read_events(pods[1].name)] == ["Pulled", "Created", "Started"]
        events_calls = kube_server.count_requests("GET", r"/events")
        for pod in pods:
            backend.read_events(pod.name)
        assert kube_server.count_requests("GET", r"/events") == events_calls
        assert kube_server.count_requests("GET", r"^/api/v1/events$") == events_calls  # the list and the watch, no more
    finally:
        backend.close()
    with pytest.raises(PodNotFoundError):
        backend.read_log("pai-never-was-0-0-0")


def test_a_dropped_watch_resumes_and_a_410_forces_a_relist(kube_server, backend):
    first = backend.create_pod(spec(0))
    cursor = backend.cursor()
    kube_server.drop_watches(abrupt=True)
    kube_server.run_pod("pai-team-x", first.name)
    eventually(lambda: [o for o in backend.poll(cursor) if o.phase == "Running"])
    assert backend.watch_stats["pod_relists"] == 0
    kube_server.inject_fault("GET", r"^/api/v1/pods$", status=503, count=10_000)
    kube_server.drop_watches()
    kube_server.finish_pod("pai-team-x", first.name, 0)
    kube_server.compact()
    kube_server.clear_faults()
    eventually(lambda: backend.watch_stats["pod_relists"] == 1)
    with pytest.raises(CursorExpiredError):
        backend.poll(cursor)
    cursor = backend.cursor()
    [relisted] = backend.poll(None)
    assert (relisted.name, relisted.phase) == (first.name, "Succeeded")
    assert backend.poll(cursor) == []


def test_the_token_bucket_bounds_the_request_rate():
    now = [0.0]
    waits = []

    def sleep(seconds):
        waits.append(seconds)
        now[0] += seconds

    bucket = TokenBucket(qps=10, burst=3, clock=lambda: now[0], sleep=sleep)
    for _ in range(3):
        assert bucket.take() == 0
    assert bucket.take() == pytest.approx(0.1)
    now[0] += 1.0  # idle: the bucket refills to its burst, no further
    for _ in range(3):
        assert bucket.take() == 0
    assert bucket.take() == pytest.approx(0.1)
    with pytest.raises(ValueError):
        TokenBucket(qps=0, burst=1)


def test_connection_formats():
    assert parse("in-cluster") == ("in-cluster", None, None)
    assert parse("kubeconfig:/etc/pai/kube.yaml") == ("kubeconfig", "/etc/pai/kube.yaml", None)
    assert parse("kubeconfig:/etc/pai/kube.yaml#prod") == ("kubeconfig", "/etc/pai/kube.yaml", "prod")
    for bad in ("", "kubeconfig:", "https://10.0.0.1"):
        with pytest.raises(ConnectionFormatError):
            parse(bad)


def test_the_calls_the_backend_makes_are_exactly_what_the_chart_grants(kube_server, backend):
    chart = yaml.safe_load(CHART_VERBS.read_text())["rules"]
    granted = {(rule["apiGroup"], rule["resource"], verb) for rule in chart for verb in rule["verbs"]}
    assert granted == set(API_CALLS)
    # Every backend method, on a fresh server: what it calls is what API_CALLS names.
    backend.namespace_quota = quota_for({"requests.cpu": "10"})
    backend.quota_refresh_seconds = 0
    kube_server.create_object("namespaces", {"metadata": {"name": "pai-team-y"}})
    kube_server.add_pvc("pai-team-y", "claim")
    kube_server.add_storage_class("local", binding_mode="WaitForFirstConsumer")
    kube_server.add_pvc("pai-team-y", "late", phase="Pending", storage_class="local")
    auth = ImagePullAuth(username="u", password="p")
    mounts = (StorageMount(name="d", claim="claim", mount_path="/d"), StorageMount(name="l", claim="late", mount_path="/l"))
    created = backend.create_pod(spec(0, namespace="pai-team-y", priority_class="prod", image_pull_auth=auth, storage_mounts=mounts,
                                      secrets={"token": "t"}))
    backend.namespace_quota = quota_for({"requests.cpu": "20"})
    backend.create_pod(spec(1, namespace="pai-team-y"))  # the quota changed: patched
    backend.create_pod(spec(1, namespace="pai-team-y"))  # AlreadyExists: read back
    backend.create_pod(spec(2))  # a namespace made on demand
    kube_server.run_pod("pai-team-y", created.name)
    backend.list_nodes()
    backend.poll(backend.cursor())
    backend.list_pods({"pai.job": "pai-7-1"})
    backend.read_log(created.name)
    backend.read_events(created.name)
    backend.delete_pod(created.name, uid=created.uid, grace_seconds=0)
    backend.forget_pod(created.name)
    assert kube_server.api_calls() == set(API_CALLS)


def test_a_hung_request_times_out_and_is_retried(kube_server):
    from scheduler.backends.kubernetes import Backoff, KubernetesBackend

    from .conftest import make_api

    kube_server.add_node("gpu-node-1")
    api = make_api(kube_server, backoff=Backoff(base=0.01, cap=0.05, budget=2.0), timeout=(1.0, 0.3))
    backend = KubernetesBackend(api)
    try:
        kube_server.inject_fault("GET", r"^/api/v1/pods$", hang=2.0, count=1)
        assert backend.list_pods() == []
        assert api.retries == 1
    finally:
        kube_server.clear_faults()
        backend.close()
