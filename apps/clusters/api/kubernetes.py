"""`/api/v2/kubernetes/*`: OpenPAI proxied Kubernetes' own lists; pai answers in the same JSON shape
from its inventory (nodes, as the worker last saw them) and its task attempts (pods)."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.response import Response

from apps.clusters.models import Node
from apps.jobs.choices import JobState
from apps.jobs.models import TaskAttempt
from apps.jobs.worker.launch import job_key
from pai.api.permissions import IsPlatformAdmin
from pai.api.views import ApiView, ErrorSerializer
from scheduler.backends import pod_labels

POD_PHASES = {
    JobState.WAITING: "Pending",
    JobState.RUNNING: "Running",
    JobState.STOPPING: "Running",
    JobState.SUCCEEDED: "Succeeded",
    JobState.FAILED: "Failed",
    JobState.STOPPED: "Failed",
    JobState.UNKNOWN: "Unknown",
}

NODE_EXAMPLE = {
    "kind": "NodeList",
    "apiVersion": "v1",
    "metadata": {},
    "items": [
        {
            "metadata": {"name": "gpu-node-1", "labels": {"pai.sku": "A100"}, "annotations": {"pai/cluster": "local"}},
            "spec": {"unschedulable": False},
            "status": {
                "capacity": {"cpu": "64", "memory": "524288Mi", "nvidia.com/gpu": "8"},
                "allocatable": {"cpu": "64", "memory": "524288Mi", "nvidia.com/gpu": "8"},
                "addresses": [{"type": "InternalIP", "address": "10.0.0.11"}, {"type": "Hostname",
                              "address": "gpu-node-1"}],
                "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-12-02T12:00:00Z"}],
            },
        }
    ],
}

POD_EXAMPLE = {
    "kind": "PodList",
    "apiVersion": "v1",
    "metadata": {},
    "items": [
        {
            "metadata": {
                "name": "pai-42-1764670000-worker-3f2a9c1e-0-0",
                "namespace": "pai-team-a",
                "uid": "5b0c…",
                "labels": {"pai.job": "pai-42-1764670000", "pai.taskrole": "worker", "pai.task-index": "0",
                           "pai.attempt": "0", "pai.task-attempt": "0"},
                "annotations": {"pai/job": "alice~train"},
            },
            "spec": {"nodeName": "gpu-node-1"},
            "status": {"phase": "Running", "podIP": "10.0.0.11", "startTime": "2026-12-02T12:00:00Z"},
        }
    ],
}


def _quantity(value):
    value = float(value)
    return str(int(value)) if value.is_integer() else f"{round(value * 1000)}m"


def _time(value):
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value else None


def _node(node):
    capacity = {"cpu": _quantity(node.cpu_capacity), "memory": f"{node.memory_mb_capacity}Mi"}
    if node.gpu_capacity:
        capacity["nvidia.com/gpu"] = str(node.gpu_capacity)
    addresses = [{"type": "InternalIP", "address": node.ip}] if node.ip else []
    addresses.append({"type": "Hostname", "address": node.name})
    return {
        "metadata": {"name": node.name, "labels": node.labels, "annotations": {"pai/cluster": node.cluster.name}},
        "spec": {"unschedulable": not node.schedulable},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "addresses": addresses,
            "conditions": [
                {"type": "Ready", "status": "True" if node.ready else "False",
                 "lastHeartbeatTime": _time(node.updated_at)}
            ],
        },
    }


def _namespace(job):
    # Where the worker creates a job's pods: one namespace per team.
    return f"pai-{job.tenant.slug}"


def _pod(attempt):
    task = attempt.task
    job = task.job_attempt.job
    return {
        "metadata": {
            "name": attempt.pod_name,
            "namespace": _namespace(job),
            "uid": attempt.pod_uid,
            "labels": pod_labels(job_key(job), task.task_role, task.index, task.job_attempt.index, attempt.index),
            "annotations": {"pai/job": f"{job.owner.username}~{job.name}"},
        },
        "spec": {"nodeName": attempt.node_name},
        "status": {"phase": POD_PHASES.get(attempt.state, "Unknown"), "podIP": attempt.ip,
                   "startTime": _time(attempt.started_at)},
    }


class KubernetesNodeListView(ApiView):
    permission_classes = [IsPlatformAdmin]  # OpenPAI: "Need administrator permission"

    @extend_schema(
        tags=["kubernetes"],
        operation_id="getK8sNodes",
        summary="Nodes, in Kubernetes' NodeList shape (platform admins).",
        description="From pai's node inventory, as the worker last observed it, for every cluster (the "
        "`pai/cluster` annotation names it). Platform admins only, as in OpenPAI.",
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT, description="A Kubernetes NodeList"),
                   401: OpenApiResponse(ErrorSerializer, description="UnauthorizedUserError"),
                   403: OpenApiResponse(ErrorSerializer, description="ForbiddenUserError")},
        examples=[OpenApiExample("Nodes", value=NODE_EXAMPLE, response_only=True)],
    )
    def get(self, request):
        nodes = Node.objects.select_related("cluster").order_by("cluster__name", "name")
        return Response({"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": [_node(n) for n in nodes]})


class KubernetesPodListView(ApiView):
    permission_classes = [IsPlatformAdmin]

    @extend_schema(
        tags=["kubernetes"],
        operation_id="getK8sPods",
        summary="Job pods, in Kubernetes' PodList shape (platform admins).",
        description="The pods of pai's task attempts that have not completed, from the database (not read from "
        "Kubernetes): system pods and pods pai did not create are not listed. Each team's pods live in the "
        "namespace pai-<team slug>; the `pai/job` annotation names the job as OpenPAI does (user~name).",
        parameters=[OpenApiParameter("namespace", OpenApiTypes.STR,
                                     description="Only pods of this namespace (pai-<team slug>).")],
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT, description="A Kubernetes PodList"),
                   401: OpenApiResponse(ErrorSerializer, description="UnauthorizedUserError"),
                   403: OpenApiResponse(ErrorSerializer, description="ForbiddenUserError")},
        examples=[OpenApiExample("Pods", value=POD_EXAMPLE, response_only=True)],
    )
    def get(self, request):
        attempts = (
            TaskAttempt.objects.visible_to(request.user)
            .exclude(pod_name="")
            .filter(completed_at__isnull=True)
            .select_related("task__job_attempt__job__owner", "task__job_attempt__job__tenant")
            .order_by("pod_name")
        )
        namespace = request.query_params.get("namespace")
        if namespace:
            if not namespace.startswith("pai-"):
                attempts = attempts.none()
            else:
                attempts = attempts.filter(task__job_attempt__job__tenant__slug=namespace.removeprefix("pai-"))
        return Response({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": [_pod(a) for a in attempts]})
