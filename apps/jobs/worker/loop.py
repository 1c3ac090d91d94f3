"""The scheduler loop: while this process holds the lease, run a cycle per cluster every tick.

A controller is dropped when its cycle fails (its state is rebuilt from the database the
next tick), when its cluster's backend or connection changes, when its cluster is
deleted and when the lease is lost; a dropped controller's backend is always closed, so
that no watch thread or connection outlives it. A cluster whose API is unavailable is
not dropped but paused (its backend's circuit decides for how long); the other clusters
go on, and the cluster's row shows the outage (`Cluster.api_*`).
"""

import logging
import time

from django.db import close_old_connections

from apps.clusters.models import Cluster
from apps.clusters.services import record_api_status
from apps.monitoring import efficiency, figures
from scheduler.backends import ClusterUnavailableError

from . import lease
from .controller import Controller

log = logging.getLogger(__name__)

DEFAULT_TICK = 0.5


def run_scheduler(*, duration=None, tick=DEFAULT_TICK, holder=None, once=False, stop=None, standby=None, handover=None):
    """Schedule and reconcile while holding the lease; stand by while another process holds it.

    Returns when `duration` seconds have passed, after one pass with `once`, when `stop()`
    says so, or — with `standby` — when it has not led for that many seconds since it
    started. A process that loses the lease drops its engine state: it is rebuilt from
    the database the next time it leads. `handover()` runs just before a leader that is
    done gives the lease up, so that a successor can be started without a gap.
    """
    fence = lease.Fence(holder or lease.new_holder_id())
    controllers = {}
    started = time.monotonic()
    deadline = None if duration is None else started + duration
    leading = False
    shown = None  # what the log last said: "leading" or "standing by"
    try:
        while True:
            close_old_connections()
            leading = fence.hold()
            if shown != ("leading" if leading else "standing by"):
                shown = "leading" if leading else "standing by"
                log.info("%s: %s (the scheduler lease is held by %s)", fence.holder, shown,
                         fence.holder if leading else lease.current_holder())
            if leading:
                try:
                    run_cycles(controllers, fence)
                except lease.LeaseLost as exc:
                    log.warning("%s; standing by", exc)
                    leading, shown = False, "standing by"
                    drop_all(controllers)
                if leading:
                    # GPU utilisation and the idle-GPU rule, every PAI_GPU_SAMPLE_SECONDS.
                    efficiency.tick(controllers)
                figures.recorder.publish()
            elif controllers:
                log.warning("lost the scheduler lease to %s; standing by", lease.current_holder())
                drop_all(controllers)
            now = time.monotonic()
            if once or (deadline is not None and now >= deadline) or (stop and stop()):
                return leading
            if standby is not None and not controllers and now - started >= standby:
                return False
            time.sleep(tick)
    finally:
        figures.recorder.publish(force=True)
        if leading and handover is not None:
            handover()
        if controllers:
            lease.release(fence.holder)
        drop_all(controllers)


def drop(controllers, key):
    controller = controllers.pop(key, None)
    if controller is not None:
        controller.close()


def drop_all(controllers):
    for key in list(controllers):
        drop(controllers, key)


def _connection_of(cluster):
    return (cluster.backend, cluster.connection)


def run_cycles(controllers, fence=None):
    clusters = list(Cluster.objects.order_by("name"))
    for key in set(controllers) - {cluster.pk for cluster in clusters}:
        drop(controllers, key)
    for cluster in clusters:
        controller = controllers.get(cluster.pk)
        if controller is not None and _connection_of(controller.cluster) != _connection_of(cluster):
            drop(controllers, cluster.pk)
            controller = None
        if controller is None:
            try:
                controller = controllers[cluster.pk] = Controller(cluster, fence=fence)
            except Exception:
                log.exception("cluster %s: cannot start its backend", cluster.name)
                continue
        try:
            availability = run_cycle_unless_paused(controller)
        except lease.LeaseLost:
            raise
        except Exception:
            # One cluster's failure must not stop the others; its state is rebuilt next tick.
            log.exception("cluster %s: cycle failed", cluster.name)
            drop(controllers, cluster.pk)
            continue
        record_api_status(cluster, availability)


def run_cycle_unless_paused(controller, now=None):
    """Run one cycle unless the cluster's API is unavailable and not due for a probe; a
    cycle cut short by the API is paused, not failed. Returns the API's availability."""
    availability = controller.backend.availability()
    if availability.available or availability.retry_in <= 0:
        name, started = controller.cluster.name, time.perf_counter()
        try:
            controller.run_cycle(now)
        except ClusterUnavailableError as exc:
            # What the controller knows stays valid: keep it, and try again later.
            log.warning("cluster %s: %s; paused", name, exc)
            figures.cycle_finished(name, time.perf_counter() - started, "paused")
        except lease.LeaseLost:
            raise
        except Exception:
            figures.cycle_finished(name, time.perf_counter() - started, "failed")
            raise
        else:
            figures.cycle_finished(name, time.perf_counter() - started, "ok")
        availability = controller.backend.availability()
    return availability
