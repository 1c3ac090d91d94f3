"""The scheduler loop: while this process holds the lease, run a cycle per cluster every tick."""

import logging
import time

from django.db import close_old_connections

from apps.clusters.models import Cluster

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
    holder = holder or lease.new_holder_id()
    controllers = {}
    started = time.monotonic()
    deadline = None if duration is None else started + duration
    leading = False
    try:
        while True:
            close_old_connections()
            leading = lease.acquire(holder)
            if leading:
                run_cycles(controllers)
            elif controllers:
                log.warning("lost the scheduler lease to %s; standing by", lease.current_holder())
                controllers.clear()
            now = time.monotonic()
            if once or (deadline is not None and now >= deadline) or (stop and stop()):
                return leading
            if standby is not None and not controllers and now - started >= standby:
                return False
            time.sleep(tick)
    finally:
        if leading and handover is not None:
            handover()
        if controllers:
            lease.release(holder)
        for controller in controllers.values():
            controller.backend.close()


def run_cycles(controllers):
    for cluster in Cluster.objects.order_by("name"):
        controller = controllers.get(cluster.pk)
        if controller is None or controller.cluster.backend != cluster.backend:
            try:
                controller = controllers[cluster.pk] = Controller(cluster)
            except Exception:
                log.exception("cluster %s: cannot start its backend", cluster.name)
                continue
        try:
            controller.run_cycle()
        except Exception:
            # One cluster's failure must not stop the others; its state is rebuilt next tick.
            log.exception("cluster %s: cycle failed", cluster.name)
            controllers.pop(cluster.pk, None)
