"""The scheduler loop: while this process holds the lease, run a cycle per cluster every tick."""

import logging
import time

from django.db import close_old_connections

from apps.clusters.models import Cluster

from . import lease
from .controller import Controller

log = logging.getLogger(__name__)

DEFAULT_TICK = 0.5


def run_scheduler(*, duration=None, tick=DEFAULT_TICK, holder=None, once=False, stop=None):
    """Schedule and reconcile while holding the lease; stand by while another process holds it.

    Returns when `duration` seconds have passed, after one pass with `once`, or when
    `stop()` says so. A process that loses the lease drops its engine state: it is rebuilt
    from the database the next time it leads.
    """
    holder = holder or lease.new_holder_id()
    controllers = {}
    deadline = None if duration is None else time.monotonic() + duration
    try:
        while True:
            close_old_connections()
            if lease.acquire(holder):
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
                        # One cluster's failure must not stop the others; its state is rebuilt.
                        log.exception("cluster %s: cycle failed", cluster.name)
                        controllers.pop(cluster.pk, None)
            elif controllers:
                log.warning("lost the scheduler lease to %s; standing by", lease.current_holder())
                controllers.clear()
            if once or (deadline is not None and time.monotonic() >= deadline) or (stop and stop()):
                return
            time.sleep(tick)
    finally:
        if controllers:
            lease.release(holder)
        for controller in controllers.values():
            controller.backend.close()
