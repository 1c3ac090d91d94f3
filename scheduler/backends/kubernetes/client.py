"""The backend's only door to the Kubernetes API: rate limit, retries, and the list of calls.

Every request goes through :class:`KubeApi`: it waits on a token bucket (bounded QPS and
burst per cluster), retries 429/5xx answers and network failures with bounded
exponential backoff, and names the RBAC call it makes (``API_CALLS`` is the one place
listing them; the Helm chart's ClusterRole must grant exactly these). Objects travel as
plain dicts (``_preload_content=False``): deserialising into the client's models costs
milliseconds per object, which a 1,000-node inventory or a busy watch cannot afford.
"""

from __future__ import annotations

import json
import threading
import time
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
    ("", "namespaces", "create"),
    ("", "namespaces", "get"),
    ("", "resourcequotas", "create"),
    ("", "resourcequotas", "get"),
    ("", "resourcequotas", "patch"),
    ("", "persistentvolumeclaims", "get"),
    ("", "secrets", "create"),  # never get: reading secrets cluster-wide is not pai's business
    ("scheduling.k8s.io", "priorityclasses", "create"),
    ("scheduling.k8s.io", "priorityclasses", "get"),
})

RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})
NETWORK_ERRORS = (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError)


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
    """Retries of one call: ``attempts`` tries in all, waits ``base * 2**n`` capped at ``cap``
    (a 429's Retry-After when longer, still capped)."""

    attempts: int = 5
    base: float = 0.05
    cap: float = 2.0

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        wait = min(self.cap, self.base * (2**retry))
        if retry_after:
            wait = min(self.cap, max(wait, retry_after))
        return wait


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
    """The API could not be reached or kept failing (5xx, 429, timeouts) through every retry."""

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
                 backoff: Backoff = Backoff(), timeout: tuple[float, float] = (5.0, 30.0)):
        self.api_client = api_client
        self.core = k8s.CoreV1Api(api_client)
        self.scheduling = k8s.SchedulingV1Api(api_client)
        self.bucket = TokenBucket(qps, burst)
        self.backoff = backoff
        self.timeout = timeout
        self.retries = 0  # how many retries were needed so far (for tests and metrics)

    # -- plumbing --------------------------------------------------------------------

    def _raw(self, call: tuple[str, str, str], fn, *args, **kwargs):
        assert call in API_CALLS, f"{call} is not in API_CALLS"
        kwargs.setdefault("_request_timeout", self.timeout)
        last = ""
        for attempt in range(self.backoff.attempts):
            self.bucket.take()
            try:
                return fn(*args, _preload_content=False, **kwargs)
            except ApiException as exc:
                if exc.status not in RETRIED_STATUSES:
                    raise KubeError.from_exception(exc) from exc
                last, retry_after = f"{exc.status} {exc.reason}", _retry_after(exc)
            except NETWORK_ERRORS as exc:
                last, retry_after = f"{type(exc).__name__}: {exc}", None
            if attempt + 1 < self.backoff.attempts:
                self.retries += 1
                time.sleep(self.backoff.delay(attempt, retry_after))
        raise Unavailable(f"{call[1]} {call[2]} failed {self.backoff.attempts} times; last: {last}")

    def _json(self, call, fn, *args, **kwargs) -> dict:
        response = self._raw(call, fn, *args, **kwargs)
        try:
            return json.loads(response.data or b"{}")
        finally:
            response.release_conn()

    # -- pods ------------------------------------------------------------------------

    def create_pod(self, namespace: str, body: dict) -> dict:
        return self._json(("", "pods", "create"), self.core.create_namespaced_pod, namespace, body)

    def get_pod(self, namespace: str, name: str) -> dict:
        return self._json(("", "pods", "get"), self.core.read_namespaced_pod, name, namespace)

    def delete_pod(self, namespace: str, name: str, *, grace_seconds: int | None, uid: str | None) -> dict:
        """Without ``grace_seconds`` the pod's own terminationGracePeriodSeconds applies."""
        body = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        if uid:
            body["preconditions"] = {"uid": uid}
        return self._json(("", "pods", "delete"), self.core.delete_namespaced_pod, name, namespace, body=body)

    def list_pods(self, label_selector: str, field_selector: str = "", page: int = 500) -> tuple[list[dict], str]:
        """Every pod matching the selectors in all namespaces, paged; and the list's resourceVersion."""
        items, token = [], None
        while True:
            kwargs = {"label_selector": label_selector, "limit": page}
            if field_selector:
                kwargs["field_selector"] = field_selector
            if token:
                kwargs["_continue"] = token
            listing = self._json(("", "pods", "list"), self.core.list_pod_for_all_namespaces, **kwargs)
            items.extend(listing.get("items") or [])
            token = (listing.get("metadata") or {}).get("continue")
            if not token:
                return items, (listing.get("metadata") or {}).get("resourceVersion", "0")

    def watch_pods(self, label_selector: str, resource_version: str, timeout_seconds: int):
        return self._raw(
            ("", "pods", "watch"), self.core.list_pod_for_all_namespaces, label_selector=label_selector,
            resource_version=resource_version, watch=True, timeout_seconds=timeout_seconds,
            allow_watch_bookmarks=True, _request_timeout=(self.timeout[0], timeout_seconds + 15),
        )

    def read_log(self, namespace: str, name: str, tail_lines: int | None) -> str:
        kwargs = {"tail_lines": tail_lines} if tail_lines is not None else {}
        response = self._raw(("", "pods/log", "get"), self.core.read_namespaced_pod_log, name, namespace, **kwargs)
        try:
            return (response.data or b"").decode("utf-8", errors="replace")
        finally:
            response.release_conn()

    def list_events(self, namespace: str, pod_name: str) -> list[dict]:
        selector = f"involvedObject.kind=Pod,involvedObject.name={pod_name}"
        listing = self._json(("", "events", "list"), self.core.list_namespaced_event, namespace, field_selector=selector)
        return listing.get("items") or []

    # -- nodes -----------------------------------------------------------------------

    def list_nodes(self, page: int = 500) -> tuple[list[dict], str]:
        items, token = [], None
        while True:
            kwargs = {"limit": page}
            if token:
                kwargs["_continue"] = token
            listing = self._json(("", "nodes", "list"), self.core.list_node, **kwargs)
            items.extend(listing.get("items") or [])
            token = (listing.get("metadata") or {}).get("continue")
            if not token:
                return items, (listing.get("metadata") or {}).get("resourceVersion", "0")

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

    def create_secret(self, namespace: str, body: dict) -> dict:
        return self._json(("", "secrets", "create"), self.core.create_namespaced_secret, namespace, body)

    def get_priority_class(self, name: str) -> dict:
        return self._json(("scheduling.k8s.io", "priorityclasses", "get"), self.scheduling.read_priority_class, name)

    def create_priority_class(self, body: dict) -> dict:
        return self._json(("scheduling.k8s.io", "priorityclasses", "create"), self.scheduling.create_priority_class, body)

    def close(self) -> None:
        self.api_client.close()
