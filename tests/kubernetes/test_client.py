"""The Kubernetes client's retries, its circuit, its guard and its observer, against the API test server."""

import threading
import time

import pytest

from scheduler.backends.kubernetes import Backoff, Circuit, Unavailable

from .conftest import make_api


def test_backoff_grows_with_jitter_up_to_its_cap_and_honours_retry_after_up_to_a_bound():
    backoff = Backoff(base=0.1, cap=1.0, budget=30.0, retry_after_cap=5.0)
    assert [backoff.delay(n, draw=lambda: 0.0) for n in range(6)] == [0.05, 0.1, 0.2, 0.4, 0.5, 0.5]
    assert [backoff.delay(n, draw=lambda: 1.0) for n in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert backoff.delay(0, retry_after=3, draw=lambda: 0.5) == 3
    assert backoff.delay(0, retry_after=60, draw=lambda: 0.5) == 5.0
    assert Backoff.within(30.0) == Backoff()


def test_a_call_rides_out_an_api_server_restart_shorter_than_its_budget(kube_server):
    seen = []
    api = make_api(kube_server, backoff=Backoff(base=0.02, cap=0.2, budget=5.0), observer=lambda *call: seen.append(call))
    kube_server.inject_fault("*", r"^/api/v1/nodes$", status=503, count=1_000_000, retry_after=0)
    threading.Timer(0.6, kube_server.clear_faults).start()
    started = time.monotonic()
    items, _version = api.list_nodes()
    assert items == [] and time.monotonic() - started >= 0.6
    assert seen[0] == ("nodes", "list", "503") and seen[-1] == ("nodes", "list", "ok")
    assert api.retries == len(seen) - 1 and api.retries >= 3
    assert not api.circuit.is_open


def test_retry_after_is_waited_but_not_beyond_its_bound(kube_server):
    waits = []
    api = make_api(kube_server, backoff=Backoff(base=0.01, cap=0.05, budget=100.0, retry_after_cap=7.0), sleep=waits.append)
    kube_server.inject_fault("GET", r"^/api/v1/nodes$", status=429, count=2, retry_after=60)
    api.list_nodes()
    assert waits == [7.0, 7.0]


def test_an_api_down_through_a_whole_budget_opens_the_circuit_then_a_probe_closes_it(kube_server):
    seen = []
    api = make_api(
        kube_server, backoff=Backoff(base=0.01, cap=0.02, budget=0.2), circuit=Circuit(cooldown=0.3, max_cooldown=1.0),
        observer=lambda *call: seen.append(call),
    )
    kube_server.inject_fault("*", r"^/api/v1/nodes$", status=500, count=1_000_000)
    with pytest.raises(Unavailable, match=r"nodes list failed for 0\.\d s .*500"):
        api.list_nodes()
    assert api.circuit.is_open and api.circuit.since == pytest.approx(time.time(), abs=5)
    # Refused at once, without a request: the worker pauses the cluster instead of waiting.
    sent = kube_server.count_requests()
    with pytest.raises(Unavailable, match="not sent"):
        api.list_nodes()
    assert kube_server.count_requests() == sent and seen[-1] == ("nodes", "list", "circuit-open")
    # A probe after the cool-down that fails again doubles it.
    time.sleep(0.3)
    with pytest.raises(Unavailable, match="failed for"):
        api.list_nodes()
    assert api.circuit.seconds_left() > 0.4
    kube_server.clear_faults()
    time.sleep(api.circuit.seconds_left())
    api.list_nodes()
    assert not api.circuit.is_open and api.circuit.reason == ""


def test_any_answer_but_a_retried_one_proves_the_api_up(kube_server):
    api = make_api(kube_server, circuit=Circuit(cooldown=0.0))
    kube_server.inject_fault("*", r"^/api/v1/nodes$", status=500, count=1_000_000)
    with pytest.raises(Unavailable):
        api.list_nodes()
    kube_server.clear_faults()
    with pytest.raises(Exception, match="404"):
        api.get_namespace("no-such-namespace")
    assert not api.circuit.is_open


def test_the_guard_is_asked_before_every_request_and_may_forbid_writes(kube_server):
    asked = []

    class Deposed(Exception):
        pass

    def guard(write):
        asked.append(write)
        if write:
            raise Deposed

    api = make_api(kube_server, guard=guard)
    api.list_nodes()
    with pytest.raises(Deposed):
        api.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "pai-x"}})
    assert asked == [False, True]
    assert kube_server.count_requests("POST") == 0
