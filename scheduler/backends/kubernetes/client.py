"""The backend's only door to the Kubernetes API: rate limit, retries, a circuit, the list of calls.

Every request goes through :class:`KubeApi`:

- it waits on a token bucket (bounded QPS and burst per cluster);
- it retries 429/5xx answers and network failures with exponential backoff and jitter
  for up to ``Backoff.budget`` seconds (~30 s: an API server restart or an etcd election
  passes inside one call), honouring a ``Retry-After`` up to a bound;
- a call that fails through its whole budget opens the cluster's :class:`Circuit`: for a
  cool-down every call fails at once (:class:`Unavailable`) instead of waiting out its
  own budget, so the worker pauses that cluster and goes on with the others; then one
  call probes, and a success closes the circuit;
- before each attempt it asks the caller's ``guard`` (the worker's lease: a deposed
  leader must not write) and reports each attempt to the ``observer`` (metrics);
- it names the RBAC call it makes (``API_CALLS`` is the one place listing them; the
  Helm chart's ClusterRole must grant exactly these).

Objects travel as plain dicts (``_preload_content=False``): deserialising into the
client's models costs milliseconds per object, which a 1,000-node inventory or a busy
watch cannot afford.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import urllib3
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

# (apiGroup, resource, verb) of every call the backend makes.
API_CALLS: frozenset[tuple[str, str, str]] = frozenset({
    ("", "pods", "create"),
    ("", "pods", "delete"),
    ("", "pods", "get"),
    ("", "pods", "list"),
    ("", "pods", "watch"),
    ("", "pods/log", "get"),
    ("", "nodes", "list"),
    ("", "nodes", "watch"),
    ("", "events", "list"),
    ("", "events", "watch"),
    ("", "namespaces", "create"),
    ("", "namespaces", "get"),
    ("", "resourcequotas", "create"),
    ("", "resourcequotas", "get"),
    ("", "resourcequotas", "patch"),
    ("", "persistentvolumeclaims", "get"),
    ("", "persistentvolumeclaims", "patch"),  # a WaitForFirstConsumer claim's selected node
    ("storage.k8s.io", "storageclasses", "get"),
    ("", "secrets", "create"),  # never get: reading secrets cluster-wide is not pai's business
    ("scheduling.k8s.io", "priorityclasses", "create"),
    ("scheduling.k8s.io", "priorityclasses", "get"),
})
POD_LIST = "/api/v1/namespaces/{namespace}/pods"
POD = POD_LIST + "/{name}"

# Verbs that change the cluster: the guard may forbid them.
WRITE_VERBS = frozenset({"create", "delete", "deletecollection", "patch", "update"})

RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})
NETWORK_ERRORS = (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError)

# observer(resource, verb, outcome): outcome is "ok", the HTTP status ("409"), "network",
# or "circuit-open" for a call the open circuit refused without sending it.
Observer = Callable[[str, str, str], None]
# guard(write): raises to forbid the request about to be sent (a write when `write`).
Guard = Callable[[bool], None]


class TokenBucket:
    """``qps`` tokens a second, at most ``burst`` saved up; ``take`` blocks until one is there."""

    def __init__(self, qps: float, burst: int, clock=time.monotonic, sleep=time.sleep):
        if qps <= 0 or burst < 1:
            raise ValueError("qps must be > 0 and burst >= 1")
        self.qps, self.burst = float(qps), int(burst)
        self._tokens = float(burst)
        self._clock, self._sleep = clock, sleep
        self._last = clock()
        self._lock = threading.Lock()

    def take(self) -> float:
        """Take one token; returns the seconds waited."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1
            wait = -self._tokens / self.qps if self._tokens < 0 else 0.0
        if wait:
            self._sleep(wait)
        return wait


@dataclass(frozen=True)
class Backoff:
    """Retries of one call: the n-th wait is ``base * 2**n`` capped at ``cap``, half of it
    drawn at random (so that the clients of a restarted API server do not come back in
    step), and a 429/503's Retry-After is waited at least, up to ``retry_after_cap``. The
    call gives up once the next wait would end more than ``budget`` seconds after its
    first try."""

    base: float = 0.2
    cap: float = 5.0
    budget: float = 30.0
    retry_after_cap: float = 10.0

    @classmethod
    def within(cls, budget: float) -> Backoff:
        """The default shape scaled to a budget: 30 s gives the defaults."""
        return cls(base=budget / 150, cap=budget / 6, budget=budget, retry_after_cap=budget / 3)

    def delay(self, retry: int, retry_after: float | None = None, draw: Callable[[], float] = random.random) -> float:
        step = min(self.cap, self.base * (2 ** min(retry, 30)))
        wait = step / 2 + draw() * step / 2
        if retry_after:
            wait = max(wait, min(self.retry_after_cap, retry_after))
        return wait


class Circuit:
    """Whether a cluster's API is worth calling. Closed: calls go out. A call that failed
    through its whole retry budget opens it: calls are refused for ``cooldown`` seconds
    (doubling while probes keep failing, up to ``max_cooldown``); then calls go out again
    as probes, and the first success closes it."""

    def __init__(self, cooldown: float = 10.0, max_cooldown: float = 60.0, clock=time.monotonic, wall=time.time):
        self.cooldown, self.max_cooldown = cooldown, max_cooldown
        self._clock, self._wall = clock, wall
        self._lock = threading.Lock()
        self._open_until: float | None = None
        self._wait = cooldown
        self.reason = ""
        self.since: float | None = None  # wall-clock time it opened (for the status shown)

    @property
    def is_open(self) -> bool:
        """Open, whether or not the cool-down is over (a probe has not succeeded yet)."""
        return self._open_until is not None

    def allows(self) -> bool:
        with self._lock:
            return self._open_until is None or self._clock() >= self._open_until

    def seconds_left(self) -> float:
        with self._lock:
            return 0.0 if self._open_until is None else max(0.0, self._open_until - self._clock())

    def success(self) -> None:
        if self._open_until is None:
            return
        with self._lock:
            self._open_until, self._wait, self.reason, self.since = None, self.cooldown, "", None

    def failure(self, reason: str) -> None:
        with self._lock:
            if self._open_until is None:
                self._wait, self.since = self.cooldown, self._wall()
            else:
                self._wait = min(self.max_cooldown, self._wait * 2)
            self._open_until = self._clock() + self._wait
            self.reason = reason


class KubeError(Exception):
    """An API answer that is not a success (after retries), with the Status fields."""

    def __init__(self, status: int, reason: str = "", message: str = "", details: dict | None = None):
        super().__init__(f"{status} {reason}: {message}".strip())
        self.status, self.reason, self.message, self.details = status, reason, message, details or {}

    @classmethod
    def from_exception(cls, exc: ApiException) -> KubeError:
        body = {}
        try:
            body = json.loads(exc.body or b"{}")
        except (TypeError, ValueError):
            pass
        if not isinstance(body, dict):
            body = {}
        return cls(exc.status or 0, body.get("reason") or exc.reason or "", body.get("message") or str(exc.body or ""), body.get("details"))


class Unavailable(KubeError):
    """The API could not be reached or kept failing (5xx, 429, timeouts) through a call's
    whole retry budget, or the circuit is open."""

    def __init__(self, message: str):
        super().__init__(0, "Unavailable", message)


def _retry_after(exc: ApiException) -> float | None:
    try:
        return float((exc.headers or {}).get("Retry-After"))
    except (TypeError, ValueError):
        return None


class KubeApi:
    """The calls the backend makes, as dicts; see the module docstring."""

    def __init__(self, api_client: k8s.ApiClient, *, qps: float = 50.0, burst: int = 100,
                 backoff: Backoff = Backoff(), timeout: tuple[float, float] = (5.0, 30.0),
                 circuit: Circuit | None = None, observer: Observer | None = None, guard: Guard | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        self.api_client = api_client
        self.core = k8s.CoreV1Api(api_client)
        self.scheduling = k8s.SchedulingV1Api(api_client)
        self.storage = k8s.StorageV1Api(api_client)
        self.bucket = TokenBucket(qps, burst)
        self.backoff = backoff
        self.timeout = timeout
        self.circuit = circuit or Circuit()
        self.observer = observer
        self.guard = guard
        self._sleep = sleep
        self.retries = 0  # how many retries were needed so far (for tests and metrics)

    # -- plumbing --------------------------------------------------------------------

    def _observe(self, call: tuple[str, str, str], outcome: str):
        if self.observer is not None:
            self.observer(call[1], call[2], outcome)

    def _raw(self, call: tuple[str, str, str], fn, *args, **kwargs):
        assert call in API_CALLS, f"{call} is not in API_CALLS"
        kwargs.setdefault("_request_timeout", self.timeout)
        write = call[2] in WRITE_VERBS
        started = time.monotonic()
        retry, last = 0, ""
        while True:
            if not self.circuit.allows():
                self._observe(call, "circuit-open")
                raise Unavailable(
                    f"{call[1]} {call[2]}: not sent, the API has been unavailable ({self.circuit.reason}); "
                    f"next try in {self.circuit.seconds_left():.0f} s"
                )
            if self.guard is not None:
                self.guard(write)
            self.bucket.take()
            try:
                response = fn(*args, _preload_content=False, **kwargs)
            except ApiException as exc:
                # The client's frames in the traceback hold the answer's connection, out of
                # the pool: let them go, or a logged error keeps a socket open.
                exc.__traceback__ = None
                self._observe(call, str(exc.status))
                if exc.status not in RETRIED_STATUSES:
                    self.circuit.success()  # it answered: it is up
                    raise KubeError.from_exception(exc) from exc
                last, retry_after = f"{exc.status} {exc.reason}", _retry_after(exc)
            except NETWORK_ERRORS as exc:
                self._observe(call, "network")
                last, retry_after = f"{type(exc).__name__}: {exc}", None
            else:
                self._observe(call, "ok")
                self.circuit.success()
                return response
            wait = self.backoff.delay(retry, retry_after)
            elapsed = time.monotonic() - started
            if elapsed + wait > self.backoff.budget:
                message = f"{call[1]} {call[2]} failed for {elapsed:.1f} s ({retry + 1} tries); last: {last}"
                self.circuit.failure(message)
                raise Unavailable(message)
            retry += 1
            self.retries += 1
            self._sleep(wait)

    def _send(self, method: str, path: str, path_params: dict, query: list | None = None, body: dict | None = None,
              *, _preload_content: bool = False, _request_timeout=None):
        """One request through the client's own serialisation, authentication and
        connection pool, without the per-operation method around them: that one
        validates a body into the client's pydantic models and dumps it back — about a
        millisecond of CPU per pod for nothing, the body being the API's JSON already.
        For the calls made once per pod; the answer is the raw response, as ``_raw`` wants.
        """
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        request = self.api_client.param_serialize(
            method=method, resource_path=path, path_params=path_params, query_params=query or [],
            header_params=headers, body=body, auth_settings=["BearerToken"],
        )
        response = self.api_client.call_api(*request, _request_timeout=_request_timeout)
        if not 200 <= response.status <= 299:
            response.read()
            raise ApiException.from_response(http_resp=response, body=None, data=None)
        return response.response

    def _json(self, call, fn, *args, **kwargs) -> dict:
        response = self._raw(call, fn, *args, **kwargs)
        try:
            return json.loads(response.data or b"{}")
        finally:
            response.release_conn()

    def _paged(self, call, fn, page: int, **kwargs) -> tuple[list[dict], str]:
        """Every item of a list, page by page; and the list's resourceVersion."""
        items, token = [], None
        while True:
            listing = self._json(call, fn, limit=page, **({"_continue": token} if token else {}), **kwargs)
            items.extend(listing.get("items") or [])
            token = (listing.get("metadata") or {}).get("continue")
            if not token:
                return items, (listing.get("metadata") or {}).get("resourceVersion", "0")

    # -- pods ------------------------------------------------------------------------

    def create_pod(self, namespace: str, body: dict) -> dict:
        return self._json(("", "pods", "create"), self._send, "POST", POD_LIST, {"namespace": namespace}, body=body)

    def get_pod(self, namespace: str, name: str) -> dict:
        return self._json(("", "pods", "get"), self.core.read_namespaced_pod, name, namespace)

    def delete_pod(self, namespace: str, name: str, *, grace_seconds: int | None, uid: str | None) -> None:
        """Without ``grace_seconds`` the pod's own terminationGracePeriodSeconds applies. The
        answer (the pod, being deleted) is read but not decoded: nothing uses it."""
        body = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        if uid:
            body["preconditions"] = {"uid": uid}
        response = self._raw(("", "pods", "delete"), self._send, "DELETE", POD, {"namespace": namespace, "name": name},
                             body=body)
        try:
            response.data  # noqa: B018 (read to the end, so that the connection goes back to the pool)
        finally:
            response.release_conn()

    def list_pods(self, label_selector: str, field_selector: str = "", page: int = 500) -> tuple[list[dict], str]:
        """Every pod matching the selectors in all namespaces, paged; and the list's resourceVersion."""
        selectors = {"field_selector": field_selector} if field_selector else {}
        return self._paged(("", "pods", "list"), self.core.list_pod_for_all_namespaces, page,
                           label_selector=label_selector, **selectors)

    def watch_pods(self, label_selector: str, resource_version: str, timeout_seconds: int, field_selector: str = ""):
        selectors = {"field_selector": field_selector} if field_selector else {}
        return self._raw(
            ("", "pods", "watch"), self.core.list_pod_for_all_namespaces, label_selector=label_selector, **selectors,
            resource_version=resource_version, watch=True, timeout_seconds=timeout_seconds,
            allow_watch_bookmarks=True, _request_timeout=(self.timeout[0], timeout_seconds + 15),
        )

    def read_log(self, namespace: str, name: str, tail_lines: int | None) -> str:
        query = [("tailLines", tail_lines)] if tail_lines is not None else []
        response = self._raw(("", "pods/log", "get"), self._send, "GET", POD + "/log",
                             {"namespace": namespace, "name": name}, query)
        try:
            return (response.data or b"").decode("utf-8", errors="replace")
        finally:
            response.release_conn()

    def list_events(self, field_selector: str, page: int = 500) -> tuple[list[dict], str]:
        """Every event matching the field selector in all namespaces, paged; and the list's resourceVersion."""
        return self._paged(("", "events", "list"), self.core.list_event_for_all_namespaces, page,
                           field_selector=field_selector)

    def watch_events(self, field_selector: str, resource_version: str, timeout_seconds: int):
        return self._raw(
            ("", "events", "watch"), self.core.list_event_for_all_namespaces, field_selector=field_selector,
            resource_version=resource_version, watch=True, timeout_seconds=timeout_seconds,
            allow_watch_bookmarks=True, _request_timeout=(self.timeout[0], timeout_seconds + 15),
        )

    # -- nodes -----------------------------------------------------------------------

    def list_nodes(self, page: int = 500) -> tuple[list[dict], str]:
        return self._paged(("", "nodes", "list"), self.core.list_node, page)

    def watch_nodes(self, resource_version: str, timeout_seconds: int):
        return self._raw(
            ("", "nodes", "watch"), self.core.list_node, resource_version=resource_version, watch=True,
            timeout_seconds=timeout_seconds, allow_watch_bookmarks=True,
            _request_timeout=(self.timeout[0], timeout_seconds + 15),
        )

    # -- what a tenant's pods need ---------------------------------------------------

    def get_namespace(self, name: str) -> dict:
        return self._json(("", "namespaces", "get"), self.core.read_namespace, name)

    def create_namespace(self, body: dict) -> dict:
        return self._json(("", "namespaces", "create"), self.core.create_namespace, body)

    def get_quota(self, namespace: str, name: str) -> dict:
        return self._json(("", "resourcequotas", "get"), self.core.read_namespaced_resource_quota, name, namespace)

    def create_quota(self, namespace: str, body: dict) -> dict:
        return self._json(("", "resourcequotas", "create"), self.core.create_namespaced_resource_quota, namespace, body)

    def patch_quota(self, namespace: str, name: str, body: dict) -> dict:
        return self._json(
            ("", "resourcequotas", "patch"), self.core.patch_namespaced_resource_quota, name, namespace, body,
            _content_type="application/merge-patch+json",
        )

    def get_pvc(self, namespace: str, name: str) -> dict:
        return self._json(
            ("", "persistentvolumeclaims", "get"), self.core.read_namespaced_persistent_volume_claim, name, namespace
        )

    def patch_pvc(self, namespace: str, name: str, body: dict) -> dict:
        return self._json(
            ("", "persistentvolumeclaims", "patch"), self.core.patch_namespaced_persistent_volume_claim, name, namespace,
            body, _content_type="application/merge-patch+json",
        )

    def get_storage_class(self, name: str) -> dict:
        return self._json(("storage.k8s.io", "storageclasses", "get"), self.storage.read_storage_class, name)

    def create_secret(self, namespace: str, body: dict) -> dict:
        return self._json(("", "secrets", "create"), self.core.create_namespaced_secret, namespace, body)

    def get_priority_class(self, name: str) -> dict:
        return self._json(("scheduling.k8s.io", "priorityclasses", "get"), self.scheduling.read_priority_class, name)

    def create_priority_class(self, body: dict) -> dict:
        return self._json(("scheduling.k8s.io", "priorityclasses", "create"), self.scheduling.create_priority_class, body)

    def close(self) -> None:
        self.api_client.close()
