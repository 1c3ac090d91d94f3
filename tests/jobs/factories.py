"""Job data for route tests: jobs submitted through the service, and the attempt/task/pod
rows the worker writes once a job runs."""

import itertools

from django.utils import timezone

from apps.jobs import services
from apps.jobs.models import JobAttempt, JobEvent, Task, TaskAttempt

from .conftest import job_document

_names = itertools.count()


def submitted_job(user, name=None, vc=None, gpu=1, instances=1):
    document = job_document(name=name or f"job_{next(_names)}")
    document["taskRoles"]["taskrole"]["instances"] = instances
    document["taskRoles"]["taskrole"]["resourcePerInstance"]["gpu"] = gpu
    # Without a VC named, the job goes to the owner's default VC.
    document["defaults"] = {"virtualCluster": vc} if vc else {}
    job, _ = services.submit_job(user, document)
    return job


def running_attempt(job, log_path=""):
    """One attempt with a running pod per task, as the worker leaves it."""
    now = timezone.now()
    attempt = JobAttempt.objects.create(job=job, index=0, state="RUNNING", sub_state="AttemptRunning", launched_at=now)
    for index in range(job.total_tasks):
        task = Task.objects.create(job_attempt=attempt, task_role="taskrole", index=index, state="RUNNING")
        pod = TaskAttempt.objects.create(
            task=task, index=0, state="RUNNING", pod_name=f"{job.debug_id}-taskrole-{index}-0",
            pod_uid=f"uid-{job.pk}-{index}", node_name="gpu-node-1", device_indices=[index], ip="10.0.0.5",
            ports={"ssh": 30022}, started_at=now, log_path=log_path,
        )
        JobEvent.objects.create(
            job=job, task_attempt=pod, uid=f"ev-{job.pk}-{index}", pod_uid=pod.pod_uid, task_role="taskrole",
            task_index=index, type="Normal", reason="Started", message="Started container", first_seen=now,
            last_seen=now, source_component="kubelet", source_host="gpu-node-1",
        )
    job.state, job.sub_state, job.launched_at = "RUNNING", "AttemptRunning", now
    job.save()
    return attempt
