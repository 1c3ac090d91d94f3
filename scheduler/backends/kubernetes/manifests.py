"""Kubernetes objects from pai's plain data, and pai's plain data from Kubernetes objects."""

from __future__ import annotations

import base64
import hashlib
import json
import math
from dataclasses import dataclass
from datetime import datetime

from ...spec import PRIORITY_CLASSES
from ..base import SECRETS_MOUNT_PATH, NodeInfo, PodEvent, PodObservation, PodSpec

CONTAINER = "main"
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "pai"
# Every object pai creates carries this label: the pod watch selects on it, and an
# operator can find (and garbage-collect) whatever pai left behind.
OWNER_LABELS = {MANAGED_BY: MANAGER}
POD_SELECTOR = f"{MANAGED_BY}={MANAGER}"
QUOTA_NAME = "pai-virtual-clusters"
SHM_VOLUME = "dshm"
SECRETS_VOLUME = "pai-secrets"
# The task's secret files: read-only, for the container's user alone.
SECRET_FILE_MODE = 0o400
DEFAULT_IMAGE = "ubuntu:22.04"
# Priority classes pai creates are named after its own; their values keep pai's order.
PRIORITY_CLASS_PREFIX = "pai-"
# Container states that mean the image cannot be pulled or the container not created.
WAITING_FAILURES = frozenset({
    "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
    "CreateContainerConfigError", "CreateContainerError",
})


# The taint that keeps other workloads off pai's GPU nodes (any value, any effect): pai's
# pods tolerate it, and it does not make a node unschedulable for pai.
DEDICATED_TAINT = "pai.dedicated"
# Taint effects that keep a pod off a node (PreferNoSchedule only asks).
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
TERMINAL = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class LabelKeys:
    """Node label keys that carry a node's SKU and topology (configurable per site)."""

    sku: str = "pai.sku"
    topology: tuple[str, ...] = ("topology.kubernetes.io/zone", "pai.rack")


@dataclass(frozen=True)
class PodOptions:
    """How pods are shaped on this cluster.

    ``assign_devices``: pai's placement chooses device indices and the pod gets
    ``NVIDIA_VISIBLE_DEVICES`` instead of a device-plugin limit (the plugin would pick
    its own devices). ``device_resource`` is the extended resource of one device.
    """

    device_resource: str = "nvidia.com/gpu"
    assign_devices: bool = False
    default_image: str = DEFAULT_IMAGE
    # A pod needs a request to be in the Guaranteed QoS class and to be counted by quota.
    min_cpu: str = "100m"
    min_memory: str = "128Mi"
    # The key of the taint of nodes dedicated to pai (tolerated, whatever its value and effect).
    dedicated_taint: str = DEDICATED_TAINT


def priority_class_name(name: str) -> str:
    return f"{PRIORITY_CLASS_PREFIX}{name}"


def priority_class(name: str) -> dict:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": priority_class_name(name), "labels": dict(OWNER_LABELS)},
        "value": PRIORITY_CLASSES.get(name, 0),
        # pai's engine preempts; the kube-scheduler never sees these pods (spec.nodeName).
        "preemptionPolicy": "Never",
        "description": f"pai priority class {name}",
    }


def namespace(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(OWNER_LABELS)}}


def resource_quota(hard: dict[str, str], guaranteed_classes: list[str]) -> dict:
    """The namespace's quota over guaranteed pods only: opportunistic pods may use idle
    cells beyond the tenant's virtual clusters, so they are outside its scope."""
    spec: dict = {"hard": dict(hard)}
    if guaranteed_classes:
        spec["scopeSelector"] = {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": sorted(guaranteed_classes)},
        ]}
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": QUOTA_NAME, "labels": dict(OWNER_LABELS)}, "spec": spec}


def pull_secret_name(registry: str, username: str, password: str) -> str:
    """Named by its content: the same credentials share one secret, new ones get a new one."""
    digest = hashlib.sha256(f"{registry}\0{username}\0{password}".encode()).hexdigest()[:16]
    return f"pai-pull-{digest}"


def pull_secret(name: str, registry: str, username: str, password: str) -> dict:
    server = registry or "https://index.docker.io/v1/"
    auth = base64.b64encode(f"{username}:{password}".encode()).decode()
    config = {"auths": {server: {"username": username, "password": password, "auth": auth}}}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": name, "labels": dict(OWNER_LABELS)},
        "data": {".dockerconfigjson": base64.b64encode(json.dumps(config).encode()).decode()},
    }


def task_secret_name(pod_name: str) -> str:
    return f"{pod_name}-secrets"


def task_secret(spec: PodSpec, pod_uid: str) -> dict:
    """The Secret holding a pod's secret files, owned by the pod: Kubernetes' garbage
    collector deletes it when the pod goes, however it goes."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": task_secret_name(spec.name),
            "labels": {**spec.labels, **OWNER_LABELS},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": spec.name, "uid": pod_uid}],
        },
        "data": {key: base64.b64encode(value.encode()).decode() for key, value in sorted(spec.secrets.items())},
    }


def _cpu(value: float, minimum: str) -> str:
    return f"{max(1, round(value * 1000))}m" if value > 0 else minimum


def pod(spec: PodSpec, options: PodOptions, pull_secret_names: list[str] = ()) -> dict:
    """The Pod of a placed task attempt, bound to its node by ``spec.nodeName``."""
    env = dict(spec.env)
    resources = {"cpu": _cpu(spec.cpu, options.min_cpu), "memory": f"{spec.memory_mb}Mi" if spec.memory_mb > 0 else options.min_memory}
    if options.assign_devices or spec.devices_by_index:
        # The placement's devices, not whichever the device plugin would hand out.
        env["NVIDIA_VISIBLE_DEVICES"] = ",".join(str(d) for d in spec.devices) if spec.devices else "void"
    elif spec.devices or spec.gpu:
        resources[spec.device_resource or options.device_resource] = str(len(spec.devices) or spec.gpu)
    mounts = [{"name": SHM_VOLUME, "mountPath": "/dev/shm"}]
    volumes = [{"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": f"{max(1, spec.shm_mb)}Mi"}}]
    for i, storage in enumerate(spec.storage_mounts):
        volume = f"storage-{i}"
        if storage.host_path:
            volumes.append({"name": volume, "hostPath": {"path": storage.host_path, "type": "DirectoryOrCreate"}})
            sub_path = ""
        else:
            volumes.append({"name": volume, "persistentVolumeClaim": {"claimName": storage.claim, "readOnly": storage.read_only}})
            sub_path = storage.sub_path.strip("/")
        mount = {"name": volume, "mountPath": storage.mount_path, "readOnly": storage.read_only}
        if sub_path and sub_path != ".":
            mount["subPath"] = sub_path
        mounts.append(mount)
    if spec.secrets:
        # Not optional: the kubelet starts the container only once the Secret exists.
        volumes.append({"name": SECRETS_VOLUME, "secret": {"secretName": task_secret_name(spec.name), "defaultMode": SECRET_FILE_MODE}})
        mounts.append({"name": SECRETS_VOLUME, "mountPath": SECRETS_MOUNT_PATH, "readOnly": True})
    ports = [
        {"containerPort": port, "hostPort": port, "protocol": "TCP"}
        for request in spec.ports
        for port in request.ports
    ]
    container = {
        "name": CONTAINER,
        "image": spec.image or options.default_image,
        "command": ["/bin/bash", "-c", spec.commands],
        "env": [{"name": k, "value": str(v)} for k, v in sorted(env.items())],
        "resources": {"requests": dict(resources), "limits": dict(resources)},
        "volumeMounts": mounts,
    }
    if ports:
        container["ports"] = ports
    if spec.working_dir:
        container["workingDir"] = spec.working_dir
    pod_spec = {
        "nodeName": spec.node,
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": max(0, math.ceil(spec.grace_seconds)),
        "containers": [container],
        "volumes": volumes,
    }
    if options.dedicated_taint:
        pod_spec["tolerations"] = [{"key": options.dedicated_taint, "operator": "Exists"}]
    if spec.priority_class:
        pod_spec["priorityClassName"] = priority_class_name(spec.priority_class)
    if pull_secret_names:
        pod_spec["imagePullSecrets"] = [{"name": n} for n in pull_secret_names]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": spec.name,
            "namespace": spec.namespace,
            "labels": {**spec.labels, **OWNER_LABELS},
            "annotations": dict(spec.annotations),
        },
        "spec": pod_spec,
    }


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _main_status(status: dict) -> dict:
    statuses = status.get("containerStatuses") or []
    for item in statuses:
        if item.get("name") == CONTAINER:
            return item
    return statuses[0] if statuses else {}


def observation(obj: dict, *, deleted: bool = False, resource_version: str | None = None) -> PodObservation:
    """What pai reports of a pod object (``deleted``: the watch's DELETED, its last state)."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    phase = status.get("phase") or "Pending"
    container = _main_status(status)
    state = container.get("state") or {}
    terminated = state.get("terminated") or {}
    waiting = state.get("waiting") or {}
    running = state.get("running") or {}
    exit_code = terminated.get("exitCode") if terminated else None
    container_reason = terminated.get("reason") or waiting.get("reason") or ""
    message = status.get("message") or terminated.get("message") or (waiting.get("message") if waiting.get("reason") in WAITING_FAILURES else "") or ""
    return PodObservation(
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        phase=phase if phase in ("Pending", "Running", "Succeeded", "Failed") else "Unknown",
        resource_version=resource_version or meta.get("resourceVersion", ""),
        node=(obj.get("spec") or {}).get("nodeName") or "",
        ip=status.get("podIP") or "",
        labels=dict(meta.get("labels") or {}),
        exit_code=exit_code if phase in ("Succeeded", "Failed") else None,
        reason=status.get("reason") or "",
        container_reason=container_reason,
        message=message,
        started_at=parse_time(running.get("startedAt") or terminated.get("startedAt")),
        finished_at=parse_time(terminated.get("finishedAt")),
        deletion_requested=bool(meta.get("deletionTimestamp")),
        deleted=deleted,
    )


def event(obj: dict) -> PodEvent:
    return PodEvent(
        pod_name=(obj.get("involvedObject") or {}).get("name", ""),
        type="Warning" if obj.get("type") == "Warning" else "Normal",
        reason=obj.get("reason") or "",
        message=obj.get("message") or "",
        at=parse_time(obj.get("firstTimestamp") or obj.get("eventTime") or (obj.get("metadata") or {}).get("creationTimestamp")),
        count=int(obj.get("count") or 1),
    )


_MEMORY_UNITS = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18, "m": 10**-3,
}


def quantity(value: str | None) -> float:
    """A Kubernetes quantity as a number (``500m`` → 0.5, ``16Gi`` → 17179869184)."""
    if not value:
        return 0.0
    text = str(value)
    for suffix in sorted(_MEMORY_UNITS, key=len, reverse=True):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * _MEMORY_UNITS[suffix]
    return float(text)


def node_ready(obj: dict) -> bool:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def untolerated_taints(obj: dict, tolerated: str) -> list[str]:
    """The node's taints that keep pai's pods off (``key=value:effect``): every NoSchedule or
    NoExecute taint but the dedicated one (cordon and a NotReady node show as such taints too)."""
    return [
        f"{t.get('key')}{'=' + t['value'] if t.get('value') else ''}:{t.get('effect')}"
        for t in (obj.get("spec") or {}).get("taints") or []
        if t.get("effect") in BLOCKING_EFFECTS and t.get("key") != tolerated
    ]


def node_info(obj: dict, device_resources: tuple[str, ...], label_keys: LabelKeys, tolerated_taint: str = DEDICATED_TAINT,
              used_by_others: tuple[int, float, float] = (0, 0.0, 0.0)) -> NodeInfo:
    """A node's allocatable devices (of the SKUs' device resources), CPU and memory (capacity less what the system keeps),
    its labels with the SKU and topology under pai's own keys, its health (Ready; not cordoned and no taint pai does
    not tolerate), and what other pods request on it (``used_by_others``: devices, CPU, memory in MiB)."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    allocatable = status.get("allocatable") or status.get("capacity") or {}
    labels = dict(meta.get("labels") or {})
    if label_keys.sku in labels:
        labels["pai/sku"] = labels[label_keys.sku]
    topology = [labels[k] for k in label_keys.topology if labels.get(k)]
    if topology:
        labels["pai/topology"] = "/".join(topology)
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    return NodeInfo(
        name=meta.get("name", ""),
        ip=addresses.get("InternalIP") or addresses.get("ExternalIP") or "",
        gpu=int(sum(quantity(allocatable.get(r)) for r in device_resources)),
        cpu=quantity(allocatable.get("cpu")),
        memory_mb=int(quantity(allocatable.get("memory")) // 2**20),
        labels=labels,
        ready=node_ready(obj),
        schedulable=not (obj.get("spec") or {}).get("unschedulable", False) and not untolerated_taints(obj, tolerated_taint),
        gpu_used_by_others=int(used_by_others[0]),
        cpu_used_by_others=round(used_by_others[1], 3),
        memory_mb_used_by_others=int(math.ceil(used_by_others[2])),
    )


def pod_requests(obj: dict, device_resources: tuple[str, ...]) -> tuple[int, float, float]:
    """What a pod holds on its node as the scheduler counts it: (devices, CPU, memory in MiB),
    each the larger of its containers' sum and its largest init container (requests, else
    limits). A pod of pai's that gets its devices by index (no device request) holds those
    in ``NVIDIA_VISIBLE_DEVICES``."""
    spec = obj.get("spec") or {}
    ours = ((obj.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY) == MANAGER

    def amounts(container: dict) -> tuple[float, float, float]:
        resources = container.get("resources") or {}
        wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        devices = sum(quantity(wanted.get(r)) for r in device_resources)
        if not devices and ours:
            for variable in container.get("env") or ():
                if variable.get("name") == "NVIDIA_VISIBLE_DEVICES":
                    value = variable.get("value") or ""
                    devices = 0 if value in ("", "void", "none") else len(value.split(","))
        return devices, quantity(wanted.get("cpu")), quantity(wanted.get("memory")) / 2**20

    total = [0.0, 0.0, 0.0]
    for container in spec.get("containers") or ():
        for i, amount in enumerate(amounts(container)):
            total[i] += amount
    for container in spec.get("initContainers") or ():
        for i, amount in enumerate(amounts(container)):
            total[i] = max(total[i], amount)
    return int(total[0]), total[1], total[2]
