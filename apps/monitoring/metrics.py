"""What `/metrics` exposes beyond django-prometheus' request metrics.

Three sources, chosen so that every web process (and every gunicorn worker of it) gives
the same answer whichever one Prometheus reaches:

- **the database, at scrape time**: jobs by VC and state, the queue per VC, the worker
  lease, the reconciler's lag; a few grouped queries on indexed columns, whatever the
  number of jobs (see `benchmarks/bench_metrics.py`);
- **the worker's published figures** (`apps.monitoring.figures`): cycles and their
  durations, placements, preemptions and victims, Kubernetes API requests;
- **this process's request metrics** (django-prometheus' middleware), aggregated over the
  gunicorn workers by prometheus-client's multiprocess mode when
  `PROMETHEUS_MULTIPROC_DIR` is set (the Helm chart sets it), see `exposition()`.
"""

import os
import time

from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from apps.jobs.choices import ExecutionType, JobState
from apps.jobs.models import Job, WorkerLease
from apps.jobs.worker.lease import SCHEDULER_LEASE
from apps.virtualclusters.models import VirtualCluster

from . import figures
from .models import WorkerFigures

HELP = {
    "pai_scheduler_cycles_total": "Scheduling cycles run, by cluster and outcome (ok, failed, paused: the API "
    "became unavailable).",
    "pai_scheduler_cycle_duration_seconds": "How long one scheduling cycle of a cluster took.",
    "pai_scheduler_placements_total": "Jobs placed by the scheduler, by cluster and VC.",
    "pai_scheduler_preemptions_total": "Jobs that preempted others to be placed.",
    "pai_scheduler_preemption_victims_total": "Jobs preempted, killed or demoted to opportunistic (lazy).",
    "pai_pod_api_requests_total": "Requests to a cluster's Kubernetes API, by resource, verb and outcome "
    "(ok, the HTTP status of an error, network, or circuit-open: refused without being sent).",
    "pai_reconciler_last_cycle_timestamp_seconds": "When the last scheduling cycle of a cluster ended (Unix time).",
}


class PaiCollector:
    """The database-derived gauges and the worker's figures, computed at each scrape."""

    def collect(self):
        now = timezone.now()
        vc_names = dict(VirtualCluster.objects.values_list("pk", "name"))
        yield self._jobs(vc_names)
        yield from self._queue(vc_names, now)
        yield from self._lease(now)
        yield from self._worker_figures()

    def describe(self):
        return []  # collected only when scraped, never at registration

    @staticmethod
    def _jobs(vc_names):
        family = GaugeMetricFamily("pai_jobs", "Jobs by virtual cluster and state.", labels=["vc", "state"])
        # COUNT(*) in index order: PostgreSQL answers from the (VC, state) index alone.
        counts = {
            (vc_id, state): n
            for vc_id, state, n in Job.objects.values_list("virtual_cluster_id", "state")
            .annotate(n=Count("*"))
            .order_by("virtual_cluster_id", "state")
        }
        # Every VC × state, zeros included: a series that vanishes is not a series at 0.
        for vc_id, name in sorted(vc_names.items(), key=lambda item: item[1]):
            for state in JobState.values:
                family.add_metric([name, state], counts.get((vc_id, state), 0))
        return family

    @staticmethod
    def _queue(vc_names, now):
        length = GaugeMetricFamily("pai_queue_length", "Jobs waiting in the scheduler's queue, per VC.", labels=["vc"])
        oldest = GaugeMetricFamily(
            "pai_queue_oldest_wait_seconds",
            "How long the longest-waiting queued job of a VC has waited since its submission.",
            labels=["vc"],
        )
        # The queue's own partial index (`job_queue`) holds exactly these rows.
        queued = {
            row["virtual_cluster_id"]: row
            for row in Job.objects.filter(
                state=JobState.WAITING, placement__isnull=True, execution_type=ExecutionType.START
            )
            .order_by()
            .values("virtual_cluster_id")
            .annotate(n=Count("*"), oldest=Min("submitted_at"))
        }
        for vc_id, name in sorted(vc_names.items(), key=lambda item: item[1]):
            row = queued.get(vc_id)
            length.add_metric([name], row["n"] if row else 0)
            oldest.add_metric([name], max(0.0, (now - row["oldest"]).total_seconds()) if row else 0.0)
        return length, oldest

    @staticmethod
    def _lease(now):
        holder = GaugeMetricFamily(
            "pai_worker_lease_holder", "1 for the process holding the scheduler lease.", labels=["holder"]
        )
        expires = GaugeMetricFamily(
            "pai_worker_lease_expires_in_seconds", "Seconds until the scheduler lease expires (negative: expired)."
        )
        lease = WorkerLease.objects.filter(name=SCHEDULER_LEASE).first()
        if lease is not None:
            remaining = (lease.expires_at - now).total_seconds()
            if remaining >= 0:
                holder.add_metric([lease.holder], 1)
            expires.add_metric([], remaining)
        return holder, expires

    @staticmethod
    def _worker_figures():
        row = WorkerFigures.objects.filter(key=figures.PUBLISHER).first()
        data = row.data if row is not None else {}
        for name, series in sorted((data.get("counters") or {}).items()):
            family = None
            for key, value in sorted(series.items()):
                labels = figures.labels_of(key)
                if family is None:
                    family = CounterMetricFamily(name, HELP.get(name, name), labels=sorted(labels))
                family.add_metric([labels[k] for k in sorted(labels)], value)
            if family is not None:
                yield family
        for name, series in sorted((data.get("histograms") or {}).items()):
            bounds = figures.HISTOGRAM_BUCKETS.get(name)
            if bounds is None:
                continue
            family = None
            for key, counts in sorted(series.items()):
                labels = figures.labels_of(key)
                if family is None:
                    family = HistogramMetricFamily(name, HELP.get(name, name), labels=sorted(labels))
                buckets = [(str(bound), counts[i]) for i, bound in enumerate(bounds)] + [("+Inf", counts[-1])]
                family.add_metric([labels[k] for k in sorted(labels)], buckets, sum_value=counts[-2])
            if family is not None:
                yield family
        gauges = data.get("gauges") or {}
        last = gauges.get("pai_reconciler_last_cycle_timestamp_seconds") or {}
        stamp = GaugeMetricFamily(
            "pai_reconciler_last_cycle_timestamp_seconds", HELP["pai_reconciler_last_cycle_timestamp_seconds"],
            labels=["cluster"],
        )
        lag = GaugeMetricFamily(
            "pai_reconciler_lag_seconds",
            "Seconds since the reconciler last completed a cycle of a cluster: pod changes since then are not "
            "applied yet. Grows without bound when no worker leads.",
            labels=["cluster"],
        )
        wall = time.time()
        for key, value in sorted(last.items()):
            cluster = figures.labels_of(key)["cluster"]
            stamp.add_metric([cluster], value)
            lag.add_metric([cluster], max(0.0, wall - value))
        yield stamp
        yield lag


_pai = CollectorRegistry(auto_describe=False)
_pai.register(PaiCollector())


def exposition():
    """The text of `/metrics`: this process's metrics (every gunicorn worker's, in
    multiprocess mode) followed by pai's."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        processes = CollectorRegistry()
        multiprocess.MultiProcessCollector(processes)
    else:
        processes = REGISTRY
    return generate_latest(processes) + generate_latest(_pai)
