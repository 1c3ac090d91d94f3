"""The scheduler loop's own figures: counted in memory, published to the database.

The loop runs as a chain of django-q2 tasks that moves between worker processes (and
pods, and leaders at every lease handover), while Prometheus scrapes the web processes.
A process-local registry would be scattered over processes that come and go, reset at
every handover, and invisible to the web. So the loop counts into this recorder and
publishes the increments every few seconds into one `WorkerFigures` row, merged under a
row lock: the counters stay monotonic across handovers and restarts, and any web process
exposes them (`apps.monitoring.metrics`). A worker killed between two publications loses
at most those few seconds of counts.

Names and label sets are the metric's, as Prometheus shows them; label values are short
(cluster, VC, verb) so the row stays small.
"""

import json
import logging
import threading
import time

from django.db import DatabaseError, transaction

from .models import WorkerFigures

log = logging.getLogger(__name__)

PUBLISHER = "scheduler"
PUBLISH_EVERY_SECONDS = 5.0
# Seconds: a cycle of a quiet cluster takes milliseconds, a cycle of a farm a second or two.
CYCLE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
HISTOGRAM_BUCKETS = {"pai_scheduler_cycle_duration_seconds": CYCLE_BUCKETS}


def label_key(labels):
    """A label set as a stable JSON key: sorted [name, value] pairs."""
    return json.dumps(sorted((str(k), str(v)) for k, v in labels.items()))


def labels_of(key):
    return dict(json.loads(key))


class Recorder:
    """Increments since the last publication; `publish()` merges them into the row."""

    def __init__(self):
        self._lock = threading.Lock()
        self._reset()
        self._published_at = time.monotonic()

    def _reset(self):
        self._counters = {}  # (name, key) → increment
        self._histograms = {}  # (name, key) → [bucket counts..., sum, count]
        self._gauges = {}  # (name, key) → value

    def count(self, name, amount=1, **labels):
        if amount:
            with self._lock:
                slot = (name, label_key(labels))
                self._counters[slot] = self._counters.get(slot, 0) + amount

    def observe(self, name, value, **labels):
        buckets = HISTOGRAM_BUCKETS[name]
        with self._lock:
            slot = (name, label_key(labels))
            counts = self._histograms.setdefault(slot, [0] * (len(buckets) + 2))
            for i, bound in enumerate(buckets):
                if value <= bound:
                    counts[i] += 1
            counts[-2] += value
            counts[-1] += 1

    def set(self, name, value, **labels):
        with self._lock:
            self._gauges[(name, label_key(labels))] = value

    def publish(self, force=False):
        """Merge what was counted into the database, at most every PUBLISH_EVERY_SECONDS
        unless `force`. A failure keeps the increments for the next try."""
        now = time.monotonic()
        if not force and now - self._published_at < PUBLISH_EVERY_SECONDS:
            return False
        with self._lock:
            counters, histograms, gauges = self._counters, self._histograms, self._gauges
            self._reset()
        if not (counters or histograms or gauges):
            self._published_at = now
            return False
        try:
            with transaction.atomic():
                row, _ = WorkerFigures.objects.select_for_update().get_or_create(key=PUBLISHER)
                row.data = merge(row.data, counters, histograms, gauges)
                row.save(update_fields=["data", "updated_at"])
        except DatabaseError:
            log.exception("cannot publish the worker's figures; keeping them for the next try")
            with self._lock:
                self._restore(counters, histograms, gauges)
            return False
        self._published_at = now
        return True

    def _restore(self, counters, histograms, gauges):
        for slot, amount in counters.items():
            self._counters[slot] = self._counters.get(slot, 0) + amount
        for slot, counts in histograms.items():
            mine = self._histograms.setdefault(slot, [0] * len(counts))
            self._histograms[slot] = [a + b for a, b in zip(mine, counts)]
        for slot, value in gauges.items():
            self._gauges.setdefault(slot, value)


def merge(data, counters, histograms, gauges):
    """The stored figures plus increments: counters and histograms add up, gauges are replaced."""
    data = {kind: dict(data.get(kind) or {}) for kind in ("counters", "histograms", "gauges")}
    for (name, key), amount in counters.items():
        series = data["counters"].setdefault(name, {})
        series[key] = series.get(key, 0) + amount
    for (name, key), counts in histograms.items():
        series = data["histograms"].setdefault(name, {})
        stored = series.get(key) or [0] * len(counts)
        series[key] = [a + b for a, b in zip(stored, counts)]
    for (name, key), value in gauges.items():
        data["gauges"].setdefault(name, {})[key] = value
    return data


recorder = Recorder()


# -- what the scheduler loop reports ------------------------------------------------------

def cycle_finished(cluster, seconds, outcome):
    """A cycle ran: `ok`, `failed` (its state is rebuilt), or `paused` (the cluster's API
    became unavailable during it)."""
    recorder.count("pai_scheduler_cycles_total", cluster=cluster, outcome=outcome)
    recorder.observe("pai_scheduler_cycle_duration_seconds", seconds, cluster=cluster)
    if outcome == "ok":
        recorder.set("pai_reconciler_last_cycle_timestamp_seconds", time.time(), cluster=cluster)


def decisions_applied(cluster, result):
    """Count a cycle's placements (by VC), preempting jobs and their victims (killed or demoted)."""
    for allocation in result.placements:
        recorder.count("pai_scheduler_placements_total", cluster=cluster, vc=allocation.vc)
    recorder.count("pai_scheduler_preemptions_total", len({p.by_job for p in result.preemptions}), cluster=cluster)
    for preemption in result.preemptions:
        recorder.count(
            "pai_scheduler_preemption_victims_total", cluster=cluster, mode="lazy" if preemption.lazy else "kill"
        )


def pod_api_observer(cluster):
    """The Kubernetes client's per-request callback for one cluster."""

    def observe(resource, verb, outcome):
        recorder.count("pai_pod_api_requests_total", cluster=cluster, resource=resource, verb=verb, outcome=outcome)

    return observe
