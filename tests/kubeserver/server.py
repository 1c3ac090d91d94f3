"""A Kubernetes API test server: real HTTP on 127.0.0.1 for the official client.

It keeps the API server's rules that pai's backend depends on (resourceVersion, watch
from a version and 410 after compaction, status subresources, graceful pod deletion,
binding, validation, quota admission, selectors, paging) and exposes test hooks that play
the kubelet, the node controller and a flaky network. Objects live in memory; every write
gets the next value of one global resourceVersion counter and one watch event.
"""

import base64
import itertools
import json
import random
import re
import select
import socket
import sys
import threading
import time
import traceback
import uuid
from collections import OrderedDict, deque
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from . import validation
from .patch import PatchError, PatchTestFailed, json_patch, merge_patch, strategic_merge_patch
from .quantity import QuantityError, format_quantity, parse_quantity
from .selectors import SelectorError, fields_match, labels_match, parse_field_selector, parse_label_selector

KUBERNETES_VERSION = {"major": "1", "minor": "35", "gitVersion": "v1.35.0"}
TERMINAL_PHASES = {"Succeeded", "Failed"}
# Pod-level termination reasons (status.reason); any other reason is a container's.
POD_REASONS = {"Evicted", "DeadlineExceeded", "NodeLost", "Shutdown", "UnexpectedAdmissionError", "Preempting"}
COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
# Field selectors that name a different path in the object.
FIELD_ALIASES = {"source": "source.component"}
DEFAULT_WATCH_TIMEOUT = 1800
# How often an idle watch checks that its client is still connected.
CLIENT_CHECK_SECONDS = 0.1


def client_gone(sock):
    """Whether the peer closed the connection (readable, and nothing left to read)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


@dataclass(frozen=True)
class Resource:
    plural: str
    kind: str
    group: str = ""
    version: str = "v1"
    namespaced: bool = True
    subresources: frozenset = frozenset()
    short_names: tuple = ()
    fields: frozenset = COMMON_FIELDS
    # Most deletions answer a Status; these answer the deleted object, like the real registry.
    returns_deleted_object: bool = False

    @property
    def api_version(self):
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def has_status(self):
        return "status" in self.subresources

    @property
    def singular(self):
        return self.kind.lower()


RESOURCES = {
    r.plural: r
    for r in (
        Resource(
            "namespaces", "Namespace", namespaced=False, subresources=frozenset({"status"}), short_names=("ns",),
            fields=COMMON_FIELDS | {"status.phase"}, returns_deleted_object=True,
        ),
        Resource(
            "nodes", "Node", namespaced=False, subresources=frozenset({"status"}), short_names=("no",),
            fields=COMMON_FIELDS | {"spec.unschedulable"},
        ),
        Resource(
            "pods", "Pod", subresources=frozenset({"status", "binding", "log"}), short_names=("po",),
            fields=COMMON_FIELDS | {
                "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
                "status.phase", "status.podIP", "status.nominatedNodeName",
            },
            returns_deleted_object=True,
        ),
        Resource(
            "events", "Event", short_names=("ev",),
            fields=COMMON_FIELDS | {
                "involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
                "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
                "reason", "reportingComponent", "source", "type",
            },
        ),
        Resource("resourcequotas", "ResourceQuota", subresources=frozenset({"status"}), short_names=("quota",)),
        Resource(
            "persistentvolumeclaims", "PersistentVolumeClaim", subresources=frozenset({"status"}),
            short_names=("pvc",), returns_deleted_object=True,
        ),
        # Image pull credentials from a job's image `auth` live in Secrets.
        Resource("secrets", "Secret", fields=COMMON_FIELDS | {"type"}),
        Resource("priorityclasses", "PriorityClass", group="scheduling.k8s.io", namespaced=False, short_names=("pc",)),
        Resource("storageclasses", "StorageClass", group="storage.k8s.io", namespaced=False, short_names=("sc",)),
    )
}
GROUPS = {"scheduling.k8s.io": "v1", "storage.k8s.io": "v1"}
# Set on a claim of a WaitForFirstConsumer class by whoever chose the consuming pod's node
# (kube-scheduler, or a client binding pods itself); the provisioner makes the volume there.
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


class ApiError(Exception):
    """An error answered as a Kubernetes Status object."""

    def __init__(self, code, reason, message, details=None, headers=None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self):
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def not_found(resource, name):
    qualified = resource.plural if not resource.group else f"{resource.plural}.{resource.group}"
    return ApiError(404, "NotFound", f'{qualified} "{name}" not found', {"name": name, "group": resource.group, "kind": resource.plural} if resource.group else {"name": name, "kind": resource.plural})


def already_exists(resource, name):
    qualified = resource.plural if not resource.group else f"{resource.plural}.{resource.group}"
    details = {"name": name, "kind": resource.plural}
    if resource.group:
        details["group"] = resource.group
    return ApiError(409, "AlreadyExists", f'{qualified} "{name}" already exists', details)


def conflict(resource, name, message):
    details = {"name": name, "kind": resource.plural}
    if resource.group:
        details["group"] = resource.group
    return ApiError(409, "Conflict", message, details)


def invalid(resource, name, causes):
    parts = [f"{c['field']}: {c['message']}" for c in causes]
    summary = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    details = {"name": name or "", "kind": resource.kind, "causes": causes}
    if resource.group:
        details["group"] = resource.group
    return ApiError(422, "Invalid", f'{resource.kind} "{name or ""}" is invalid: {summary}', details)


def bad_request(message):
    return ApiError(400, "BadRequest", message)


def gone(message):
    return ApiError(410, "Expired", message)


def clone(obj):
    """A deep copy of JSON data; several times faster than copy.deepcopy on API objects."""
    return json.loads(json.dumps(obj))


def now_rfc3339(offset_seconds=0):
    moment = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(seconds=offset_seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Fault:
    method: str
    path: re.Pattern
    remaining: int
    status: int = 500
    retry_after: int = 1
    hang: float = 0.0
    commit: bool = False
    after: int = 0  # matching requests let through before it starts
    seconds: float | None = None  # once started, it lasts this long (whatever `remaining`)
    latency: float = 0.0  # not an error: the answer comes this much later
    everything: bool = False  # once started, every request fails (an outage of the whole server)
    started: float | None = None


class RequestRecord(list):
    """``[method, path, query, status]`` of one request, the client's ``agent`` (User-Agent)
    and when it came (``at``, ``time.monotonic()``)."""

    agent = ""
    at = 0.0


@dataclass
class HistoryEntry:
    rv: int
    type: str
    resource: Resource
    obj: dict
    old: dict = None


@dataclass
class Snapshot:
    rv: int
    items: list


class Response:
    def __init__(self, status, body, headers=None, content_type="application/json"):
        self.status = status
        self.body = body
        self.headers = headers or {}
        self.content_type = content_type


class KubeServer:
    """The API server state, its HTTP front and the test hooks.

    Start with `start()` (or use it as a context manager); `host` is the base URL for
    `kubernetes.client.Configuration.host`.
    """

    def __init__(self, *, history_limit=200_000, snapshot_limit=64, token=None):
        # With a token, requests without `Authorization: Bearer <token>` get 401.
        self.token = token
        self._cond = threading.Condition(threading.RLock())
        self._objects = {plural: {} for plural in RESOURCES}
        self._usage = {}  # namespace -> priority class -> quota key -> total
        self._usage_by_uid = {}
        # Events by involvedObject.name: an event list for one object need not scan them all.
        self._events_by_object = {}
        # The garbage collector's graph: owner uid → {(plural, key)} of the objects naming it.
        self._dependents = {}
        self._rv = 0
        self._history = []
        self._compacted_rv = 0
        self._history_limit = history_limit
        self._snapshots = OrderedDict()
        self._snapshot_limit = snapshot_limit
        self._snapshot_ids = itertools.count(1)
        self._faults = []
        self._logs = {}
        self._watch_generation = 0
        self._abrupt_generations = set()
        self._watch_sockets = set()
        self._connections = 0
        self._closing = False
        self._release_hangs = threading.Event()
        self._ip_counter = itertools.count(1)
        self.requests = deque(maxlen=20_000)
        self.internal_errors = []
        self._calls = set()
        self._httpd = None
        self._thread = None
        for name in ("default", "kube-system"):
            self._create_direct(RESOURCES["namespaces"], None, {"metadata": {"name": name}})

    # ------------------------------------------------------------------ lifecycle
    def start(self):
        server = self

        class Handler(KubeRequestHandler):
            kube = server

        self._httpd = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._release_hangs.set()
        self.drop_watches(abrupt=True)
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=5)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def host(self):
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def api_client(self, **configuration):
        """A `kubernetes.client.ApiClient` pointed at this server; keyword arguments set
        attributes of its `Configuration` (e.g. `retries=False`)."""
        from kubernetes import client

        config = client.Configuration(host=self.host)
        if self.token:
            config.api_key = {"BearerToken": self.token}
            config.api_key_prefix = {"BearerToken": "Bearer"}
        for name, value in configuration.items():
            setattr(config, name, value)
        return client.ApiClient(config)

    def write_kubeconfig(self, path, *, context="pai-test", namespace="default"):
        """Write a kubeconfig file whose `context` points at this server (with its token),
        for code that loads clusters from kubeconfig files."""
        import yaml

        user = {"token": self.token} if self.token else {}
        document = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": {"server": self.host}}],
            "users": [{"name": context, "user": user}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context, "namespace": namespace}}],
            "current-context": context,
        }
        with open(path, "w") as handle:
            yaml.safe_dump(document, handle)
        return path

    # ------------------------------------------------------------------ store core
    @property
    def resource_version(self):
        with self._cond:
            return self._rv

    def _key(self, resource, namespace, name):
        return (namespace or "", name) if resource.namespaced else ("", name)

    def _commit(self, resource, key, obj, event_type, old=None):
        """Store (or delete) an object at the next resourceVersion and record the event."""
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        store = self._objects[resource.plural]
        if resource.plural == "pods":
            self._track_usage(old, None if event_type == "DELETED" else obj)
        self._index_owners(resource, key, store.get(key), None if event_type == "DELETED" else obj)
        if resource.plural == "events":
            self._index_event(key, store.get(key), None if event_type == "DELETED" else obj)
        if event_type == "DELETED":
            store.pop(key, None)
        else:
            store[key] = obj
        self._history.append(HistoryEntry(self._rv, event_type, resource, obj, old))
        if len(self._history) > self._history_limit:
            drop = len(self._history) - self._history_limit
            self._compacted_rv = self._history[drop - 1].rv
            del self._history[:drop]
        self._cond.notify_all()
        return obj

    def _index_event(self, key, previous, current):
        for obj, add in ((previous, False), (current, True)):
            name = ((obj or {}).get("involvedObject") or {}).get("name")
            if name is None:
                continue
            if add:
                self._events_by_object.setdefault(name, set()).add(key)
            else:
                keys = self._events_by_object.get(name, set())
                keys.discard(key)
                if not keys:
                    self._events_by_object.pop(name, None)

    def _indexed(self, resource, query):
        """The stored objects a list can only be among: for an event list whose field
        selector names an involved object, that object's events; otherwise all of them."""
        store = self._objects[resource.plural]
        if resource.plural == "events":
            fields = parse_field_selector(query.get("fieldSelector", ""), resource.fields)
            named = [value for field, op, value in fields if field == "involvedObject.name" and op == "="]
            if named:
                return sorted((key, store[key]) for key in self._events_by_object.get(named[0], ()))
        return sorted(store.items())

    def _require_namespace(self, namespace):
        if self._key(RESOURCES["namespaces"], None, namespace) not in self._objects["namespaces"]:
            raise not_found(RESOURCES["namespaces"], namespace)

    def _get(self, resource, namespace, name):
        obj = self._objects[resource.plural].get(self._key(resource, namespace, name))
        if obj is None:
            raise not_found(resource, name)
        return obj

    def _full(self, resource, obj):
        return {"kind": resource.kind, "apiVersion": resource.api_version, **obj}

    def _generate_name(self, prefix):
        alphabet = "bcdfghjklmnpqrstvwxz2456789"
        return prefix + "".join(random.choice(alphabet) for _ in range(5))

    # ------------------------------------------------------------------ create
    def _create_direct(self, resource, namespace, body):
        body = clone(body)
        body.pop("kind", None)
        body.pop("apiVersion", None)
        meta = body.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if resource.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = self._generate_name(meta["generateName"])
        for system_field in ("uid", "resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "creationTimestamp"):
            meta.pop(system_field, None)
        try:
            self._default(resource, body)
            causes = self._validate(resource, body)
        except (AttributeError, TypeError) as exc:
            # A field of the wrong JSON type: the real server's decoder refuses the body.
            raise bad_request(f"the body of the request could not be decoded: {exc}") from exc
        if causes:
            raise invalid(resource, meta.get("name"), causes)
        with self._cond:
            if resource.namespaced:
                self._require_namespace(namespace)
            key = self._key(resource, namespace, meta["name"])
            if key in self._objects[resource.plural]:
                raise already_exists(resource, meta["name"])
            if resource.plural == "pods":
                self._admit_pod_priority(body)
                self._admit_pod_quota(body)
            if resource.plural == "resourcequotas":
                body["status"] = {"hard": dict(body.get("spec", {}).get("hard") or {}), "used": {}}
                body["status"]["used"] = self._quota_used(namespace, body)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_rfc3339()
            obj = self._commit(resource, key, body, "ADDED")
            if resource.plural == "pods":
                self._refresh_quotas(namespace)
            if meta.get("ownerReferences"):
                # Owners that are already gone: the collector deletes the new object.
                self._collect_garbage({(resource.plural, key)})
            return obj

    def _default(self, resource, body):
        meta = body["metadata"]
        if resource.plural == "namespaces":
            if meta.get("name"):
                meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
            body["spec"] = {"finalizers": ["kubernetes"]}
            body["status"] = {"phase": "Active"}
        elif resource.plural == "pods":
            spec = body.setdefault("spec", {})
            if isinstance(spec, dict):
                spec.setdefault("restartPolicy", "Always")
                spec.setdefault("terminationGracePeriodSeconds", 30)
                spec.setdefault("dnsPolicy", "ClusterFirst")
                spec.setdefault("schedulerName", "default-scheduler")
                spec.setdefault("serviceAccountName", "default")
                spec.setdefault("enableServiceLinks", True)
                for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
                    if not isinstance(container, dict):
                        continue
                    container.setdefault("terminationMessagePath", "/dev/termination-log")
                    container.setdefault("terminationMessagePolicy", "File")
                    image = container.get("image") or ""
                    container.setdefault("imagePullPolicy", "Always" if image.endswith(":latest") or ":" not in image.rsplit("/", 1)[-1] else "IfNotPresent")
                    resources = container.setdefault("resources", {})
                    limits = resources.get("limits") or {}
                    if limits:
                        requests = resources.setdefault("requests", {})
                        for name, value in limits.items():
                            requests.setdefault(name, value)
            body["status"] = {"phase": "Pending", "qosClass": self._qos_class(spec if isinstance(spec, dict) else {})}
            if isinstance(spec, dict) and spec.get("nodeName"):
                body["status"]["conditions"] = [
                    {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now_rfc3339()}
                ]
        elif resource.plural == "persistentvolumeclaims":
            body.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
            body["status"] = {"phase": "Pending"}
        elif resource.plural == "priorityclasses":
            body.setdefault("preemptionPolicy", "PreemptLowerPriority")
        elif resource.plural == "events":
            body.setdefault("count", 1)
            body.setdefault("type", "Normal")
        elif resource.plural == "secrets":
            body.setdefault("type", "Opaque")
            for key, value in (body.pop("stringData", None) or {}).items():
                body.setdefault("data", {})[key] = base64.b64encode(str(value).encode()).decode()

    def _qos_class(self, spec):
        containers = spec.get("containers") or []
        if not containers:
            return "BestEffort"
        # Only cpu and memory decide the QoS class; extended resources such as GPUs do not.
        any_set = False
        guaranteed = True
        for container in containers:
            resources = container.get("resources") or {}
            limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
            if {"cpu", "memory"} & (set(limits) | set(requests)):
                any_set = True
            for name in ("cpu", "memory"):
                if name not in limits or requests.get(name, limits.get(name)) != limits.get(name):
                    guaranteed = False
        if not any_set:
            return "BestEffort"
        return "Guaranteed" if guaranteed else "Burstable"

    def _validate(self, resource, body):
        try:
            if resource.plural == "pods":
                return validation.validate_pod(body)
            if resource.plural == "namespaces":
                return validation.validate_named(body, label_only=True)
            if resource.plural == "resourcequotas":
                return validation.validate_resource_quota(body)
            if resource.plural == "priorityclasses":
                return validation.validate_priority_class(body)
            if resource.plural == "persistentvolumeclaims":
                return validation.validate_pvc(body)
            if resource.plural == "events":
                return validation.validate_event(body)
            if resource.plural == "secrets":
                return validation.validate_secret(body)
            return validation.validate_named(body)
        except validation.Undecodable as exc:
            raise bad_request(str(exc)) from exc

    # ------------------------------------------------------------------ priority
    def _admit_pod_priority(self, pod):
        """The Priority admission plugin: resolve spec.priorityClassName (or the global
        default class) into spec.priority and spec.preemptionPolicy."""
        spec = pod["spec"]
        name = pod["metadata"].get("name")
        class_name = spec.get("priorityClassName")
        if class_name:
            pc = self._objects["priorityclasses"].get(("", class_name))
            if pc is None:
                raise ApiError(403, "Forbidden", f'pods "{name}" is forbidden: no PriorityClass with name {class_name} was found',
                               {"name": name, "kind": "pods"})
        else:
            pc = next((p for _, p in sorted(self._objects["priorityclasses"].items()) if p.get("globalDefault")), None)
        value = pc["value"] if pc else 0
        if spec.get("priority") is not None and spec["priority"] != value:
            raise ApiError(
                403, "Forbidden",
                f'pods "{name}" is forbidden: the integer value of priority ({spec["priority"]}) must not be provided in pod '
                f"spec; priority admission controller computed {value} from the given PriorityClass name",
                {"name": name, "kind": "pods"},
            )
        spec["priority"] = value
        if pc:
            spec["priorityClassName"] = pc["metadata"]["name"]
            spec["preemptionPolicy"] = pc.get("preemptionPolicy", "PreemptLowerPriority")

    # ------------------------------------------------------------------ quota
    def _pod_usage(self, pod):
        """What a pod counts against quota keys (pods, requests.*, limits.*)."""
        uid = pod["metadata"].get("uid")
        if uid in self._usage_by_uid:
            return self._usage_by_uid[uid]
        usage = {"pods": Decimal(1)}
        for container in (pod.get("spec") or {}).get("containers") or []:
            resources = container.get("resources") or {}
            for kind in ("requests", "limits"):
                for name, raw in (resources.get(kind) or {}).items():
                    try:
                        value = parse_quantity(raw)
                    except QuantityError:
                        continue
                    key = f"{kind}.{name}"
                    usage[key] = usage.get(key, Decimal(0)) + value
        # Bare cpu/memory quota keys mean requests.
        for name in ("cpu", "memory"):
            if f"requests.{name}" in usage:
                usage[name] = usage[f"requests.{name}"]
        if uid:
            self._usage_by_uid[uid] = usage
        return usage

    @staticmethod
    def _counts_against_quota(pod):
        return pod is not None and (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES

    def _track_usage(self, old, new):
        """Keep each namespace's running totals over its non-terminal pods, by priority
        class, so that admission and quota status cost the same with ten pods or ten
        thousand (a quota's scope selects priority classes)."""
        for pod, sign in ((old, -1), (new, 1)):
            if self._counts_against_quota(pod):
                by_class = self._usage.setdefault(pod["metadata"]["namespace"], {})
                totals = by_class.setdefault((pod.get("spec") or {}).get("priorityClassName"), {})
                for name, value in self._pod_usage(pod).items():
                    totals[name] = totals.get(name, Decimal(0)) + sign * value

    @staticmethod
    def _quota_selects(quota, pod):
        """Whether a pod is in the quota's scope; of the scopes only `PriorityClass` is served."""
        return KubeServer._scope_selects(quota, (pod.get("spec") or {}).get("priorityClassName"))

    @staticmethod
    def _scope_selects(quota, value):
        """Whether pods of priority class `value` are in the quota's scope."""
        expressions = ((quota.get("spec") or {}).get("scopeSelector") or {}).get("matchExpressions") or []
        for expression in expressions:
            if expression.get("scopeName") != "PriorityClass":
                continue
            operator, values = expression.get("operator"), expression.get("values") or []
            if (operator == "In" and value not in values) or (operator == "NotIn" and value in values):
                return False
            if (operator == "Exists" and not value) or (operator == "DoesNotExist" and value):
                return False
        return True

    def _quota_totals(self, namespace, quota):
        """Usage of the namespace's non-terminal pods the quota covers."""
        totals = {}
        for class_name, usage in self._usage.get(namespace, {}).items():
            if self._scope_selects(quota, class_name):
                for name, value in usage.items():
                    totals[name] = totals.get(name, Decimal(0)) + value
        return totals

    def _quota_used(self, namespace, quota):
        hard = (quota.get("spec") or {}).get("hard") or {}
        totals = self._quota_totals(namespace, quota)
        return {name: format_quantity(totals.get(name, Decimal(0))) for name in hard}

    def _admit_pod_quota(self, pod):
        namespace = pod["metadata"]["namespace"]
        name = pod["metadata"].get("name")
        requested = self._pod_usage(pod)
        for (ns, quota_name), quota in sorted(self._objects["resourcequotas"].items()):
            if ns != namespace or not self._quota_selects(quota, pod):
                continue
            hard = {k: parse_quantity(v) for k, v in ((quota.get("spec") or {}).get("hard") or {}).items()}
            missing = []
            for key in sorted(hard):
                if key in {"requests.cpu", "requests.memory", "limits.cpu", "limits.memory", "cpu", "memory"}:
                    kind, _, resource_name = key.rpartition(".")
                    kind = kind or "requests"
                    lacking = [
                        c.get("name")
                        for c in pod["spec"].get("containers") or []
                        if resource_name not in ((c.get("resources") or {}).get(kind) or {})
                    ]
                    if lacking:
                        missing.append(f"{key} for: {','.join(lacking)}")
            if missing:
                raise ApiError(
                    403,
                    "Forbidden",
                    f'pods "{name}" is forbidden: failed quota: {quota_name}: must specify {"; ".join(missing)}',
                    {"name": name, "kind": "pods"},
                )
            totals = self._quota_totals(namespace, quota)
            used = {k: totals.get(k, Decimal(0)) for k in hard}
            exceeded = sorted(k for k in hard if requested.get(k, 0) > 0 and used[k] + requested[k] > hard[k])
            if exceeded:
                def listing(values):
                    return ",".join(f"{k}={format_quantity(values[k])}" for k in exceeded)

                raise ApiError(
                    403,
                    "Forbidden",
                    f'pods "{name}" is forbidden: exceeded quota: {quota_name}, requested: {listing(requested)}, '
                    f"used: {listing(used)}, limited: {listing(hard)}",
                    {"name": name, "kind": "pods"},
                )

    def _refresh_quotas(self, namespace):
        for key, quota in list(self._objects["resourcequotas"].items()):
            if key[0] != namespace:
                continue
            used = self._quota_used(namespace, quota)
            status = quota.get("status") or {}
            hard = dict((quota.get("spec") or {}).get("hard") or {})
            if status.get("used") != used or status.get("hard") != hard:
                updated = clone(quota)
                updated["status"] = {"hard": hard, "used": used}
                self._commit(RESOURCES["resourcequotas"], key, updated, "MODIFIED", old=quota)

    # ------------------------------------------------------------------ update and patch
    def _update(self, resource, namespace, name, new, subresource=None, expect_rv=None):
        """Replace an object with `new`, keeping what the target (main or /status) may not change."""
        try:
            return self._replace(resource, namespace, name, new, subresource, expect_rv)
        except (AttributeError, TypeError) as exc:
            raise bad_request(f"the body of the request could not be decoded: {exc}") from exc

    def _replace(self, resource, namespace, name, new, subresource, expect_rv):
        if not isinstance(new, dict):
            raise bad_request("the body of the request must be an object")
        with self._cond:
            old = self._get(resource, namespace, name)
            key = self._key(resource, namespace, name)
            meta = new.get("metadata")
            if not isinstance(meta, dict):
                raise bad_request("metadata must be an object")
            if meta.get("name") not in (None, name):
                raise bad_request(f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})")
            if resource.namespaced and meta.get("namespace") not in (None, namespace):
                raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
            given_rv = expect_rv if expect_rv is not None else meta.get("resourceVersion")
            if given_rv and given_rv != old["metadata"]["resourceVersion"]:
                raise conflict(
                    resource,
                    name,
                    f'Operation cannot be fulfilled on {resource.plural}{"." + resource.group if resource.group else ""} '
                    f'"{name}": the object has been modified; please apply your changes to the latest version and try again',
                )
            if meta.get("uid") not in (None, old["metadata"]["uid"]):
                raise conflict(
                    resource,
                    name,
                    f"Precondition failed: UID in precondition: {meta.get('uid')}, UID in object meta: {old['metadata']['uid']}",
                )
            if subresource == "status":
                updated = clone(old)
                updated["status"] = clone(new.get("status") or {})
            else:
                updated = clone(new)
                updated.pop("kind", None)
                updated.pop("apiVersion", None)
                updated_meta = updated["metadata"]
                for system_field in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generateName"):
                    if system_field in old["metadata"]:
                        updated_meta[system_field] = old["metadata"][system_field]
                    else:
                        updated_meta.pop(system_field, None)
                updated_meta["name"] = name
                if resource.namespaced:
                    updated_meta["namespace"] = namespace
                if resource.has_status:
                    if "status" in old:
                        updated["status"] = clone(old["status"])
                    else:
                        updated.pop("status", None)
                if resource.plural == "namespaces":
                    updated["spec"] = clone(old.get("spec"))
                causes = self._validate(resource, updated)
                if resource.plural == "pods":
                    causes += self._pod_update_causes(old, updated)
                if causes:
                    raise invalid(resource, name, causes)
            if resource.plural == "resourcequotas" and subresource != "status":
                updated["status"] = {"hard": dict((updated.get("spec") or {}).get("hard") or {}), "used": {}}
                updated["status"]["used"] = self._quota_used(namespace, updated)
            obj = self._commit(resource, key, updated, "MODIFIED", old=old)
            if resource.plural == "pods" and subresource == "status":
                self._refresh_quotas(namespace)
            return obj

    def _pod_update_causes(self, old, new):
        def mutable_view(spec):
            spec = clone(spec or {})
            for group in ("containers", "initContainers"):
                for container in spec.get(group) or []:
                    container.pop("image", None)
            spec.pop("activeDeadlineSeconds", None)
            spec.pop("tolerations", None)
            return spec

        if mutable_view(old.get("spec")) != mutable_view(new.get("spec")):
            return [
                {
                    "reason": "FieldValueForbidden",
                    "message": "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
                    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
                    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
                    "(allow it to be set to 1 if it was previously negative)",
                    "field": "spec",
                }
            ]
        return []

    def _patch(self, resource, namespace, name, body, content_type, subresource=None):
        with self._cond:
            old = self._get(resource, namespace, name)
            current = self._full(resource, old)
            try:
                if content_type == "application/json-patch+json":
                    patched = json_patch(current, body)
                elif content_type == "application/merge-patch+json":
                    patched = merge_patch(current, body)
                elif content_type == "application/strategic-merge-patch+json":
                    patched = strategic_merge_patch(current, body)
                else:
                    raise ApiError(
                        415,
                        "UnsupportedMediaType",
                        f"the body of the request was in an unknown format - accepted media types include: "
                        f"application/json-patch+json, application/merge-patch+json, "
                        f"application/strategic-merge-patch+json (got {content_type})",
                    )
            except PatchTestFailed as exc:
                raise invalid(resource, name, [{"reason": "FieldValueInvalid", "message": str(exc), "field": ""}]) from exc
            except PatchError as exc:
                raise bad_request(str(exc)) from exc
            if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
                raise bad_request("the patch removed the object's metadata")
            patch_rv = patched["metadata"].get("resourceVersion")
            expect = patch_rv if patch_rv != old["metadata"]["resourceVersion"] else None
            return self._update(resource, namespace, name, patched, subresource, expect_rv=expect)

    # ------------------------------------------------------------------ delete
    def _delete(self, resource, namespace, name, options):
        with self._cond:
            old = self._get(resource, namespace, name)
            key = self._key(resource, namespace, name)
            preconditions = options.get("preconditions") or {}
            if preconditions.get("uid") and preconditions["uid"] != old["metadata"]["uid"]:
                raise conflict(
                    resource,
                    name,
                    f"Precondition failed: UID in precondition: {preconditions['uid']}, UID in object meta: {old['metadata']['uid']}",
                )
            if preconditions.get("resourceVersion") and preconditions["resourceVersion"] != old["metadata"]["resourceVersion"]:
                raise conflict(
                    resource,
                    name,
                    f"Precondition failed: ResourceVersion in precondition: {preconditions['resourceVersion']}, "
                    f"ResourceVersion in object meta: {old['metadata']['resourceVersion']}",
                )
            if resource.plural == "pods":
                grace = options.get("gracePeriodSeconds")
                if grace is None:
                    grace = (old.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
                bound = bool((old.get("spec") or {}).get("nodeName"))
                terminal = (old.get("status") or {}).get("phase") in TERMINAL_PHASES
                if bound and not terminal and grace > 0:
                    return 202, self._start_graceful_deletion(resource, key, old, grace)
            if resource.plural == "namespaces":
                return 200, self._delete_namespace(key, old)
            return 200, self._remove(resource, key, old)

    def _start_graceful_deletion(self, resource, key, old, grace):
        meta = old["metadata"]
        if meta.get("deletionTimestamp") and meta.get("deletionGracePeriodSeconds", grace) <= grace:
            return old
        updated = clone(old)
        updated["metadata"]["deletionTimestamp"] = now_rfc3339(grace)
        updated["metadata"]["deletionGracePeriodSeconds"] = grace
        obj = self._commit(resource, key, updated, "MODIFIED", old=old)
        if not meta.get("deletionTimestamp"):
            self._record_pod_event(obj, "Killing", f"Stopping container {self._container_names(obj)[0]}")
        return obj

    def _remove(self, resource, key, old):
        final = clone(old)
        obj = self._commit(resource, key, final, "DELETED", old=old)
        if resource.plural == "pods":
            for container in self._container_names(old):
                self._logs.pop((key[0], key[1], container), None)
            self._usage_by_uid.pop(old["metadata"]["uid"], None)
            self._refresh_quotas(key[0])
        self._collect_garbage(set(self._dependents.get(old["metadata"]["uid"], ())))
        return obj

    # ------------------------------------------------------------------ garbage collection
    def _index_owners(self, resource, key, previous, current):
        for obj, add in ((previous, False), (current, True)):
            for ref in ((obj or {}).get("metadata") or {}).get("ownerReferences") or []:
                uid = ref.get("uid") if isinstance(ref, dict) else None
                if not uid:
                    continue
                if add:
                    self._dependents.setdefault(uid, set()).add((resource.plural, key))
                else:
                    dependents = self._dependents.get(uid, set())
                    dependents.discard((resource.plural, key))
                    if not dependents:
                        self._dependents.pop(uid, None)

    def _owner_exists(self, namespace, ref):
        """Whether the object a reference names exists with its uid (in the dependent's
        namespace when namespaced). A kind this server does not serve counts as there:
        the collector cannot tell, so it keeps the dependent."""
        resource = next(
            (r for r in RESOURCES.values() if r.kind == ref.get("kind") and r.api_version == ref.get("apiVersion")), None
        )
        if resource is None:
            return True
        owner = self._objects[resource.plural].get(self._key(resource, namespace, ref.get("name")))
        return owner is not None and owner["metadata"]["uid"] == ref.get("uid")

    def _collect_garbage(self, dependents):
        """The garbage collector (background propagation), here at once: a dependent whose
        owners are all gone is deleted as a client's delete would (a running pod
        gracefully); one that keeps an owner loses the references to the others."""
        for plural, key in sorted(dependents):
            resource = RESOURCES[plural]
            obj = self._objects[plural].get(key)
            if obj is None:
                continue
            refs = obj["metadata"].get("ownerReferences") or []
            alive = [ref for ref in refs if self._owner_exists(key[0], ref)]
            if not alive:
                self._delete(resource, key[0], key[1], {})
            elif len(alive) < len(refs):
                updated = clone(obj)
                updated["metadata"]["ownerReferences"] = alive
                self._commit(resource, key, updated, "MODIFIED", old=obj)

    def _delete_namespace(self, key, old):
        terminating = clone(old)
        terminating["metadata"]["deletionTimestamp"] = now_rfc3339()
        terminating["metadata"]["deletionGracePeriodSeconds"] = 0
        terminating["status"] = {"phase": "Terminating"}
        terminating = self._commit(RESOURCES["namespaces"], key, terminating, "MODIFIED", old=old)
        # The namespace controller empties the namespace before it goes; here at once.
        namespace = key[1]
        for resource in RESOURCES.values():
            if not resource.namespaced:
                continue
            for obj_key, obj in sorted(self._objects[resource.plural].items()):
                if obj_key[0] == namespace:
                    self._commit(resource, obj_key, clone(obj), "DELETED", old=obj)
        self._commit(RESOURCES["namespaces"], key, clone(terminating), "DELETED", old=terminating)
        return terminating

    # ------------------------------------------------------------------ list and watch
    def _selectors(self, resource, query):
        try:
            labels = parse_label_selector(query.get("labelSelector", ""))
            fields = parse_field_selector(query.get("fieldSelector", ""), resource.fields)
        except SelectorError as exc:
            raise bad_request(str(exc)) from exc
        fields = [(FIELD_ALIASES.get(f, f), op, v) for f, op, v in fields]

        def matches(obj, namespace):
            if obj is None:
                return False
            if namespace and obj["metadata"].get("namespace") != namespace:
                return False
            return labels_match(labels, obj["metadata"].get("labels")) and fields_match(fields, obj)

        return matches

    def _list(self, resource, namespace, query):
        matches = self._selectors(resource, query)
        try:
            limit = int(query.get("limit") or 0)
        except ValueError as exc:
            raise bad_request(f"invalid limit: {query.get('limit')}") from exc
        token = query.get("continue")
        with self._cond:
            snapshot_id = None
            if token:
                try:
                    decoded = json.loads(base64.b64decode(token))
                    snapshot_id, offset = decoded["id"], int(decoded["start"])
                except (ValueError, KeyError, TypeError) as exc:
                    raise bad_request(f"continue key is not valid: {exc}") from exc
                snapshot = self._snapshots.get(snapshot_id)
                if snapshot is None or snapshot.rv < self._compacted_rv:
                    raise gone(
                        "The provided continue parameter is too old to display a consistent list result. "
                        "You can start a new list without the continue parameter."
                    )
                items, list_rv = snapshot.items, snapshot.rv
            else:
                offset = 0
                items, list_rv = self._list_at(resource, namespace, query, matches, exact=limit > 0)
                if limit and len(items) > limit:
                    snapshot_id = next(self._snapshot_ids)
                    self._snapshots[snapshot_id] = Snapshot(list_rv, items)
                    while len(self._snapshots) > self._snapshot_limit:
                        self._snapshots.popitem(last=False)
            page = items[offset : offset + limit] if limit else items[offset:]
            metadata = {"resourceVersion": str(list_rv)}
            remaining = len(items) - offset - len(page)
            if limit and remaining > 0:
                metadata["continue"] = base64.b64encode(
                    json.dumps({"id": snapshot_id, "start": offset + limit, "rv": list_rv}).encode()
                ).decode()
                metadata["remainingItemCount"] = remaining
        return {"kind": f"{resource.kind}List", "apiVersion": resource.api_version, "metadata": metadata, "items": page}

    def _list_at(self, resource, namespace, query, matches, exact):
        """The items a list answers and its resourceVersion. A resourceVersion with
        `resourceVersionMatch=Exact` (or with a limit) is served from that version, 410
        once compacted; otherwise "not older than" is served from the latest state."""
        requested_rv = query.get("resourceVersion")
        exact = exact or query.get("resourceVersionMatch") == "Exact"
        if requested_rv and requested_rv != "0":
            try:
                wanted = int(requested_rv)
            except ValueError as exc:
                raise bad_request(f"invalid resource version: {requested_rv}") from exc
            if exact and wanted < self._compacted_rv:
                raise gone(f"too old resource version: {wanted} ({self._compacted_rv + 1})")
            if wanted > self._rv:
                raise ApiError(
                    504, "Timeout", f"Too large resource version: {wanted}, current: {self._rv}",
                    {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1},
                )
            if exact and wanted < self._rv:
                return self._state_at(resource, wanted, namespace, matches), wanted
        items = [obj for _, obj in self._indexed(resource, query) if matches(obj, namespace)]
        return items, self._rv

    def _state_at(self, resource, rv, namespace, matches):
        """The matching objects as they were at `rv`, rebuilt from the retained history."""
        state = {k: v for k, v in self._objects[resource.plural].items()}
        for entry in reversed(self._history):
            if entry.rv <= rv:
                break
            if entry.resource is not resource:
                continue
            key = self._key(resource, entry.obj["metadata"].get("namespace"), entry.obj["metadata"]["name"])
            if entry.type == "ADDED":
                state.pop(key, None)
            else:
                state[key] = entry.old
        return [obj for _, obj in sorted(state.items()) if matches(obj, namespace)]

    def _watch(self, handler, resource, namespace, query):
        matches = self._selectors(resource, query)
        timeout = query.get("timeoutSeconds")
        deadline = time.monotonic() + (float(timeout) if timeout else DEFAULT_WATCH_TIMEOUT)
        requested_rv = query.get("resourceVersion")
        with self._cond:
            generation = self._watch_generation
            initial = []
            if not requested_rv or requested_rv == "0":
                initial = [
                    ("ADDED", obj)
                    for _, obj in sorted(self._objects[resource.plural].items())
                    if matches(obj, namespace)
                ]
                cursor = self._rv
            else:
                try:
                    cursor = int(requested_rv)
                except ValueError as exc:
                    raise bad_request(f"invalid resource version: {requested_rv}") from exc
            expired = cursor < self._compacted_rv
            oldest = self._compacted_rv + 1
        try:
            handler.start_chunked(200, "application/json")
            # Counted as open only once its headers are out: a connection cut before the
            # response starts is one the client retries as a new request, not a broken watch.
            with self._cond:
                self._watch_sockets.add(handler.connection)
            if expired:
                error = gone(f"too old resource version: {cursor} ({oldest})")
                handler.write_chunk(json.dumps({"type": "ERROR", "object": error.status()}) + "\n")
                handler.end_chunked()
                return
            if initial:
                handler.write_chunks(
                    [json.dumps({"type": event_type, "object": self._full(resource, obj)}) + "\n" for event_type, obj in initial]
                )
            while True:
                with self._cond:
                    while True:
                        if self._closing or generation != self._watch_generation:
                            break
                        if self._rv > cursor:
                            break
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            break
                        # Like the real server, notice a client that went away while idle.
                        if not self._cond.wait(min(remaining, CLIENT_CHECK_SECONDS)) and client_gone(handler.connection):
                            raise ConnectionResetError("the watch's client closed the connection")
                    if self._closing or generation != self._watch_generation or (
                        self._rv <= cursor and time.monotonic() >= deadline
                    ):
                        break
                    if cursor < self._compacted_rv:
                        events, expired = [], True
                    else:
                        start = cursor - self._compacted_rv
                        events, expired = self._history[start:], False
                        cursor = self._rv
                if expired:
                    error = gone(f"too old resource version: {cursor} ({self._compacted_rv + 1})")
                    handler.write_chunk(json.dumps({"type": "ERROR", "object": error.status()}) + "\n")
                    break
                lines = []
                for entry in events:
                    if entry.resource is not resource:
                        continue
                    event_type = self._filtered_event(entry, matches, namespace)
                    if event_type:
                        lines.append(json.dumps({"type": event_type, "object": self._full(resource, entry.obj)}) + "\n")
                if lines:
                    # One chunk per event, as the real server frames them.
                    handler.write_chunks(lines)
            if generation in self._abrupt_generations:
                handler.close_connection = True
                return
            # Unregistered before the client can see the end, so tests can rely on the count.
            with self._cond:
                self._watch_sockets.discard(handler.connection)
            handler.end_chunked()
        except (BrokenPipeError, ConnectionResetError, OSError):
            handler.close_connection = True
        finally:
            with self._cond:
                self._watch_sockets.discard(handler.connection)

    @staticmethod
    def _filtered_event(entry, matches, namespace):
        """The event type a selector-filtered watcher sees: objects entering or leaving the
        selection appear ADDED or DELETED, as on a real server."""
        now = matches(entry.obj, namespace)
        before = matches(entry.old, namespace)
        if entry.type == "ADDED":
            return "ADDED" if now else None
        if entry.type == "DELETED":
            return "DELETED" if before else None
        if now and before:
            return "MODIFIED"
        if now:
            return "ADDED"
        if before:
            return "DELETED"
        return None

    # ------------------------------------------------------------------ binding and logs
    def _bind(self, namespace, name, body):
        target = (body or {}).get("target") or {}
        node = target.get("name")
        resource = RESOURCES["pods"]
        if not node:
            raise invalid(RESOURCES["pods"], name, [{"reason": "FieldValueRequired", "message": "Required value", "field": "target.name"}])
        with self._cond:
            old = self._get(resource, namespace, name)
            if (body.get("metadata") or {}).get("uid") not in (None, old["metadata"]["uid"]):
                raise conflict(resource, name, f"Operation cannot be fulfilled on pods/binding \"{name}\": UID precondition failed")
            if (old.get("spec") or {}).get("nodeName"):
                raise conflict(
                    resource, name,
                    f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is already assigned to node "{old["spec"]["nodeName"]}"',
                )
            if old["metadata"].get("deletionTimestamp"):
                raise conflict(resource, name, f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is being deleted, cannot be assigned to a host')
            updated = clone(old)
            updated["spec"]["nodeName"] = node
            self._set_condition(updated, "PodScheduled", "True")
            # No Scheduled event: the API server writes none for a binding (kube-scheduler does).
            self._commit(resource, self._key(resource, namespace, name), updated, "MODIFIED", old=old)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    def _log(self, namespace, name, query):
        with self._cond:
            pod = self._get(RESOURCES["pods"], namespace, name)
            containers = self._container_names(pod)
            container = query.get("container")
            if not container:
                if len(containers) != 1:
                    raise bad_request(f"a container name must be specified for pod {name}, choose one of: [{' '.join(containers)}]")
                container = containers[0]
            elif container not in containers:
                raise bad_request(f"container {container} is not valid for pod {name}")
            started = any(
                "running" in (s.get("state") or {}) or "terminated" in (s.get("state") or {})
                for s in (pod.get("status") or {}).get("containerStatuses") or []
                if s.get("name") == container
            )
            if not started:
                waiting = "ContainerCreating"
                for status in (pod.get("status") or {}).get("containerStatuses") or []:
                    if status.get("name") == container and "waiting" in (status.get("state") or {}):
                        waiting = status["state"]["waiting"].get("reason", waiting)
                raise bad_request(f'container "{container}" in pod "{name}" is waiting to start: {waiting}')
            text = self._logs.get((namespace, name, container), "")
        tail = query.get("tailLines")
        if tail is not None:
            lines = text.splitlines(keepends=True)
            count = int(tail)
            text = "".join(lines[-count:]) if count > 0 else ""
        limit_bytes = query.get("limitBytes")
        if limit_bytes:
            text = text.encode()[: int(limit_bytes)].decode(errors="ignore")
        return text

    # ------------------------------------------------------------------ HTTP dispatch
    def handle(self, handler, method):
        url = urlsplit(handler.path)
        path = url.path.rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        # Recorded on arrival, so a client holding its answer finds its request counted;
        # the status is filled in before the reply goes out (0: no reply).
        record = RequestRecord([method, path, query, None])
        record.agent, record.at = handler.headers.get("User-Agent", ""), time.monotonic()
        self.requests.append(record)
        if self.token and handler.headers.get("Authorization") != f"Bearer {self.token}":
            record[3] = 401
            handler.send_body(Response(401, ApiError(401, "Unauthorized", "Unauthorized").status()))
            return
        fault = self._take_fault(method, path)
        if fault is not None and fault.latency:
            time.sleep(fault.latency)
            fault = None
        try:
            if fault is not None and fault.hang:
                record[3] = 0
                self._release_hangs.wait(fault.hang)
                handler.close_connection = True
                return
            if fault is not None and not fault.commit:
                raise self._fault_error(fault)
            response = self._route(handler, method, path, query)
            if fault is not None:
                raise self._fault_error(fault)
            if response is None:  # a watch stream, already written
                record[3] = 200
                return
        except ApiError as exc:
            response = Response(exc.code, exc.status(), exc.headers)
        except Exception as exc:
            # A bug in this server: answer like the real one would, and keep it for the
            # fixture to fail the test with.
            self.internal_errors.append(traceback.format_exc())
            response = Response(500, ApiError(500, "InternalError", f"Internal error occurred: {exc!r}").status())
        record[3] = response.status
        handler.send_body(response)

    def _fault_error(self, fault):
        if fault.status == 429:
            return ApiError(
                429, "TooManyRequests", "Too many requests, please try again later.",
                {"causes": [{"message": "Too many requests"}], "retryAfterSeconds": fault.retry_after},
                headers={"Retry-After": str(fault.retry_after)},
            )
        reason = {500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}.get(fault.status, "InternalError")
        return ApiError(fault.status, reason, "Internal error occurred: injected fault", {"causes": [{"message": "injected fault"}]})

    def _take_fault(self, method, path):
        with self._cond:
            now = time.monotonic()
            for fault in self._faults:
                if fault.everything and fault.started is not None and fault.remaining > 0:
                    if now - fault.started < fault.seconds:
                        return fault
                    fault.remaining = 0
                if fault.remaining <= 0 or fault.method not in (method, "*") or not fault.path.search(path):
                    continue
                if fault.after > 0:
                    fault.after -= 1
                    continue
                if fault.seconds is not None:
                    if fault.started is None:
                        fault.started = now
                        if fault.everything:
                            self.drop_watches(abrupt=True)  # a restarting server cuts its streams
                    if now - fault.started >= fault.seconds:
                        fault.remaining = 0
                        continue
                else:
                    fault.remaining -= 1
                return fault
        return None

    def _route(self, handler, method, path, query):
        parts = [p for p in path.split("/") if p]
        if path == "/version":
            return Response(200, {
                **KUBERNETES_VERSION, "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
                "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.25", "compiler": "gc", "platform": "linux/amd64",
            })
        if parts == ["api"]:
            return Response(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}]})
        if parts == ["apis"]:
            return Response(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [self._group_doc(g) for g in GROUPS]})
        if parts[:2] == ["api", "v1"]:
            group, rest = "", parts[2:]
        elif len(parts) >= 2 and parts[0] == "apis" and parts[1] in GROUPS:
            if len(parts) == 2:
                return Response(200, {**self._group_doc(parts[1]), "kind": "APIGroup", "apiVersion": "v1"})
            if parts[2] != GROUPS[parts[1]]:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            group, rest = parts[1], parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            return Response(200, self._resource_list(group))
        namespace = None
        if group == "" and len(rest) == 3 and rest[0] == "namespaces" and rest[2] == "bindings":
            # The legacy bindings collection: the pod is named in the body.
            self._record_call(group, "bindings", "create" if method == "POST" else method.lower())
            if method != "POST":
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
            body = handler.json_body()
            return Response(201, self._bind(rest[1], (body.get("metadata") or {}).get("name"), body))
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] in RESOURCES and RESOURCES[rest[2]].namespaced:
            namespace, rest = rest[1], rest[2:]
        resource = RESOURCES.get(rest[0])
        if resource is None or resource.group != group or (namespace and not resource.namespaced):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        subresource = rest[2] if len(rest) > 2 else None
        if len(rest) > 3 or (subresource and subresource not in resource.subresources):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if resource.namespaced and namespace is None and name is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        self._record_call(group, f"{resource.plural}/{subresource}" if subresource else resource.plural,
                          self._rbac_verb(method, name, query))
        return self._operate(handler, method, resource, namespace, name, subresource, query)

    @staticmethod
    def _rbac_verb(method, name, query):
        """The verb RBAC checks for a request, as the real authorizer derives it."""
        if method == "GET":
            if query.get("watch") in {"true", "1"}:
                return "watch"
            return "get" if name else "list"
        if method == "DELETE" and not name:
            return "deletecollection"
        return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, method.lower())

    def _record_call(self, group, resource, verb):
        with self._cond:
            self._calls.add((group, resource, verb))

    def api_calls(self):
        """Every (apiGroup, resource, verb) that requests asked for so far, answered or
        not: what a ClusterRole must grant for the same calls on a real cluster."""
        with self._cond:
            return set(self._calls)

    def _operate(self, handler, method, resource, namespace, name, subresource, query):
        if name is None:
            if method == "GET":
                if query.get("watch") in {"true", "1"}:
                    self._watch(handler, resource, namespace, query)
                    return None
                return Response(200, self._list(resource, namespace, query))
            if method == "POST":
                if resource.namespaced and namespace is None:
                    raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
                obj = self._create_direct(resource, namespace, handler.json_body())
                return Response(201, self._full(resource, obj))
            if method == "DELETE":
                return Response(200, self._delete_collection(resource, namespace, query, handler.json_body(optional=True)))
        elif subresource == "binding":
            if method == "POST":
                return Response(201, self._bind(namespace, name, handler.json_body()))
        elif subresource == "log":
            if method == "GET":
                return Response(200, self._log(namespace, name, query), content_type="text/plain")
        else:
            if method == "GET":
                with self._cond:
                    return Response(200, self._full(resource, self._get(resource, namespace, name)))
            if method == "PUT":
                return Response(200, self._full(resource, self._update(resource, namespace, name, handler.json_body(), subresource)))
            if method == "PATCH":
                content_type = (handler.headers.get("Content-Type") or "").split(";")[0].strip()
                obj = self._patch(resource, namespace, name, handler.json_body(), content_type, subresource)
                return Response(200, self._full(resource, obj))
            if method == "DELETE" and subresource is None:
                options = dict(handler.json_body(optional=True) or {})
                if "gracePeriodSeconds" in query:
                    options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
                code, obj = self._delete(resource, namespace, name, options)
                if resource.returns_deleted_object:
                    return Response(code, self._full(resource, obj))
                details = {"name": name, "kind": resource.plural, "uid": obj["metadata"]["uid"]}
                if resource.group:
                    details["group"] = resource.group
                return Response(code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")

    def _delete_collection(self, resource, namespace, query, options):
        listing = self._list(resource, namespace, {k: v for k, v in query.items() if k in {"labelSelector", "fieldSelector"}})
        options = dict(options or {})
        if "gracePeriodSeconds" in query:
            options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
        deleted = []
        for obj in listing["items"]:
            try:
                deleted.append(self._delete(resource, obj["metadata"].get("namespace"), obj["metadata"]["name"], options)[1])
            except ApiError as exc:
                if exc.code != 404:
                    raise
        return {"kind": listing["kind"], "apiVersion": listing["apiVersion"], "metadata": {"resourceVersion": str(self.resource_version)}, "items": deleted}

    def _group_doc(self, group):
        version = GROUPS[group]
        gv = {"groupVersion": f"{group}/{version}", "version": version}
        return {"name": group, "versions": [gv], "preferredVersion": gv}

    def _resource_list(self, group):
        resources = []
        for resource in RESOURCES.values():
            if resource.group != group:
                continue
            resources.append({
                "name": resource.plural, "singularName": resource.singular, "namespaced": resource.namespaced,
                "kind": resource.kind, "verbs": VERBS, "shortNames": list(resource.short_names),
            })
            for sub in sorted(resource.subresources):
                verbs, kind = {"status": (["get", "patch", "update"], resource.kind), "binding": (["create"], "Binding"), "log": (["get"], "Pod")}[sub]
                resources.append({"name": f"{resource.plural}/{sub}", "singularName": "", "namespaced": resource.namespaced, "kind": kind, "verbs": verbs})
        if not group:
            resources.append({"name": "bindings", "singularName": "binding", "namespaced": True, "kind": "Binding", "verbs": ["create"]})
        group_version = f"{group}/{GROUPS[group]}" if group else "v1"
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}

    # ================================================================== test hooks
    # Reading state in-process.
    def get_object(self, plural, name, namespace=None):
        """A copy of a stored object, or None."""
        resource = RESOURCES[plural]
        with self._cond:
            obj = self._objects[plural].get(self._key(resource, namespace, name))
            return clone(self._full(resource, obj)) if obj else None

    def list_objects(self, plural, namespace=None):
        resource = RESOURCES[plural]
        with self._cond:
            return [
                clone(self._full(resource, obj))
                for key, obj in sorted(self._objects[plural].items())
                if namespace is None or key[0] == namespace
            ]

    def create_object(self, plural, body, namespace=None):
        """Create an object as an API client would (same defaults, validation, admission)."""
        return clone(self._full(RESOURCES[plural], self._create_direct(RESOURCES[plural], namespace, body)))

    def count_requests(self, method=None, path_regex=None, *, agent=None, status=None):
        """Requests with `method`, a path matching `path_regex`, a User-Agent containing
        `agent` and answered `status` (each when given)."""
        pattern = re.compile(path_regex) if path_regex else None
        return sum(
            1 for record in list(self.requests)
            if (method is None or record[0] == method) and (pattern is None or pattern.search(record[1]))
            and (agent is None or agent in record.agent) and (status is None or record[3] == status)
        )

    # Nodes (the kubelet registering, the node controller).
    def add_node(self, name, *, gpus=8, cpu="64", memory="512Gi", pods="110", labels=None, ready=True,
                 unschedulable=False, extra_resources=None, address=None, taints=None):
        """Create or replace a node with its capacity (= allocatable), labels and Ready condition."""
        capacity = {"cpu": str(cpu), "memory": str(memory), "pods": str(pods), "ephemeral-storage": "1Ti"}
        if gpus:
            capacity["nvidia.com/gpu"] = str(gpus)
        for key, value in (extra_resources or {}).items():
            capacity[key] = str(value)
        address = address or self._next_ip("10.0")
        body = {
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **(labels or {})}},
            "spec": {"unschedulable": True} if unschedulable else {},
            "status": {
                "capacity": capacity,
                "allocatable": dict(capacity),
                "conditions": [self._node_condition(ready)],
                "addresses": [{"type": "InternalIP", "address": address}, {"type": "Hostname", "address": name}],
                "nodeInfo": {
                    "architecture": "amd64", "bootID": "", "containerRuntimeVersion": "containerd://2.0.0",
                    "kernelVersion": "6.1.0", "kubeProxyVersion": "", "kubeletVersion": KUBERNETES_VERSION["gitVersion"],
                    "machineID": "", "operatingSystem": "linux", "osImage": "Debian GNU/Linux 12", "systemUUID": "",
                },
            },
        }
        if taints:
            body["spec"]["taints"] = taints
        resource = RESOURCES["nodes"]
        with self._cond:
            old = self._objects["nodes"].get(("", name))
            if old is None:
                return self._create_direct(resource, None, body)["metadata"]["resourceVersion"]
            updated = clone(old)
            updated["metadata"]["labels"] = body["metadata"]["labels"]
            updated["spec"] = body["spec"]
            updated["status"] = body["status"]
            return self._commit(resource, ("", name), updated, "MODIFIED", old=old)["metadata"]["resourceVersion"]

    def add_nodes(self, count, *, prefix="node-", **node_args):
        """`count` identical nodes named prefix0..prefixN-1."""
        for i in range(count):
            self.add_node(f"{prefix}{i}", **node_args)

    def set_node_ready(self, name, ready=True, *, status=None, reason=None):
        """Set the Ready condition: ready=False gives False/KubeletNotReady, or pass status="Unknown"
        (the node controller's NodeStatusUnknown when the kubelet stops reporting)."""
        with self._cond:
            old = self._get(RESOURCES["nodes"], None, name)
            updated = clone(old)
            conditions = [c for c in (updated.get("status") or {}).get("conditions") or [] if c.get("type") != "Ready"]
            condition = self._node_condition(ready, status=status, reason=reason)
            updated.setdefault("status", {})["conditions"] = conditions + [condition]
            self._commit(RESOURCES["nodes"], ("", name), updated, "MODIFIED", old=old)

    def update_node(self, name, *, labels=None, capacity=None, allocatable=None):
        """Merge into a node's labels (a None value removes one), capacity and allocatable
        (e.g. a GPU failing: allocatable nvidia.com/gpu drops below capacity)."""
        with self._cond:
            old = self._get(RESOURCES["nodes"], None, name)
            updated = clone(old)
            meta_labels = updated["metadata"].setdefault("labels", {})
            for key, value in (labels or {}).items():
                if value is None:
                    meta_labels.pop(key, None)
                else:
                    meta_labels[key] = value
            status = updated.setdefault("status", {})
            for field_name, values in (("capacity", capacity), ("allocatable", allocatable)):
                for key, value in (values or {}).items():
                    status.setdefault(field_name, {})[key] = str(value)
            return self._commit(RESOURCES["nodes"], ("", name), updated, "MODIFIED", old=old)["metadata"]["resourceVersion"]

    def set_node_unschedulable(self, name, unschedulable=True):
        with self._cond:
            old = self._get(RESOURCES["nodes"], None, name)
            updated = clone(old)
            if unschedulable:
                updated.setdefault("spec", {})["unschedulable"] = True
            else:
                updated.setdefault("spec", {}).pop("unschedulable", None)
            self._commit(RESOURCES["nodes"], ("", name), updated, "MODIFIED", old=old)

    def delete_node(self, name):
        with self._cond:
            old = self._get(RESOURCES["nodes"], None, name)
            self._remove(RESOURCES["nodes"], ("", name), old)

    def _node_condition(self, ready, *, status=None, reason=None):
        status = status or ("True" if ready else "False")
        default_reason = {"True": "KubeletReady", "False": "KubeletNotReady", "Unknown": "NodeStatusUnknown"}[status]
        message = {
            "True": "kubelet is posting ready status",
            "False": "container runtime network not ready",
            "Unknown": "Kubelet stopped posting node status.",
        }[status]
        moment = now_rfc3339()
        return {
            "type": "Ready", "status": status, "reason": reason or default_reason, "message": message,
            "lastHeartbeatTime": moment, "lastTransitionTime": moment,
        }

    def add_storage_class(self, name, *, binding_mode="Immediate", provisioner="pai.test/provisioner"):
        """A StorageClass; `binding_mode` "WaitForFirstConsumer" delays a claim's volume until a pod uses it."""
        return self._create_direct(
            RESOURCES["storageclasses"], None,
            {"metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": binding_mode},
        )

    def add_pvc(self, namespace, name, *, storage="10Gi", phase="Bound", access_modes=("ReadWriteMany",),
                storage_class=None):
        """A PersistentVolumeClaim as a provisioner left it (Bound by default)."""
        spec = {"accessModes": list(access_modes), "resources": {"requests": {"storage": storage}}}
        if storage_class:
            spec["storageClassName"] = storage_class
        obj = self._create_direct(RESOURCES["persistentvolumeclaims"], namespace, {"metadata": {"name": name}, "spec": spec})
        with self._cond:
            key = (namespace, name)
            old = self._objects["persistentvolumeclaims"][key]
            updated = clone(old)
            updated["status"] = {"phase": phase, "accessModes": list(access_modes), "capacity": {"storage": storage}}
            return self._commit(RESOURCES["persistentvolumeclaims"], key, updated, "MODIFIED", old=old) if phase != "Pending" else obj

    # The kubelet.
    def run_pod(self, namespace, name, *, pod_ip=None):
        """The kubelet starts a bound pod: phase Running, every container running and ready,
        a pod IP; events Pulled/Created/Started. A pod whose secret volume has no Secret
        yet cannot start: it stays Pending, a FailedMount warning is recorded, and None
        is returned (call again once the Secret exists). So does a pod whose claim is not
        Bound, except a claim of a WaitForFirstConsumer class whose selected-node
        annotation names the pod's node: the provisioner binds it there, and the pod starts."""
        with self._cond:
            old = self._bound_pod(namespace, name)
            missing = self._missing_secrets(old)
            if missing:
                for volume, secret in missing:
                    self._record_pod_event(
                        old, "FailedMount", f'MountVolume.SetUp failed for volume "{volume}" : secret "{secret}" not found',
                        event_type="Warning",
                    )
                return None
            unbound = self._unbound_claims(old)
            if unbound:
                self._record_pod_event(
                    old, "FailedMount", f"Unable to attach or mount volumes: unbound claims=[{', '.join(unbound)}]",
                    event_type="Warning",
                )
                return None
            pod = clone(old)
            status = pod.setdefault("status", {})
            moment = now_rfc3339()
            status["phase"] = "Running"
            status["podIP"] = pod_ip or self._next_ip("10.244")
            status["podIPs"] = [{"ip": status["podIP"]}]
            status["hostIP"] = self._node_ip(pod["spec"]["nodeName"])
            status.setdefault("startTime", moment)
            for condition in ("PodScheduled", "Initialized", "ContainersReady", "Ready"):
                self._set_condition(pod, condition, "True")
            status["containerStatuses"] = [
                {
                    "name": c["name"], "image": c["image"], "imageID": f"docker.io/library/{c['image']}@sha256:{'0' * 64}",
                    "containerID": f"containerd://{uuid.uuid4().hex}", "ready": True, "restartCount": 0, "started": True,
                    "state": {"running": {"startedAt": moment}},
                }
                for c in pod["spec"]["containers"]
            ]
            obj = self._commit(RESOURCES["pods"], (namespace, name), pod, "MODIFIED", old=old)
            for container in pod["spec"]["containers"]:
                self._record_pod_event(obj, "Pulled", f'Container image "{container["image"]}" already present on machine')
                self._record_pod_event(obj, "Created", f"Created container: {container['name']}")
                self._record_pod_event(obj, "Started", f"Started container {container['name']}")
            return obj["metadata"]["resourceVersion"]

    def finish_pod(self, namespace, name, exit_code=0, *, reason=None, message=None, phase=None, container=None):
        """The pod's containers terminate with `exit_code`.

        `reason` is a container's terminated reason (OOMKilled, Error, Completed,
        ContainerCannotRun, ...) or, for Evicted/DeadlineExceeded/NodeLost/Shutdown, the
        pod's status.reason. Phase: Succeeded for exit 0 without a pod reason, else Failed
        (override with `phase`). `container` limits the exit code to one container; the
        others end with 0.
        """
        with self._cond:
            old = self._get(RESOURCES["pods"], namespace, name)
            pod = clone(old)
            status = pod.setdefault("status", {})
            moment = now_rfc3339()
            pod_reason = reason if reason in POD_REASONS else None
            statuses = {s["name"]: s for s in status.get("containerStatuses") or []}
            new_statuses = []
            for spec_container in pod["spec"]["containers"]:
                code = exit_code if container in (None, spec_container["name"]) else 0
                if code == 0:
                    container_reason = "Completed"
                elif reason and not pod_reason:
                    container_reason = reason
                else:
                    container_reason = "Error"
                previous = statuses.get(spec_container["name"], {})
                started_at = ((previous.get("state") or {}).get("running") or {}).get("startedAt", moment)
                terminated = {
                    "exitCode": code, "reason": container_reason, "startedAt": started_at, "finishedAt": moment,
                    "containerID": previous.get("containerID", f"containerd://{uuid.uuid4().hex}"),
                }
                if message and not pod_reason and code:
                    terminated["message"] = message
                new_statuses.append({
                    "name": spec_container["name"], "image": spec_container["image"],
                    "imageID": previous.get("imageID", ""), "containerID": terminated["containerID"],
                    "ready": False, "restartCount": previous.get("restartCount", 0), "started": False,
                    "state": {"terminated": terminated},
                })
            status["containerStatuses"] = new_statuses
            failed = pod_reason is not None or any(s["state"]["terminated"]["exitCode"] for s in new_statuses)
            status["phase"] = phase or ("Failed" if failed else "Succeeded")
            if pod_reason:
                status["reason"] = pod_reason
                status["message"] = message or {
                    "Evicted": "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi.",
                    "DeadlineExceeded": "Pod was active on the node longer than the specified deadline",
                    "NodeLost": f"Node {pod['spec'].get('nodeName')} which was running pod {name} is unresponsive",
                    "Shutdown": "Pod was terminated in response to imminent node shutdown.",
                }.get(pod_reason, pod_reason)
            if pod_reason == "Evicted":
                # The kubelet marks pods it evicts under node pressure (PodDisruptionConditions).
                self._set_condition(pod, "DisruptionTarget", "True", reason="TerminationByKubelet")
            self._set_condition(pod, "Ready", "False", reason="PodCompleted")
            self._set_condition(pod, "ContainersReady", "False", reason="PodCompleted")
            obj = self._commit(RESOURCES["pods"], (namespace, name), pod, "MODIFIED", old=old)
            if pod_reason in {"Evicted", "DeadlineExceeded"}:
                self._record_pod_event(obj, pod_reason, status["message"], event_type="Warning")
            self._refresh_quotas(namespace)
            return obj["metadata"]["resourceVersion"]

    def wait_image_pull(self, namespace, name, reason="ErrImagePull", message=None):
        """The kubelet cannot pull an image: containers waiting with `reason` (ErrImagePull,
        ImagePullBackOff, InvalidImageName, CreateContainerConfigError); phase stays Pending."""
        with self._cond:
            old = self._bound_pod(namespace, name)
            pod = clone(old)
            message = message or f'failed to pull and unpack image "{pod["spec"]["containers"][0]["image"]}": not found'
            pod["status"]["containerStatuses"] = [
                {
                    "name": c["name"], "image": c["image"], "imageID": "", "ready": False, "restartCount": 0,
                    "started": False, "state": {"waiting": {"reason": reason, "message": message}},
                }
                for c in pod["spec"]["containers"]
            ]
            obj = self._commit(RESOURCES["pods"], (namespace, name), pod, "MODIFIED", old=old)
            self._record_pod_event(obj, "Failed", f"Failed to pull image: {message}", event_type="Warning")
            self._record_pod_event(obj, "Failed", f"Error: {reason}", event_type="Warning")

    def finalize_deletion(self, namespace, name, exit_code=143):
        """The kubelet finishes a graceful deletion: running containers end with `exit_code`
        (MODIFIED, phase Failed or Succeeded) and the pod goes (DELETED)."""
        with self._cond:
            pod = self._get(RESOURCES["pods"], namespace, name)
            if not pod["metadata"].get("deletionTimestamp"):
                raise ValueError(f"pod {namespace}/{name} is not being deleted")
            if (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES:
                if (pod.get("status") or {}).get("phase") == "Running":
                    self.finish_pod(namespace, name, exit_code)
                else:
                    self.finish_pod(namespace, name, 0, phase="Failed")
                pod = self._get(RESOURCES["pods"], namespace, name)
            self._remove(RESOURCES["pods"], (namespace, name), pod)

    def finalize_deletions(self, exit_code=143):
        """Finish every pending graceful pod deletion; returns the (namespace, name) pairs."""
        with self._cond:
            keys = [k for k, pod in sorted(self._objects["pods"].items()) if pod["metadata"].get("deletionTimestamp")]
            for namespace, name in keys:
                self.finalize_deletion(namespace, name, exit_code)
        return keys

    def set_pod_log(self, namespace, name, text, container=None):
        """The text `GET .../pods/NAME/log` serves (for `container`, or the pod's first)."""
        with self._cond:
            pod = self._get(RESOURCES["pods"], namespace, name)
            self._logs[(namespace, name, container or self._container_names(pod)[0])] = text

    def record_event(self, namespace, pod_name, reason, message, *, event_type="Normal", component="kubelet"):
        """A core/v1 Event about a pod, as a kubelet or controller would post it."""
        with self._cond:
            pod = self._get(RESOURCES["pods"], namespace, pod_name)
            return self._record_pod_event(pod, reason, message, event_type=event_type, component=component)

    def _record_pod_event(self, pod, reason, message, *, event_type="Normal", component="kubelet"):
        meta = pod["metadata"]
        moment = now_rfc3339()
        host = (pod.get("spec") or {}).get("nodeName") or ""
        body = {
            "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:16]}", "namespace": meta["namespace"]},
            "involvedObject": {
                "kind": "Pod", "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"],
                "apiVersion": "v1", "resourceVersion": meta["resourceVersion"],
            },
            "reason": reason, "message": message, "type": event_type, "count": 1,
            "source": {"component": component, **({"host": host} if host and component == "kubelet" else {})},
            "firstTimestamp": moment, "lastTimestamp": moment,
            "reportingComponent": component, "reportingInstance": host if component == "kubelet" else "",
        }
        return self._create_direct(RESOURCES["events"], meta["namespace"], body)

    # Faults.
    def inject_fault(self, method, path_regex, *, status=500, count=1, retry_after=1, hang=0.0, commit=False,
                     after=0, seconds=None):
        """The next `count` requests with `method` ("*" for any) whose path matches
        `path_regex` fail: answer `status` (429 adds Retry-After), or with `hang` > 0 wait
        that many seconds and close the connection without an answer. With `commit=True`
        the request is carried out first and its reply lost (the create happened, the
        client saw an error). `after`: that many matching requests go through first;
        `seconds`: an outage — every matching request fails for that long from the first
        one it fails, however many."""
        with self._cond:
            self._faults.append(Fault(
                method, re.compile(path_regex), 1 if seconds is not None else count, status, retry_after, hang, commit,
                after=after, seconds=seconds,
            ))

    def inject_outage(self, seconds, *, method="*", path_regex=r"^/", after=0, status=503):
        """The API server goes down (a restart, an etcd election) at the first request with
        `method` whose path matches `path_regex` after `after` of them went through: from
        then on every request, whatever its path, fails with `status` for `seconds`, and
        the open watches are cut."""
        with self._cond:
            self._faults.append(Fault(
                method, re.compile(path_regex), 1, status, retry_after=0, after=after, seconds=seconds, everything=True,
            ))

    def inject_latency(self, method, path_regex, seconds, *, count=1_000_000, after=0):
        """The next `count` matching requests are answered as usual, `seconds` late (a busy API server)."""
        with self._cond:
            self._faults.append(Fault(method, re.compile(path_regex), count, latency=seconds, after=after))

    def clear_faults(self):
        with self._cond:
            self._faults.clear()
        self._release_hangs.set()
        self._release_hangs = threading.Event()

    def drop_watches(self, *, abrupt=False):
        """End every open watch: cleanly (the stream ends) or `abrupt` (the connection is cut)."""
        with self._cond:
            if abrupt:
                self._abrupt_generations.add(self._watch_generation)
            self._watch_generation += 1
            sockets = list(self._watch_sockets)
            self._cond.notify_all()
        if abrupt:
            for sock in sockets:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def active_watches(self):
        with self._cond:
            return len(self._watch_sockets)

    def open_connections(self):
        """Client connections open right now (kept alive between requests or not)."""
        with self._cond:
            return self._connections

    def _connection_opened(self, delta):
        with self._cond:
            self._connections += delta

    def wait_for_watches(self, count=1, timeout=5.0):
        """Block until at least `count` watches are open; True if they are."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.active_watches() >= count:
                return True
            time.sleep(0.005)
        return False

    def wait_for_watches_closed(self, timeout=5.0):
        """Block until no watch is open; True if none is."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.active_watches() == 0:
                return True
            time.sleep(0.005)
        return False

    def compact(self, rv=None):
        """Forget history up to `rv` (default: now): watches and Exact lists from an older
        version get 410 Gone, as after an etcd compaction."""
        with self._cond:
            rv = self._rv if rv is None else min(int(rv), self._rv)
            if rv <= self._compacted_rv:
                return
            del self._history[: rv - self._compacted_rv]
            self._compacted_rv = rv
            for snapshot_id in [sid for sid, snap in self._snapshots.items() if snap.rv < rv]:
                del self._snapshots[snapshot_id]
            self._cond.notify_all()

    # Helpers for hooks.
    def _bound_pod(self, namespace, name):
        pod = self._get(RESOURCES["pods"], namespace, name)
        if not (pod.get("spec") or {}).get("nodeName"):
            raise ValueError(f"pod {namespace}/{name} is not bound to a node")
        return pod

    def _missing_secrets(self, pod):
        """(volume, secret name) of the pod's non-optional secret volumes whose Secret does not exist."""
        missing = []
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            source = volume.get("secret")
            if source and not source.get("optional") and self._objects["secrets"].get(
                (pod["metadata"]["namespace"], source.get("secretName"))
            ) is None:
                missing.append((volume.get("name"), source.get("secretName")))
        return missing

    def _unbound_claims(self, pod):
        """Names of the pod's claims that are not Bound; a WaitForFirstConsumer claim whose
        selected node is the pod's is bound first, as its provisioner would."""
        namespace, node = pod["metadata"]["namespace"], pod["spec"].get("nodeName")
        unbound = []
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if not claim:
                continue
            key = (namespace, claim)
            pvc = self._objects["persistentvolumeclaims"].get(key)
            if pvc is not None and (pvc.get("status") or {}).get("phase") != "Bound":
                storage_class = self._objects["storageclasses"].get(("", (pvc.get("spec") or {}).get("storageClassName")))
                selected = (pvc["metadata"].get("annotations") or {}).get(SELECTED_NODE_ANNOTATION)
                if (storage_class or {}).get("volumeBindingMode") == "WaitForFirstConsumer" and selected == node:
                    bound = clone(pvc)
                    bound["spec"]["volumeName"] = f"pvc-{pvc['metadata']['uid']}"
                    bound["status"] = {"phase": "Bound", "accessModes": pvc["spec"].get("accessModes") or [],
                                       "capacity": dict(((pvc["spec"].get("resources") or {}).get("requests") or {}))}
                    pvc = self._commit(RESOURCES["persistentvolumeclaims"], key, bound, "MODIFIED", old=pvc)
            if pvc is None or (pvc.get("status") or {}).get("phase") != "Bound":
                unbound.append(claim)
        return unbound

    def _container_names(self, pod):
        return [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]

    def _node_ip(self, node_name):
        node = self._objects["nodes"].get(("", node_name))
        for address in ((node or {}).get("status") or {}).get("addresses") or []:
            if address.get("type") == "InternalIP":
                return address["address"]
        return ""

    def _next_ip(self, prefix):
        n = next(self._ip_counter)
        return f"{prefix}.{n // 250 % 250}.{n % 250 + 1}"

    @staticmethod
    def _set_condition(pod, kind, value, reason=None):
        conditions = pod.setdefault("status", {}).setdefault("conditions", [])
        for condition in conditions:
            if condition.get("type") == kind:
                if condition.get("status") != value:
                    condition["status"] = value
                    condition["lastTransitionTime"] = now_rfc3339()
                if reason:
                    condition["reason"] = reason
                return
        condition = {"type": kind, "status": value, "lastProbeTime": None, "lastTransitionTime": now_rfc3339()}
        if reason:
            condition["reason"] = reason
        conditions.append(condition)


class QuietHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # Clients cutting connections (a stopped watch, a timed-out request) are normal here.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class KubeRequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Without this every small reply waits on Nagle's algorithm and delayed ACKs (~40 ms).
    disable_nagle_algorithm = True
    kube: KubeServer = None

    def log_message(self, format, *args):
        pass

    def setup(self):
        super().setup()
        self.kube._connection_opened(1)

    def finish(self):
        try:
            super().finish()
        finally:
            self.kube._connection_opened(-1)

    def _read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def json_body(self, optional=False):
        if not hasattr(self, "_body"):
            self._body = self._read_body()
        if not self._body:
            if optional:
                return None
            raise bad_request("the request body is empty")
        try:
            return json.loads(self._body)
        except ValueError as exc:
            raise bad_request(f"the body of the request could not be decoded: {exc}") from exc

    def _dispatch(self, method):
        self._body = self._read_body()
        self.kube.handle(self, method)

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_PATCH(self):
        self._dispatch("PATCH")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def send_body(self, response):
        if response.content_type == "application/json":
            payload = json.dumps(response.body).encode()
        else:
            payload = response.body.encode()
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def start_chunked(self, status, content_type):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def write_chunk(self, text):
        self.write_chunks([text])

    def write_chunks(self, texts):
        frames = []
        for text in texts:
            data = text.encode()
            frames.append(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.write(b"".join(frames))
        self.wfile.flush()

    def end_chunked(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
