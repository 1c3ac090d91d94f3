"""GPU efficiency per task: the worker samples what each running task attempt uses.

Where the figure comes from, per cluster:

- **Kubernetes**: the cluster's Prometheus (`Cluster.prometheus_url`), which scrapes
  NVIDIA's DCGM exporter. `Cluster.gpu_utilization_query` (default
  `DCGM_FI_DEV_GPU_UTIL`) gives each GPU's utilisation with the `namespace` and `pod`
  labels of the pod holding it; pai asks for `avg by (namespace, pod) (<query>)` and
  matches the pods it created (namespace `pai-<team>`, the task attempt's pod name).
  A pod without a series (no GPU, or not scraped yet) gets no sample.
- **local**: `nvidia-smi` when the machine has it (the utilisation of the task's devices,
  `TaskAttempt.device_indices`); otherwise the CPU use of the task's processes, in % of
  one core, over the interval since the last sample (psutil). The second is no GPU
  figure, and says so (`source` = `cpu`), but it tells a sleeping task from a busy one.

The worker's loop calls `tick()` after its cycles; every `PAI_GPU_SAMPLE_SECONDS` it
samples each cluster, stores the figures (`TaskUtilization` per task attempt, `JobGpuUse`
per job) and applies the idle-GPU rule (`apps.monitoring.idle`). `sample_cluster(...,
now=...)` does one round at a given time: tests drive the rule in virtual time with it.
A source that fails (Prometheus down) skips the round for that cluster: no sample is
better than a wrong one.
"""

import json
import logging
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from apps.clusters.choices import BackendKind
from apps.jobs.choices import JobState
from apps.jobs.models import TaskAttempt

from .models import JobGpuUse, TaskUtilization, UtilizationSource

log = logging.getLogger(__name__)

# Samples kept per task attempt (the means cover the whole attempt).
RECENT_SAMPLES = 60
PROMETHEUS_TIMEOUT_SECONDS = 5.0
NVIDIA_SMI_TIMEOUT_SECONDS = 5.0


class SourceUnavailable(Exception):
    """The cluster's utilisation source did not answer: no sample this round."""


@dataclass(frozen=True)
class Figure:
    source: str
    percent: float
    cpu_seconds: float | None = None
    cpu_read_at: float | None = None


# -- Kubernetes: Prometheus ----------------------------------------------------------------


def prometheus_query(base_url, expression, timeout=PROMETHEUS_TIMEOUT_SECONDS):
    """The instant vector of `expression` as [(labels, value)], from Prometheus' HTTP API."""
    url = f"{base_url.rstrip('/')}/api/v1/query?{urllib.parse.urlencode({'query': expression})}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            body = json.load(response)
    except (OSError, ValueError) as exc:
        raise SourceUnavailable(f"Prometheus at {base_url}: {exc}") from exc
    if body.get("status") != "success" or (body.get("data") or {}).get("resultType") != "vector":
        raise SourceUnavailable(f"Prometheus at {base_url}: {body.get('error') or 'not an instant vector'}")
    result = []
    for item in body["data"]["result"]:
        try:
            result.append((item.get("metric") or {}, float(item["value"][1])))
        except (KeyError, IndexError, TypeError, ValueError):
            continue
    return result


def pod_utilization(cluster):
    """{(namespace, pod): mean GPU utilisation in %} from the cluster's Prometheus."""
    expression = f"avg by (namespace, pod) ({cluster.gpu_utilization_query})"
    found = {}
    for labels, value in prometheus_query(cluster.prometheus_url, expression):
        if labels.get("namespace") and labels.get("pod") and value == value:  # NaN != NaN
            found[(labels["namespace"], labels["pod"])] = max(0.0, min(100.0, value))
    return found


def kubernetes_figures(cluster, task_attempts):
    if not cluster.prometheus_url:
        return {}
    by_pod = pod_utilization(cluster)
    figures = {}
    for ta in task_attempts:
        value = by_pod.get((f"pai-{ta.tenant_slug}", ta.pod_name))
        if value is not None:
            figures[ta.pk] = Figure(UtilizationSource.PROMETHEUS, value)
    return figures


# -- local: nvidia-smi, else the processes' CPU ----------------------------------------


def nvidia_smi_utilization():
    """{device index: GPU utilisation in %} from nvidia-smi, or None without it."""
    command = shutil.which("nvidia-smi")
    if command is None:
        return None
    try:
        output = subprocess.run(
            [command, "--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_SECONDS, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("nvidia-smi failed (%s): sampling CPU use instead", exc)
        return None
    found = {}
    for line in output.splitlines():
        index, _, value = line.partition(",")
        try:
            found[int(index)] = float(value)
        except ValueError:
            continue  # "[N/A]" on GPUs that do not report it
    return found


def process_cpu_seconds(pid):
    """CPU seconds (user + system) of a process and its live descendants, plus what its
    ended children left to it; None when the process is gone."""
    import psutil

    try:
        root = psutil.Process(pid)
        times = root.cpu_times()
        total = times.user + times.system + times.children_user + times.children_system
        for child in root.children(recursive=True):
            try:
                child_times = child.cpu_times()
            except psutil.Error:
                continue
            total += child_times.user + child_times.system
        return total
    except psutil.Error:
        return None


def local_figures(backend, task_attempts, previous):
    gpus = nvidia_smi_utilization()
    figures = {}
    for ta in task_attempts:
        devices = list(ta.device_indices or [])
        if gpus is not None and devices and all(d in gpus for d in devices):
            figures[ta.pk] = Figure(UtilizationSource.NVIDIA_SMI, sum(gpus[d] for d in devices) / len(devices))
            continue
        task_pid = getattr(backend, "task_pid", None)
        pid = task_pid(ta.pod_name) if task_pid is not None else None
        if pid is None:
            continue
        seconds, read_at = process_cpu_seconds(pid), time.time()
        if seconds is None:
            continue
        before = previous.get(ta.pk)
        if before is not None and before.cpu_seconds is not None and before.cpu_read_at and read_at > before.cpu_read_at:
            percent = (seconds - before.cpu_seconds) / (read_at - before.cpu_read_at) * 100
        else:
            started = ta.started_at.timestamp() if ta.started_at else read_at
            percent = seconds / max(read_at - started, 1e-3) * 100
        figures[ta.pk] = Figure(UtilizationSource.CPU, max(0.0, percent), seconds, read_at)
    return figures


# -- one round -----------------------------------------------------------------------------


def running_task_attempts(cluster):
    """The cluster's task attempts whose pods run, in jobs that run."""
    return list(
        TaskAttempt.objects.filter(
            task__job_attempt__job__virtual_cluster__cluster=cluster,
            task__job_attempt__job__state=JobState.RUNNING,
            task__job_attempt__completed_at__isnull=True,
            completed_at__isnull=True,
            started_at__isnull=False,
        )
        .exclude(pod_name="")
        .annotate(
            job_id=F("task__job_attempt__job_id"),
            attempt_index=F("task__job_attempt__index"),
            tenant_slug=F("task__job_attempt__job__tenant__slug"),
        )
        .order_by("pk")
    )


def sample_cluster(cluster, backend=None, now=None):
    """Sample the cluster's running tasks once, store the figures, apply the idle-GPU rule.
    Returns {task attempt id: Figure} (empty when the source did not answer)."""
    from . import idle

    now = now or timezone.now()
    task_attempts = running_task_attempts(cluster)
    if not task_attempts:
        return {}
    previous = TaskUtilization.objects.in_bulk([ta.pk for ta in task_attempts])
    try:
        if cluster.backend == BackendKind.KUBERNETES:
            figures = kubernetes_figures(cluster, task_attempts)
        else:
            figures = local_figures(backend, task_attempts, previous)
    except SourceUnavailable as exc:
        log.warning("cluster %s: no utilisation sample: %s", cluster.name, exc)
        return {}
    if figures:
        with transaction.atomic():
            uses = record(task_attempts, figures, previous, now)
            idle.apply_rule(uses, now)
    return figures


def record(task_attempts, figures, previous, now):
    """Store a round's figures; returns the JobGpuUse rows of the jobs sampled."""
    stamp = now.timestamp()
    new, changed, per_job = [], [], {}
    for ta in task_attempts:
        figure = figures.get(ta.pk)
        if figure is None:
            continue
        row = previous.get(ta.pk)
        if row is None:
            row = TaskUtilization(
                task_attempt_id=ta.pk, job_id=ta.job_id, first_sampled_at=now, percent=figure.percent,
            )
            new.append(row)
        else:
            changed.append(row)
        row.source, row.percent, row.last_sampled_at = figure.source, figure.percent, now
        row.percent_sum += figure.percent
        row.samples += 1
        row.cpu_seconds, row.cpu_read_at = figure.cpu_seconds, figure.cpu_read_at
        row.recent = (list(row.recent or []) + [[stamp, round(figure.percent, 2)]])[-RECENT_SAMPLES:]
        per_job.setdefault((ta.job_id, ta.attempt_index), []).append(figure)
    TaskUtilization.objects.bulk_create(new)
    TaskUtilization.objects.bulk_update(
        changed, ["source", "percent", "percent_sum", "samples", "last_sampled_at", "cpu_seconds", "cpu_read_at",
                  "recent"],
    )
    existing = JobGpuUse.objects.in_bulk([job_id for job_id, _ in per_job])
    uses = []
    for (job_id, attempt_index), job_figures in per_job.items():
        percent = sum(f.percent for f in job_figures) / len(job_figures)
        sources = {f.source for f in job_figures}
        source = job_figures[0].source if len(sources) == 1 else UtilizationSource.PROMETHEUS
        use = existing.get(job_id)
        if use is None or use.attempt_index != attempt_index:
            # A new attempt starts its figures (and any idle spell) afresh.
            use = JobGpuUse(job_id=job_id, attempt_index=attempt_index)
        use.source, use.percent, use.sampled_at = source, percent, now
        use.percent_sum += percent
        use.samples += 1
        use.save()
        uses.append(use)
    return uses


_last_round = {}


def tick(controllers, now=None):
    """The worker loop's hook: sample each cluster every PAI_GPU_SAMPLE_SECONDS. A failure
    is logged and never stops the loop."""
    monotonic = time.monotonic()
    for key, controller in list(controllers.items()):
        if monotonic - _last_round.get(key, float("-inf")) < settings.PAI_GPU_SAMPLE_SECONDS:
            continue
        _last_round[key] = monotonic
        try:
            sample_cluster(controller.cluster, controller.backend, now)
        except Exception:
            log.exception("cluster %s: GPU utilisation sampling failed", controller.cluster.name)
