"""The Kubernetes backend: pai's pods as Kubernetes pods, bound to their placed nodes.

Three watches (pods with pai's owner label, nodes, and events about pods) run on threads
of their own and keep in-memory caches plus a change feed; everything else runs on the
caller's thread.

- **Change feed.** Every pod watch event becomes one :class:`PodObservation` in an
  ordered feed keyed by the pod's resourceVersion (the server's global counter), so a
  cursor is a resourceVersion. A dropped watch resumes from the last version seen; a
  ``410 Gone`` (history compacted) makes the watcher relist, and cursors older than the
  relist are then refused with :class:`CursorExpiredError`, so the consumer relists too
  (``poll(None)``) and misses no transition. ``poll`` first waits (briefly) until the
  watch has caught up with this backend's own writes, so a pod created before ``poll``
  is in its answer.
- **Nodes** come from the node watch: allocatable devices, CPU and memory, labels
  (SKU and topology keys configurable), health from the Ready condition, and whether
  pai may place there: not cordoned (``spec.unschedulable``) and no NoSchedule or
  NoExecute taint but pai's own dedicated one (``PodOptions.dedicated_taint``, which
  pai's pods tolerate). A fourth watch, of the pods pai does not manage that have not
  ended, sums what they request on each node (devices, CPU, memory): a node whose
  devices other pods hold shows them as ``gpu_used_by_others``. ``on_node_change`` is
  called with each changed node on the caller's thread (during ``poll`` and
  ``list_nodes``), never on the watch's.
- **Before a pod is bound** (``spec.nodeName``: pai's engine is the scheduler), its node
  is checked as kube-scheduler would: it exists, is Ready, not cordoned, has no taint
  pai does not tolerate, and its allocatable devices, CPU and memory hold the pod beside
  what the other pods and pai's own live pods there request; otherwise the creation is a
  :class:`TransientCreationError` naming the node and why. A claim of a
  ``WaitForFirstConsumer`` storage class that has no volume yet gets the node as its
  ``volume.kubernetes.io/selected-node`` (what kube-scheduler would write), so that its
  provisioner makes the volume where the pod runs.
- **Creation** makes sure the tenant's namespace (with its ResourceQuota over
  guaranteed pods, from ``namespace_quota``), the priority class, the image pull
  secret and the storage claims exist, then creates the pod, then the Secret of its
  secret files (owned by the pod, mounted read-only at ``SECRETS_MOUNT_PATH``; see
  ``_ensure_task_secret`` for why in that order). 409 AlreadyExists returns
  the existing pod; quota and admission-webhook refusals are
  :class:`TransientCreationError`; an invalid pod (400/422) or an unknown node is
  :class:`PermanentCreationError`.
- **An unreachable API**: every method raises :class:`ClusterUnavailableError` once the
  client's retries (~30 s) are spent or while its circuit is open; ``availability()``
  says which (see :mod:`.client`).
- **Events** come from one watch of every namespace's pod events: those about pods in
  namespaces pai's pods live in are kept in memory (at most ``events_per_pod`` per pod
  and ``events_limit`` in all, the least recently started pods forgotten first), so
  ``read_events`` costs no request (an events list per pod would cost one API call per
  observed pod, on a field the API server does not index).
- **Logs** come from the pod log endpoint: Kubernetes keeps one interleaved stream, so
  ``stdout`` and ``stderr`` both answer it.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import json
import logging
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from kubernetes.watch.watch import iter_resp_lines

from ...spec import PRIORITY_CLASSES
from ..base import (
    MAX_SECRETS_BYTES,
    Availability,
    ClusterBackend,
    ClusterUnavailableError,
    CursorExpiredError,
    LogStream,
    NodeInfo,
    PermanentCreationError,
    PodConflictError,
    PodEvent,
    PodNotFoundError,
    PodObservation,
    PodSpec,
    TransientCreationError,
    is_valid_pod_name,
    is_valid_secret_key,
)
from . import manifests
from .client import KubeApi, KubeError, Unavailable
from .manifests import LabelKeys, PodOptions

log = logging.getLogger(__name__)

NamespaceQuota = Callable[[str], "dict[str, str] | None"]
# The events watch: every namespace's events about pods (those of pai's kept, see _apply_event).
EVENT_SELECTOR = "involvedObject.kind=Pod"
# The watch of other pods: not pai's, not ended (what kube-scheduler counts on a node).
OTHER_PODS_SELECTOR = f"{manifests.MANAGED_BY}!={manifests.MANAGER}"
LIVE_PODS_FIELDS = "status.phase!=Succeeded,status.phase!=Failed"
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"


def _calls_api(method):
    """An API that stays unavailable through a call's retries (or an open circuit) is the
    interface's ClusterUnavailableError, whatever the call."""

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except Unavailable as exc:
            raise ClusterUnavailableError(f"the Kubernetes API is unavailable: {exc.message}") from exc

    return wrapper


class _Watcher:
    """One watch loop on a thread: list, watch from the list's version, resume after a
    drop, relist after 410. ``relist`` and ``apply`` are the owner's callbacks."""

    def __init__(self, name, relist, open_stream, apply, stop: threading.Event, timeout_seconds: int):
        self.name = name
        self._relist, self._open, self._apply = relist, open_stream, apply
        self._stop = stop
        self.timeout_seconds = timeout_seconds
        self.resource_version: str | None = None
        self.response = None
        self.relists = 0
        self.reconnects = 0
        self.thread = threading.Thread(target=self._run, name=f"pai-kube-{name}-watch", daemon=True)

    def start(self, resource_version: str):
        self.resource_version = resource_version
        self.thread.start()

    def _run(self):
        failures = 0
        while not self._stop.is_set():
            try:
                if self.resource_version is None:
                    self.resource_version = self._relist()
                    self.relists += 1
                self.response = self._open(self.resource_version, self.timeout_seconds)
                if self._stop.is_set():
                    return
                failures = 0
                for line in iter_resp_lines(self.response):
                    if self._stop.is_set():
                        return
                    event = json.loads(line)
                    kind, obj = event.get("type"), event.get("object") or {}
                    if kind == "ERROR":
                        if obj.get("code") == 410:
                            self.resource_version = None
                        break
                    version = (obj.get("metadata") or {}).get("resourceVersion")
                    if kind != "BOOKMARK":
                        self._apply(kind, obj)
                    if version:
                        self.resource_version = version
                self.reconnects += 1
            except KubeError as exc:
                if exc.status == 410:
                    self.resource_version = None
                    continue
                failures += 1
                log.warning("%s watch: %s", self.name, exc)
            except Exception as exc:  # a cut connection or a garbled line: resume from the last version
                if self._stop.is_set():
                    return
                failures += 1
                log.warning("%s watch interrupted: %s", self.name, exc)
            finally:
                response, self.response = self.response, None
                if response is not None:
                    response.close()
            if failures:
                self._stop.wait(min(2.0, 0.05 * 2 ** min(failures, 6)))

    def close(self):
        """Stop the loop (the owner set ``stop``): cut the stream it reads until it ends."""
        deadline = time.monotonic() + 5
        while self.thread.is_alive() and time.monotonic() < deadline:
            response = self.response
            if response is not None:
                try:
                    response.shutdown()
                except Exception:  # a socket closed under another thread's read may complain
                    pass
            self.thread.join(timeout=0.05)


class KubernetesBackend(ClusterBackend):
    """See the module docstring. ``api`` is a :class:`KubeApi` (one per cluster)."""

    def __init__(
        self,
        api: KubeApi,
        *,
        namespace_quota: NamespaceQuota | None = None,
        pod_options: PodOptions = PodOptions(),
        label_keys: LabelKeys = LabelKeys(),
        device_resources: tuple[str, ...] = ("nvidia.com/gpu",),
        on_node_change: Callable[[NodeInfo], None] | None = None,
        watch_timeout_seconds: int = 300,
        feed_limit: int = 200_000,
        events_limit: int = 100_000,
        events_per_pod: int = 50,
        catch_up_seconds: float = 2.0,
        quota_refresh_seconds: float = 300.0,
    ):
        self.api = api
        self.namespace_quota = namespace_quota
        self.pod_options = pod_options
        self.label_keys = label_keys
        self.device_resources = tuple(device_resources)
        self.on_node_change = on_node_change
        self.watch_timeout_seconds = watch_timeout_seconds
        self.feed_limit = feed_limit
        self.events_limit, self.events_per_pod = events_limit, events_per_pod
        self.catch_up_seconds = catch_up_seconds
        self.quota_refresh_seconds = quota_refresh_seconds
        self._lock = threading.Condition()
        self._stop = threading.Event()
        self._started = False
        # Pods: the watch's cache by name, and the feed (parallel lists, versions ascending).
        self._pods: dict[str, dict] = {}
        self._feed_versions: list[int] = []
        self._feed: list[PodObservation] = []
        self._floor = 0  # cursors below this were not followed by the current watch
        self._seen = 0  # the highest pod resourceVersion the watch delivered or listed
        self._written = 0  # the highest resourceVersion of this backend's own pod writes
        # Events of pai's pods, by (namespace, pod), oldest pods first; each pod's by event name.
        self._events: OrderedDict[tuple[str, str], dict[str, tuple[int, PodEvent]]] = OrderedDict()
        self._event_count = 0
        # Nodes.
        self._nodes: dict[str, NodeInfo] = {}
        self._raw_nodes: dict[str, dict] = {}  # the node objects, for the checks before binding
        self._node_changes: deque[NodeInfo] = deque()
        # What creation already made sure of.
        self._namespaces: dict[str, float] = {}
        self._priority_classes: set[str] = set()
        self._secrets: set[tuple[str, str]] = set()
        self._claims: set[tuple[str, str]] = set()
        self._binding_modes: dict[str, str] = {}  # storage class → volumeBindingMode
        # What pods hold on nodes: pai's live pods (name → (node, requests)) and the others'
        # ((namespace, name) → (node, requests)), with the sums by node.
        self._ours: dict[str, tuple[str, tuple[int, float, float]]] = {}
        self._ours_by_node: dict[str, list[float]] = {}
        self._others: dict[tuple[str, str], tuple[str, tuple[int, float, float]]] = {}
        self._others_by_node: dict[str, list[float]] = {}
        self._namespace_of: dict[str, str] = {}
        self._pai_namespaces: set[str] = set()  # the namespaces pai's pods live in
        self._pod_watch = _Watcher(
            "pods", self._relist_pods, lambda rv, t: self.api.watch_pods(manifests.POD_SELECTOR, rv, t),
            self._apply_pod_event, self._stop, watch_timeout_seconds,
        )
        self._node_watch = _Watcher(
            "nodes", self._relist_nodes, self.api.watch_nodes, self._apply_node_event, self._stop, watch_timeout_seconds,
        )
        self._event_watch = _Watcher(
            "events", self._relist_events, lambda rv, t: self.api.watch_events(EVENT_SELECTOR, rv, t),
            self._apply_event, self._stop, watch_timeout_seconds,
        )
        self._others_watch = _Watcher(
            "other-pods", self._relist_others,
            lambda rv, t: self.api.watch_pods(OTHER_PODS_SELECTOR, rv, t, field_selector=LIVE_PODS_FIELDS),
            self._apply_other_event, self._stop, watch_timeout_seconds,
        )

    # -- the watches -----------------------------------------------------------------

    def _ensure_started(self):
        if self._started:
            return
        pods_rv = self._relist_pods()
        others_rv = self._relist_others()
        nodes_rv = self._relist_nodes()
        events_rv = self._relist_events()
        self._started = True
        self._pod_watch.start(pods_rv)
        self._others_watch.start(others_rv)
        self._node_watch.start(nodes_rv)
        self._event_watch.start(events_rv)

    def _relist_pods(self) -> str:
        items, version = self.api.list_pods(manifests.POD_SELECTOR)
        with self._lock:
            self._pods = {item["metadata"]["name"]: item for item in items}
            self._ours, self._ours_by_node = {}, {}
            for item in items:
                self._namespace_of[item["metadata"]["name"]] = item["metadata"]["namespace"]
                self._pai_namespaces.add(item["metadata"]["namespace"])
                self._hold(self._ours, self._ours_by_node, item["metadata"]["name"], item)
            # Changes before the list were not followed: older cursors must relist.
            self._floor = int(version)
            self._seen = max(self._seen, int(version))
            self._feed_versions.clear()
            self._feed.clear()
            self._lock.notify_all()
        return version

    def _apply_pod_event(self, kind: str, obj: dict):
        meta = obj["metadata"]
        version = int(meta["resourceVersion"])
        deleted = kind == "DELETED"
        observation = manifests.observation(obj, deleted=deleted)
        with self._lock:
            if deleted:
                self._pods.pop(meta["name"], None)
                self._hold(self._ours, self._ours_by_node, meta["name"], None)
            else:
                self._pods[meta["name"]] = obj
                self._namespace_of[meta["name"]] = meta["namespace"]
                self._pai_namespaces.add(meta["namespace"])
                self._hold(self._ours, self._ours_by_node, meta["name"], obj)
            self._feed_versions.append(version)
            self._feed.append(observation)
            if len(self._feed) > self.feed_limit:
                # Forget the older half; cursors into it must relist.
                cut = len(self._feed) // 2
                self._floor = self._feed_versions[cut - 1]
                del self._feed_versions[:cut], self._feed[:cut]
            self._seen = max(self._seen, version)
            self._lock.notify_all()

    def _hold(self, holders: dict, by_node: dict, key, obj: dict | None) -> tuple[str, ...]:
        """Record what pod ``key`` holds on its node (``obj`` None, ended or unbound: nothing);
        returns the nodes whose sums changed. Called with the lock held."""
        previous = holders.pop(key, None)
        current = None
        if obj is not None:
            bound = (obj.get("spec") or {}).get("nodeName")
            if bound and (obj.get("status") or {}).get("phase") not in manifests.TERMINAL:
                current = (bound, manifests.pod_requests(obj, self.device_resources))
        if current is not None:
            holders[key] = current
        if previous == current:
            return ()
        changed = []
        for held, sign in ((previous, -1), (current, 1)):
            if held is not None:
                total = by_node.setdefault(held[0], [0, 0.0, 0.0])
                for i, amount in enumerate(held[1]):
                    total[i] += sign * amount
                changed.append(held[0])
        return tuple(changed)

    def _relist_others(self) -> str:
        items, version = self.api.list_pods(OTHER_PODS_SELECTOR, field_selector=LIVE_PODS_FIELDS)
        with self._lock:
            touched = set(self._others_by_node)
            self._others, self._others_by_node = {}, {}
            for item in items:
                key = (item["metadata"].get("namespace"), item["metadata"]["name"])
                self._hold(self._others, self._others_by_node, key, item)
            for node in touched | set(self._others_by_node):
                self._node_used_changed(node)
        return version

    def _apply_other_event(self, kind: str, obj: dict):
        meta = obj["metadata"]
        with self._lock:
            changed = self._hold(self._others, self._others_by_node, (meta.get("namespace"), meta["name"]),
                                 None if kind == "DELETED" else obj)
            for node in changed:
                self._node_used_changed(node)

    def _used_by_others(self, node: str) -> tuple[float, float, float]:
        total = self._others_by_node.get(node)
        return (0, 0.0, 0.0) if total is None else (max(0, total[0]), max(0.0, total[1]), max(0.0, total[2]))

    def _node_used_changed(self, node: str):
        """The other pods' use of ``node`` changed: a new NodeInfo, if the node is known (lock held)."""
        info = self._nodes.get(node)
        if info is None:
            return
        used = self._used_by_others(node)
        fresh = dataclasses.replace(
            info, gpu_used_by_others=int(used[0]), cpu_used_by_others=round(used[1], 3),
            memory_mb_used_by_others=int(math.ceil(used[2])),
        )
        if fresh != info:
            self._nodes[node] = fresh
            self._node_changes.append(fresh)

    def _node_info(self, obj: dict) -> NodeInfo:
        name = (obj.get("metadata") or {}).get("name", "")
        return manifests.node_info(obj, self.device_resources, self.label_keys, self.pod_options.dedicated_taint,
                                   self._used_by_others(name))

    def _relist_events(self) -> str:
        items, version = self.api.list_events(EVENT_SELECTOR)
        with self._lock:
            self._events.clear()
            self._event_count = 0
        for item in items:
            self._apply_event("ADDED", item)
        return version

    def _apply_event(self, kind: str, obj: dict):
        """Keep an event about one of pai's pods (a pod in a namespace pai has pods in), within the bounds."""
        involved = obj.get("involvedObject") or {}
        key = (involved.get("namespace") or (obj.get("metadata") or {}).get("namespace") or "", involved.get("name") or "")
        name = (obj.get("metadata") or {}).get("name") or ""
        with self._lock:
            if key[0] not in self._pai_namespaces:
                return
            events = self._events.get(key)
            if kind == "DELETED":
                if events is not None and events.pop(name, None) is not None:
                    self._event_count -= 1
                return
            if events is None:
                events = self._events[key] = {}
            if name not in events:
                self._event_count += 1
                if len(events) >= self.events_per_pod:
                    # A pod's oldest event goes first (Kubernetes itself folds repeats into a count).
                    del events[min(events, key=lambda n: events[n][0])]
                    self._event_count -= 1
            events[name] = (int((obj.get("metadata") or {}).get("resourceVersion") or 0), manifests.event(obj))
            while self._event_count > self.events_limit and len(self._events) > 1:
                _key, dropped = self._events.popitem(last=False)
                self._event_count -= len(dropped)

    def _relist_nodes(self) -> str:
        items, version = self.api.list_nodes()
        fresh, raw = {}, {}
        with self._lock:
            for item in items:
                info = self._node_info(item)
                fresh[info.name], raw[info.name] = info, item
            self._raw_nodes = raw
            for name, info in fresh.items():
                if self._nodes.get(name) != info:
                    self._node_changes.append(info)
            for name, info in self._nodes.items():
                if name not in fresh:
                    self._node_changes.append(_gone(info))
            self._nodes = fresh
        return version

    def _apply_node_event(self, kind: str, obj: dict):
        with self._lock:
            info = self._node_info(obj)
            if kind == "DELETED":
                self._nodes.pop(info.name, None)
                self._raw_nodes.pop(info.name, None)
                self._node_changes.append(_gone(info))
                return
            self._raw_nodes[info.name] = obj
            if self._nodes.get(info.name) != info:
                self._nodes[info.name] = info
                self._node_changes.append(info)

    def _deliver_node_changes(self):
        if self.on_node_change is None:
            self._node_changes.clear()
            return
        while True:
            try:
                info = self._node_changes.popleft()
            except IndexError:
                return
            self.on_node_change(info)

    def _catch_up(self):
        """Wait until the pod watch delivered this backend's own writes (bounded)."""
        deadline = time.monotonic() + self.catch_up_seconds
        with self._lock:
            while self._seen < self._written:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._lock.wait(left)

    # -- ClusterBackend --------------------------------------------------------------

    @_calls_api
    def list_nodes(self) -> list[NodeInfo]:
        self._ensure_started()
        self._deliver_node_changes()
        with self._lock:
            return [self._nodes[name] for name in sorted(self._nodes)]

    @_calls_api
    def cursor(self) -> str:
        self._ensure_started()
        self._catch_up()
        with self._lock:
            return str(max(self._seen, self._floor))

    @_calls_api
    def poll(self, since: str | None = None) -> list[PodObservation]:
        self._ensure_started()
        self._catch_up()
        self._deliver_node_changes()
        with self._lock:
            if since is None:
                return [manifests.observation(self._pods[name]) for name in sorted(self._pods)]
            try:
                version = int(since)
            except (TypeError, ValueError):
                raise CursorExpiredError(f"{since!r} is not a cursor of this backend") from None
            if version < self._floor:
                raise CursorExpiredError(f"cursor {since} is older than the pod watch ({self._floor}); relist")
            start = bisect.bisect_right(self._feed_versions, version)
            return self._feed[start:]

    @_calls_api
    def list_pods(self, selector: dict[str, str] | None = None) -> list[PodObservation]:
        self._ensure_started()
        wanted = [manifests.POD_SELECTOR] + [f"{k}={v}" for k, v in sorted((selector or {}).items())]
        items, _version = self.api.list_pods(",".join(wanted))
        return sorted((manifests.observation(item) for item in items), key=lambda o: o.name)

    @_calls_api
    def create_pod(self, spec: PodSpec) -> PodObservation:
        if not is_valid_pod_name(spec.name):
            raise PermanentCreationError(f"pod name {spec.name!r} is not a DNS label of at most 63 characters")
        _check_secret_files(spec)
        self._ensure_started()
        try:
            self._require_node(spec.node)
            self._check_node(spec)
            self._ensure_namespace(spec.namespace)
            if spec.priority_class:
                self._ensure_priority_class(spec.priority_class)
            secrets = self._ensure_pull_secret(spec)
            self._require_claims(spec)
            body = manifests.pod(spec, self.pod_options, secrets)
            made = False
            try:
                created = self.api.create_pod(spec.namespace, body)
                made = True
            except KubeError as exc:
                if exc.status != 409:
                    raise
                # Ours from an earlier pass, or a create whose reply was lost: the existing pod wins.
                created = self.api.get_pod(spec.namespace, spec.name)
                if (created.get("metadata") or {}).get("deletionTimestamp"):
                    raise TransientCreationError(f"pod {spec.name} is still being deleted") from exc
            if spec.secrets:
                self._ensure_task_secret(spec, created, made)
        except Unavailable:
            raise
        except KubeError as exc:
            raise _creation_error(spec, exc) from exc
        with self._lock:
            self._namespace_of[spec.name] = spec.namespace
            self._pai_namespaces.add(spec.namespace)
            self._written = max(self._written, int(created["metadata"]["resourceVersion"]))
            # Held from now on, before the watch reports it: the next pod's check counts it.
            self._hold(self._ours, self._ours_by_node, spec.name, created)
        return manifests.observation(created)

    @_calls_api
    def delete_pod(self, name: str, uid: str | None = None, grace_seconds: float | None = None) -> bool:
        namespace = self._find_namespace(name)
        if namespace is None:
            return False
        grace = None if grace_seconds is None else max(0, int(round(grace_seconds)))
        try:
            self.api.delete_pod(namespace, name, grace_seconds=grace, uid=uid)
        except KubeError as exc:
            if exc.status == 404:
                return False
            if exc.status == 409:
                raise PodConflictError(f"pod {name} is not the incarnation {uid}: {exc.message}") from exc
            raise
        return True

    @_calls_api
    def read_log(self, name: str, tail_lines: int | None = None, stream: LogStream = "all") -> str:
        namespace = self._find_namespace(name)
        if namespace is None:
            raise PodNotFoundError(name)
        try:
            return self.api.read_log(namespace, name, tail_lines)
        except KubeError as exc:
            if exc.status == 404:
                raise PodNotFoundError(name) from exc
            if exc.status == 400:  # the container has not started: nothing written yet
                return ""
            raise

    def read_events(self, name: str) -> list[PodEvent]:
        """From the events watch's memory: no request per pod."""
        with self._lock:
            namespace = self._namespace_of.get(name)
            events = list((self._events.get((namespace, name)) or {}).values())
        # Timestamps have whole seconds: within one, the order of creation decides.
        events.sort(key=lambda pair: (pair[1].at is None, pair[1].at, pair[0]))
        return [event for _version, event in events]

    @_calls_api
    def forget_pod(self, name: str) -> None:
        # Kubernetes keeps nothing of a deleted pod (its log and events go with it).
        if self._server_namespace(name) is not None:
            raise PodConflictError(f"pod {name} is not deleted yet")
        with self._lock:
            self._namespace_of.pop(name, None)

    def availability(self) -> Availability:
        circuit = self.api.circuit
        if not circuit.is_open:
            return Availability()
        return Availability(False, circuit.reason, circuit.since, circuit.seconds_left())

    def close(self) -> None:
        self._stop.set()
        self._pod_watch.close()
        self._node_watch.close()
        self._event_watch.close()
        self._others_watch.close()
        self.api.close()

    # -- statistics for tests and benchmarks -----------------------------------------

    @property
    def watch_stats(self) -> dict[str, int]:
        return {
            "pod_relists": self._pod_watch.relists,
            "pod_reconnects": self._pod_watch.reconnects,
            "node_relists": self._node_watch.relists,
            "event_relists": self._event_watch.relists,
            "retries": self.api.retries,
        }

    # -- creation helpers ------------------------------------------------------------

    def _require_node(self, node: str):
        with self._lock:
            known = node in self._nodes
        if not known:
            # The node watch may lag a node that just joined: ask once more.
            self._relist_nodes()
            with self._lock:
                known = node in self._nodes
        if not known:
            raise PermanentCreationError(f"node {node!r} does not exist in the cluster")

    def _check_node(self, spec: PodSpec):
        """Refuse (for now) a node the pod cannot go to: see the module docstring."""
        with self._lock:
            obj = self._raw_nodes.get(spec.node)
            info = self._nodes.get(spec.node)
            others = self._used_by_others(spec.node)
            ours = list(self._ours_by_node.get(spec.node) or (0, 0.0, 0.0))
            previous = self._ours.get(spec.name)
        if obj is None or info is None:
            return  # _require_node refused an unknown node already
        problems = []
        if not info.ready:
            problems.append("it is not Ready")
        if (obj.get("spec") or {}).get("unschedulable"):
            problems.append("it is cordoned")
        taints = manifests.untolerated_taints(obj, self.pod_options.dedicated_taint)
        if taints:
            problems.append(f"it has taints pai does not tolerate: {', '.join(taints)}")
        if previous is not None and previous[0] == spec.node:
            for i, amount in enumerate(previous[1]):  # this pod itself (a retried creation)
                ours[i] -= amount
        gpu = len(spec.devices) or spec.gpu
        cpu = manifests.quantity(manifests._cpu(spec.cpu, self.pod_options.min_cpu))
        memory = spec.memory_mb if spec.memory_mb > 0 else manifests.quantity(self.pod_options.min_memory) / 2**20
        for label, wanted, capacity, used_by_others, used_by_pai in (
            ("devices", gpu, info.gpu, others[0], ours[0]),
            ("CPU", cpu, info.cpu, others[1], ours[1]),
            ("memory (MiB)", memory, info.memory_mb, others[2], ours[2]),
        ):
            if wanted and used_by_others + used_by_pai + wanted > capacity + 1e-9:
                problems.append(
                    f"{label}: {wanted:g} wanted, {capacity:g} allocatable, {used_by_others:g} requested by other pods "
                    f"and {used_by_pai:g} by pai's"
                )
        if problems:
            raise TransientCreationError(f"pod {spec.name}: node {spec.node} cannot take it now: {'; '.join(problems)}")

    def _ensure_namespace(self, namespace: str):
        checked = self._namespaces.get(namespace)
        if checked is not None and time.monotonic() - checked < self.quota_refresh_seconds:
            return
        if checked is None:
            try:
                self.api.get_namespace(namespace)
            except KubeError as exc:
                if exc.status != 404:
                    raise
                try:
                    self.api.create_namespace(manifests.namespace(namespace))
                except KubeError as created:
                    if created.status != 409:
                        raise
        if self.namespace_quota is not None:
            hard = self.namespace_quota(namespace)
            if hard is not None:
                self._ensure_quota(namespace, hard)
        self._namespaces[namespace] = time.monotonic()

    def _ensure_quota(self, namespace: str, hard: dict[str, str]):
        guaranteed = [manifests.priority_class_name(n) for n, value in PRIORITY_CLASSES.items() if value >= 0]
        body = manifests.resource_quota(hard, guaranteed)
        try:
            current = self.api.get_quota(namespace, manifests.QUOTA_NAME)
        except KubeError as exc:
            if exc.status != 404:
                raise
            try:
                self.api.create_quota(namespace, body)
                return
            except KubeError as created:
                if created.status != 409:
                    raise
                current = self.api.get_quota(namespace, manifests.QUOTA_NAME)
        if (current.get("spec") or {}) != body["spec"]:
            self.api.patch_quota(namespace, manifests.QUOTA_NAME, {"spec": body["spec"]})

    def _ensure_priority_class(self, name: str):
        if name in self._priority_classes:
            return
        full = manifests.priority_class_name(name)
        try:
            self.api.get_priority_class(full)
        except KubeError as exc:
            if exc.status != 404:
                raise
            try:
                self.api.create_priority_class(manifests.priority_class(name))
            except KubeError as created:
                if created.status != 409:
                    raise
        self._priority_classes.add(name)

    def _ensure_pull_secret(self, spec: PodSpec) -> list[str]:
        auth = spec.image_pull_auth
        if auth is None or not (auth.username or auth.password):
            return []
        name = manifests.pull_secret_name(auth.registry, auth.username, auth.password)
        if (spec.namespace, name) not in self._secrets:
            # Named by its content: one that exists already holds the same credentials.
            try:
                self.api.create_secret(spec.namespace, manifests.pull_secret(name, auth.registry, auth.username, auth.password))
            except KubeError as exc:
                if exc.status != 409:
                    raise
            self._secrets.add((spec.namespace, name))
        return [name]

    def _ensure_task_secret(self, spec: PodSpec, pod: dict, made: bool):
        """The Secret of the pod's secret files, made after the pod and owned by it.

        Pod first, because only an existing pod can own the Secret: Kubernetes' garbage
        collector then deletes it with the pod however the pod goes (deleted by pai or
        by an operator, lost with its node, gone with its namespace), and no Secret ever
        outlives its pod, not even when the worker dies between the two calls. Until the
        Secret exists the kubelet keeps the pod in ContainerCreating (the volume is not
        optional), so the task never starts without its files; a pod left so by a
        crash is asked for again by the worker, and that call (409 for the pod) makes
        the Secret. 409 for the Secret: an earlier call made it. When the Secret cannot
        be made, a pod this call made goes again, so that the failure leaves nothing.
        """
        try:
            self.api.create_secret(spec.namespace, manifests.task_secret(spec, pod["metadata"]["uid"]))
        except KubeError as exc:
            if exc.status == 409:
                return
            if made:
                try:
                    self.api.delete_pod(spec.namespace, spec.name, grace_seconds=0, uid=pod["metadata"]["uid"])
                except KubeError as deleted:
                    log.warning("pod %s waits for its secrets: %s", spec.name, deleted)
            raise

    def _require_claims(self, spec: PodSpec):
        for storage in spec.storage_mounts:
            if storage.host_path or (spec.namespace, storage.claim) in self._claims:
                continue
            try:
                claim = self.api.get_pvc(spec.namespace, storage.claim)
            except KubeError as exc:
                if exc.status == 404:
                    raise TransientCreationError(
                        f"storage {storage.name}: persistent volume claim {storage.claim!r} does not exist in "
                        f"namespace {spec.namespace}"
                    ) from exc
                raise
            if (claim.get("status") or {}).get("phase") == "Bound":
                self._claims.add((spec.namespace, storage.claim))
            else:
                self._select_node_for_claim(spec, claim)

    def _select_node_for_claim(self, spec: PodSpec, claim: dict):
        """A claim without a volume yet: if its class waits for the first consumer, that is this
        pod, and its node is where the volume must be made (kube-scheduler would write it; pai
        binds pods itself). A claim another pod's node was selected for is left as it is."""
        annotations = (claim.get("metadata") or {}).get("annotations") or {}
        class_name = (claim.get("spec") or {}).get("storageClassName")
        if annotations.get(SELECTED_NODE_ANNOTATION) or not class_name:
            return
        mode = self._binding_modes.get(class_name)
        if mode is None:
            try:
                mode = self.api.get_storage_class(class_name).get("volumeBindingMode") or "Immediate"
            except KubeError as exc:
                if exc.status != 404:
                    raise
                mode = "Immediate"
            self._binding_modes[class_name] = mode
        if mode == "WaitForFirstConsumer":
            self.api.patch_pvc(spec.namespace, claim["metadata"]["name"],
                               {"metadata": {"annotations": {SELECTED_NODE_ANNOTATION: spec.node}}})

    # -- finding a pod's namespace ---------------------------------------------------

    def _find_namespace(self, name: str) -> str | None:
        with self._lock:
            namespace = self._namespace_of.get(name)
        return namespace if namespace is not None else self._server_namespace(name)

    def _server_namespace(self, name: str) -> str | None:
        items, _version = self.api.list_pods(manifests.POD_SELECTOR, field_selector=f"metadata.name={name}")
        if not items:
            return None
        namespace = items[0]["metadata"]["namespace"]
        with self._lock:
            self._namespace_of[name] = namespace
            self._pai_namespaces.add(namespace)
        return namespace


def _check_secret_files(spec: PodSpec):
    """Refuse before anything is made what the Secret of the pod's files could not hold."""
    bad = sorted(key for key in spec.secrets if not is_valid_secret_key(key))
    if bad:
        raise PermanentCreationError(f"pod {spec.name}: secret names {bad} cannot be file names")
    size = sum(len(value.encode()) for value in spec.secrets.values())
    if size > MAX_SECRETS_BYTES:
        raise PermanentCreationError(
            f"pod {spec.name}: the secrets hold {size} bytes, more than a Secret's {MAX_SECRETS_BYTES}"
        )


def _gone(info: NodeInfo) -> NodeInfo:
    """A deleted node, reported as not ready and not schedulable."""
    return NodeInfo(info.name, info.ip, info.gpu, info.cpu, info.memory_mb, info.labels, ready=False, schedulable=False)


def _creation_error(spec: PodSpec, exc: KubeError):
    text = f"pod {spec.name}: {exc.status} {exc.reason}: {exc.message}"
    if exc.status == 403 or "admission webhook" in exc.message:
        # Quota exceeded, or an admission webhook refusing for now: may pass later.
        return TransientCreationError(text)
    if exc.status in (400, 422):
        return PermanentCreationError(text)
    return TransientCreationError(text)


__all__ = ["KubernetesBackend"]
