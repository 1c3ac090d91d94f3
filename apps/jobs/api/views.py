"""OpenPAI's job routes (REST server v2). Views parse the request, scope the lookup through
`Job.objects.visible_to` / `readable_by`, call `services`, and shape OpenPAI's JSON."""

import uuid

from django.conf import settings
from django.http import FileResponse, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.monitoring.selectors import job_efficiency
from pai.api.views import ErrorSerializer, MessageSerializer

from scheduler import exitcodes

from .. import services
from ..choices import COMPLETED_STATES
from ..filters import JobFilterSet
from ..models import Job, JobAttempt, JobEvent, JobTag, Task
from ..errors import ForbiddenUserError, InvalidParametersError, NoJobConfigError, NoJobError, NoJobSshInfoError
from ..protocol.structure import storable_text
from ..querysets import is_manageable, is_readable
from ..reading import LOG_TAIL_BYTES, exit_of, kept_log, log_file
from . import docs
from .parsers import JSONParser, PlainTextParser, XYAMLTextParser, YAMLTextParser
from .renderers import YAMLRenderer
from .serializers import (
    ExecutionTypeSerializer, JobAttemptSerializer, JobDetailSerializer, JobEventsSerializer, JobSummarySerializer,
    LogLocationsSerializer, SubmitResponseSerializer, TaskAttemptsSerializer, ValueSerializer, epoch_ms, exit_spec,
    iso_time,
)
from .summaries import job_summaries
from .throttles import JobListThrottle, JobSubmitThrottle

MAX_LIMIT = 1000

_ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="Bad input; the message names the field."),
    403: OpenApiResponse(ErrorSerializer, description="ForbiddenUserError"),
    404: OpenApiResponse(ErrorSerializer, description="NoJobError: no such job, or not yours to see."),
}
# Indexes in paths are unsigned: the URL patterns match digits only.
_INDEX = {"type": "integer", "minimum": 0}
_JOB_PARAMETERS = [
    OpenApiParameter("username", OpenApiTypes.STR, OpenApiParameter.PATH, description="the job's owner"),
    OpenApiParameter("name", OpenApiTypes.STR, OpenApiParameter.PATH, description="the job's name"),
]


def _job(request, username, name, *, with_spec=False, manage=False):
    """The job `username~name` if the user may read it (with `manage`, stop or tag it): 404
    when not even listed to them, 403 when they see it only as a summary in their VC's queue
    or, for `manage`, hold only a read-only share."""
    if not (storable_text(username) and storable_text(name)):
        raise NoJobError("Job names are text without NUL characters.")
    jobs = Job.objects.visible_to(request.user).select_related("owner", "virtual_cluster", "tenant")
    if not with_spec:
        jobs = jobs.defer("protocol_text", "spec", "launch")
    else:
        jobs = jobs.select_related("gpu_use")  # the detail's gpuEfficiency, in the same query
    job = jobs.filter(owner__username=username, name=name).first()
    if job is None:
        raise NoJobError(f"Job {username}~{name} is not found.")
    if not is_readable(job, request.user):
        raise ForbiddenUserError(
            f"User {request.user.get_username()} may see job {username}~{name} only in the job list."
        )
    if manage and not is_manageable(job, request.user):
        raise ForbiddenUserError(f"Job {username}~{name} is shared with user {request.user.get_username()} read-only.")
    return job


def _int_param(request, name, default, minimum=0, maximum=None):
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValidationError({name: "must be an integer"}) from None
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f"≥ {minimum}"
        raise ValidationError({name: f"must be {bound}"})
    return value


def _log_uri(request, job, attempt, task, task_attempt):
    if not task_attempt.log_path:
        return None
    return request.build_absolute_uri(
        f"/api/v2/jobs/{job.owner.username}~{job.name}/attempts/{attempt.index}/taskRoles/{task.task_role}"
        f"/taskIndex/{task.index}/attempts/{task_attempt.index}/logs/all"
    )


def _logs_path(job, attempt, task, task_attempt):
    """OpenPAI's `containerLog`: the path of the task attempt's log locations."""
    return (
        f"/api/v2/jobs/{job.owner.username}~{job.name}/attempts/{attempt.index}/taskRoles/{task.task_role}"
        f"/taskIndex/{task.index}/attempts/{task_attempt.index}/logs"
    )


def _task_uid(job, attempt, task):
    # FrameworkController's task instance UID: one per task of an attempt, stable.
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"pai:{job.debug_id}/{attempt.index}/{task.task_role}/{task.index}"))


def _container_gpus(job, task, task_attempt):
    # CPU-only tasks hold CPU leaf cells, which are shares of a node, not devices: no GPUs.
    gpu = (job.spec["taskRoles"].get(task.task_role) or {}).get("resourcePerInstance", {}).get("gpu", 0)
    if not gpu or not task_attempt.device_indices:
        return None
    return ",".join(str(i) for i in task_attempt.device_indices)


def _task_attempt_status(job, attempt, task, ta):
    """The fields OpenPAI gives each task attempt (a container)."""
    return {
        "attemptId": ta.index,
        "attemptState": ta.state,
        "currentAttemptCreatedTime": epoch_ms(ta.created_at),
        "currentAttemptLaunchedTime": epoch_ms(ta.started_at or ta.completed_at),
        "currentAttemptCompletedTime": epoch_ms(ta.completed_at),
        "containerId": ta.pod_uid or None,
        "containerIp": ta.ip,
        "containerNodeName": ta.node_name or None,
        "containerPorts": ta.ports or {},
        "containerGpus": _container_gpus(job, task, ta),
        "containerLog": _logs_path(job, attempt, task, ta),
        "containerExitCode": ta.exit_code,
        "containerExitSpec": exit_spec(ta.exit_code, ta.exit_spec_code),
        "containerExitDiagnostics": ta.diagnostics or None,
    }


def _task_status(job, attempt, task):
    """A task in OpenPAI's shape: the task, and its current (latest) task attempt's container."""
    attempts = list(task.attempts.all())
    first, last = (attempts[0], attempts[-1]) if attempts else (None, None)
    status = {
        "taskIndex": task.index,
        "taskUid": _task_uid(job, attempt, task),
        "taskState": task.state,
        "retries": task.retries,
        "accountableRetries": task.accountable_retries,
        "createdTime": epoch_ms(first.created_at) if first else None,
        "launchedTime": epoch_ms((last.started_at or last.completed_at) if last else None),
        "completedTime": epoch_ms(last.completed_at) if last and task.state in COMPLETED_STATES else None,
    }
    if last is None:
        return {
            **status, "attemptId": None, "attemptState": None, "currentAttemptCreatedTime": None,
            "currentAttemptLaunchedTime": None, "currentAttemptCompletedTime": None, "containerId": None,
            "containerIp": None, "containerNodeName": None, "containerPorts": {}, "containerGpus": None,
            "containerLog": None, "containerExitCode": None, "containerExitSpec": None,
            "containerExitDiagnostics": None,
        }
    return {**status, **_task_attempt_status(job, attempt, task, last)}


def _task_roles(job, attempt):
    roles = {role: {"taskRoleStatus": {"name": role}, "taskStatuses": []} for role in job.spec["taskRoles"]}
    if attempt is not None:
        for task in attempt.tasks.all():
            roles.setdefault(task.task_role, {"taskRoleStatus": {"name": task.task_role}, "taskStatuses": []})
            roles[task.task_role]["taskStatuses"].append(_task_status(job, attempt, task))
    return roles


def _attempts(request, job):
    return (
        JobAttempt.objects.readable_by(request.user)
        .filter(job=job)
        .prefetch_related("tasks__attempts")
        .order_by("-index")
    )


def _exit_type(code):
    # FrameworkController's completion type name, which OpenPAI shows as appExitType / exitType.
    return None if code is None else ("Succeeded" if code == exitcodes.SUCCEEDED else "Failed")


def _exit_messages(diagnostics):
    return None if not diagnostics else {"container": None, "runtime": None, "launcher": diagnostics}


def _attempt_json(request, job, attempt, latest_index):
    code, spec_code, diagnostics, trigger = exit_of(job, attempt)
    row = exitcodes.row(spec_code if spec_code is not None else code) if code is not None else None
    return {
        "jobName": job.name,
        "frameworkName": job.framework_name,
        "uid": job.debug_id,
        "userName": job.owner.username,
        "state": attempt.state,
        "originState": attempt.sub_state,
        "maxAttemptCount": job.job_retry_count + 1 if job.job_retry_count >= 0 else None,
        "attemptIndex": attempt.index,
        "jobStartedTime": epoch_ms(job.submitted_at),
        "attemptStartedTime": epoch_ms(attempt.created_at),
        "attemptCompletedTime": epoch_ms(attempt.completed_at),
        "exitCode": code,
        "exitPhrase": row.phrase if row else None,
        "exitType": _exit_type(code),
        "exitDiagnostics": (
            {"diagnosticsSummary": diagnostics, "runtime": None, "launcher": diagnostics} if diagnostics else None
        ),
        "appExitSpec": exit_spec(code, spec_code),
        "appExitDiagnostics": diagnostics or None,
        "appExitMessages": _exit_messages(diagnostics),
        "appExitTriggerMessage": trigger or None,
        "appExitTriggerTaskRoleName": attempt.trigger_task_role or None,
        "appExitTriggerTaskIndex": attempt.trigger_task_index,
        "totalGpuNumber": job.total_gpu,
        "totalTaskNumber": job.total_tasks,
        "totalTaskRoleNumber": job.total_task_roles,
        "taskRoles": _task_roles(job, attempt),
        "isLatest": attempt.index == latest_index,
    }


class JobListView(APIView):
    parser_classes = [YAMLTextParser, XYAMLTextParser, PlainTextParser, JSONParser]

    def get_throttles(self):
        # The API-wide limits, plus OpenPAI's per-user limits on submitting and listing jobs.
        scoped = JobSubmitThrottle() if self.request.method == "POST" else JobListThrottle()
        return [*super().get_throttles(), scoped]

    @extend_schema(
        operation_id="listJobs",
        summary="List jobs",
        description=docs.LIST,
        parameters=docs.LIST_PARAMETERS,
        responses={200: JobSummarySerializer(many=True), 400: _ERRORS[400], 429: OpenApiResponse(ErrorSerializer)},
        examples=[docs.LIST_EXAMPLE],
    )
    def get(self, request):
        offset = _int_param(request, "offset", 0)
        limit = _int_param(request, "limit", settings.REST_FRAMEWORK.get("PAGE_SIZE", 100), 1, MAX_LIMIT)
        with_total = request.query_params.get("withTotalCount", "").lower() == "true"
        filterset = JobFilterSet(request.query_params, queryset=Job.objects.visible_to(request.user), request=request)
        if not filterset.is_valid():
            raise ValidationError(filterset.errors)
        jobs = filterset.qs
        data = job_summaries(jobs[offset:offset + limit], request.user)
        if with_total:
            return Response({"totalCount": jobs.count(), "data": data})
        return Response(data)

    @extend_schema(
        operation_id="createJob",
        summary="Submit a job",
        description=docs.SUBMIT,
        request={"text/yaml": OpenApiTypes.STR, "application/json": OpenApiTypes.OBJECT},
        responses={
            202: SubmitResponseSerializer,
            400: OpenApiResponse(ErrorSerializer, description="InvalidProtocolError; every broken rule as `path: rule`."),
            403: OpenApiResponse(ErrorSerializer, description="ForbiddenUserError: the VC is not granted to you."),
            404: OpenApiResponse(ErrorSerializer, description="NoVirtualClusterError"),
            409: OpenApiResponse(ErrorSerializer, description="ConflictJobError: you already have a job of that name."),
            413: OpenApiResponse(ErrorSerializer, description="PayloadTooLargeError: the job document is longer "
                                 "than `PAI_JOB_PROTOCOL_MAX_BYTES` (256 KiB by default)."),
            429: OpenApiResponse(ErrorSerializer, description="Too many submissions; see Retry-After."),
        },
        examples=docs.SUBMIT_EXAMPLES,
    )
    def post(self, request):
        job, warnings = services.submit_job(request.user, request.data)
        return Response(
            {
                "message": f"update job {job.name} successfully",
                "name": job.name,
                "virtualCluster": job.virtual_cluster.name,
                "warnings": warnings,
            },
            status=status.HTTP_202_ACCEPTED,
        )


class JobDetailView(APIView):
    @extend_schema(
        operation_id="getJob", summary="Job status", description=docs.DETAIL, parameters=_JOB_PARAMETERS,
        responses={200: JobDetailSerializer, 403: _ERRORS[403], 404: _ERRORS[404]},
        examples=[docs.DETAIL_EXAMPLE],
    )
    def get(self, request, username, name, attempt_index=None):
        job = _job(request, username, name, with_spec=True)
        attempts = _attempts(request, job)
        if attempt_index is not None:
            attempts = attempts.filter(index=attempt_index)
        attempt = attempts.first()
        if attempt is None and attempt_index is not None:
            raise NoJobError(f"Attempt {attempt_index} of job {username}~{name} is not found.")
        code, spec_code, diagnostics, trigger = exit_of(job, attempt)
        tags = list(JobTag.objects.readable_by(request.user).filter(job=job).values_list("name", flat=True))
        body = {
            "name": job.name,
            "debugId": job.debug_id,
            "tags": tags,
            "jobStatus": {
                "username": job.owner.username,
                "state": job.state,
                "subState": job.sub_state,
                "executionType": job.execution_type,
                "retries": job.retries,
                "retryDetails": job.retry_details,
                "retryDelayTime": None,
                "submissionTime": epoch_ms(job.submitted_at),
                "createdTime": epoch_ms(job.created_time),
                "launchedTime": epoch_ms(job.launched_at or job.completed_at),
                "completedTime": epoch_ms(job.completed_at),
                "appId": job.debug_id,
                "appProgress": 1 if job.state in COMPLETED_STATES else 0,
                "appTrackingUrl": "",
                "appCreatedTime": epoch_ms(attempt.created_at) if attempt else None,
                "appLaunchedTime": epoch_ms((attempt.launched_at or attempt.completed_at) if attempt else None),
                "appCompletedTime": epoch_ms(attempt.completed_at) if attempt else None,
                "appExitCode": code,
                "appExitSpec": exit_spec(code, spec_code),
                "appExitDiagnostics": diagnostics or None,
                "appExitMessages": _exit_messages(diagnostics),
                "appExitTriggerMessage": trigger or None,
                "appExitTriggerTaskRoleName": (attempt.trigger_task_role or None) if attempt else None,
                "appExitTriggerTaskIndex": attempt.trigger_task_index if attempt else None,
                "appExitType": _exit_type(code),
                "attemptId": attempt.index if attempt else None,
                "attemptState": attempt.state if attempt else None,
                "virtualCluster": job.virtual_cluster.name,
                "jobPriority": job.priority_class,
                "waitReason": job.wait_reason,
                "queuePosition": job.queue_position,
            },
            "taskRoles": _task_roles(job, attempt),
            # pai's own, beside OpenPAI's shape: GPU utilisation and the idle-GPU rule.
            "gpuEfficiency": job_efficiency(job, attempt, tags),
        }
        return Response(body)


class JobAttemptStatusView(JobDetailView):
    @extend_schema(
        operation_id="getJobAttemptStatus", summary="Job status with one attempt's tasks",
        description="The job detail of `GET /api/v2/jobs/{user}~{job}` with the attempt `attempt_index` in "
        "place of the latest (OpenPAI's SDK `getJob(user, job, attemptId)`).",
        parameters=_JOB_PARAMETERS + [OpenApiParameter("attempt_index", _INDEX, OpenApiParameter.PATH)],
        responses={200: JobDetailSerializer, 403: _ERRORS[403], 404: _ERRORS[404]},
    )
    def get(self, request, username, name, attempt_index):
        return super().get(request, username, name, attempt_index)


class JobSshView(APIView):
    @extend_schema(
        operation_id="getJobSshInfo", summary="SSH endpoints of a job's containers",
        description="pai does not run OpenPAI's ssh runtime plugin, so no job has SSH info: the answer is "
        "OpenPAI's own for that case, 404 `NoJobSshInfoError` (404 `NoJobError` when the job is not yours "
        "to see).",
        parameters=_JOB_PARAMETERS, responses={403: _ERRORS[403], 404: _ERRORS[404]},
    )
    def get(self, request, username, name):
        _job(request, username, name)
        raise NoJobSshInfoError(f"SSH info of job {username}~{name} is not found: pai does not run the ssh plugin.")


class JobAttemptsHealthView(APIView):
    @extend_schema(
        operation_id="getJobAttemptsHealthz", summary="Whether job attempts (job history) can be read",
        description="Always 200: pai keeps every attempt in its database.",
        responses={200: MessageSerializer},
    )
    def get(self, request, username=None, name=None):
        return Response({"message": "ok"})


class JobAttemptsHealthOfJobView(JobAttemptsHealthView):
    @extend_schema(
        operation_id="getJobAttemptsHealthzOfJob", summary="Whether job attempts (job history) can be read",
        description="The same answer as `/api/v2/job-attempts/healthz`, where OpenPAI's SDK asks it.",
        parameters=_JOB_PARAMETERS, responses={200: MessageSerializer},
    )
    def get(self, request, username, name):
        return super().get(request, username, name)


class JobConfigView(APIView):
    renderer_classes = [YAMLRenderer, JSONRenderer]

    def handle_exception(self, exc):
        # Errors stay JSON ({code, message}) whatever format the config was asked in.
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return super().handle_exception(exc)

    @extend_schema(
        operation_id="getJobConfig", summary="Job config (secrets masked)", description=docs.CONFIG,
        parameters=_JOB_PARAMETERS,
        responses={(200, "text/yaml"): OpenApiTypes.STR, (200, "application/json"): OpenApiTypes.OBJECT,
                   403: _ERRORS[403], 404: _ERRORS[404]},
    )
    def get(self, request, username, name):
        job = _job(request, username, name, with_spec=True)
        if not job.protocol_text:
            raise NoJobConfigError(f"Config of job {username}~{name} is not found.")
        if isinstance(request.accepted_renderer, YAMLRenderer):
            return Response(job.protocol_text)
        return Response(job.spec)


class JobExecutionTypeView(APIView):
    @extend_schema(
        operation_id="updateJobExecutionType", summary="Start or stop a job", description=docs.EXECUTION_TYPE,
        parameters=_JOB_PARAMETERS, request=ExecutionTypeSerializer,
        responses={202: MessageSerializer, 400: _ERRORS[400], 403: _ERRORS[403], 404: _ERRORS[404]},
        examples=[OpenApiExample("stop", value={"value": "STOP"}, request_only=True)],
    )
    def put(self, request, username, name):
        job = _job(request, username, name, manage=True)
        value = request.data.get("value") if isinstance(request.data, dict) else None
        if value not in ("START", "STOP"):
            raise InvalidParametersError("value: must be START or STOP")
        services.set_execution_type(request.user, job, value)
        return Response({"message": f"execute job {job.name} successfully"}, status=status.HTTP_202_ACCEPTED)


class JobTagView(APIView):
    def _value(self, request):
        value = request.data.get("value") if isinstance(request.data, dict) else None
        if not isinstance(value, str):
            raise InvalidParametersError("value: must be a string (the tag)")
        return value

    @extend_schema(
        operation_id="addJobTag", summary="Tag a job", parameters=_JOB_PARAMETERS, request=ValueSerializer,
        responses={200: MessageSerializer, 400: _ERRORS[400], 403: _ERRORS[403], 404: _ERRORS[404]},
        examples=[OpenApiExample("tag", value={"value": "baseline"}, request_only=True)],
    )
    def put(self, request, username, name):
        job = _job(request, username, name, manage=True)
        value = self._value(request)
        services.add_tag(request.user, job, value)
        return Response({"message": f"Add tag {value} for job {job.name} successfully."})

    @extend_schema(
        operation_id="deleteJobTag", summary="Remove a job's tag", parameters=_JOB_PARAMETERS,
        request=ValueSerializer,
        responses={200: MessageSerializer, 400: _ERRORS[400], 403: _ERRORS[403], 404: _ERRORS[404]},
    )
    def delete(self, request, username, name):
        job = _job(request, username, name, manage=True)
        value = self._value(request)
        services.remove_tag(request.user, job, value)
        return Response({"message": f"Delete tag {value} from job {job.name} successfully."})


class JobEventsView(APIView):
    @extend_schema(
        operation_id="getJobEvents", summary="Kubernetes events of the job's pods", description=docs.EVENTS,
        parameters=_JOB_PARAMETERS + [
            OpenApiParameter("type", OpenApiTypes.STR, enum=["Normal", "Warning"], description="only this type")
        ],
        responses={200: JobEventsSerializer, 400: _ERRORS[400], 403: _ERRORS[403], 404: _ERRORS[404]},
    )
    def get(self, request, username, name):
        job = _job(request, username, name)
        events = JobEvent.objects.readable_by(request.user).filter(job=job)
        kind = request.query_params.get("type")
        if kind is not None:
            if kind not in ("Normal", "Warning"):
                raise ValidationError({"type": "must be Normal or Warning"})
            events = events.filter(type=kind)
        events = events.select_related("task_attempt").order_by("-last_seen", "-id")
        data = [
            {
                "uid": e.uid, "frameworkName": job.debug_id, "podUid": e.pod_uid, "taskroleName": e.task_role,
                "taskName": e.task_attempt.pod_name if e.task_attempt else "", "taskIndex": e.task_index,
                "type": e.type, "reason": e.reason, "message": e.message,
                "firstTimestamp": iso_time(e.first_seen), "lastTimestamp": iso_time(e.last_seen), "count": e.count,
                "sourceComponent": e.source_component, "sourceHost": e.source_host or None,
            }
            for e in events
        ]
        return Response({"totalCount": len(data), "data": data})


class JobAttemptListView(APIView):
    @extend_schema(
        operation_id="getJobAttempts", summary="All attempts of a job", parameters=_JOB_PARAMETERS,
        responses={200: JobAttemptSerializer(many=True), 403: _ERRORS[403], 404: _ERRORS[404]},
    )
    def get(self, request, username, name):
        job = _job(request, username, name, with_spec=True)
        attempts = list(_attempts(request, job))
        latest = attempts[0].index if attempts else None
        return Response([_attempt_json(request, job, attempt, latest) for attempt in attempts])


class JobAttemptDetailView(APIView):
    @extend_schema(
        operation_id="getJobAttempt", summary="One attempt of a job",
        parameters=_JOB_PARAMETERS + [OpenApiParameter("attempt_index", _INDEX, OpenApiParameter.PATH)],
        responses={200: JobAttemptSerializer, 403: _ERRORS[403], 404: _ERRORS[404]},
    )
    def get(self, request, username, name, attempt_index):
        job = _job(request, username, name, with_spec=True)
        attempt = _attempts(request, job).filter(index=attempt_index).first()
        if attempt is None:
            raise NoJobError(f"Attempt {attempt_index} of job {username}~{name} is not found.")
        latest = (
            JobAttempt.objects.readable_by(request.user)
            .filter(job=job)
            .order_by("-index")
            .values_list("index", flat=True)
            .first()
        )
        return Response(_attempt_json(request, job, attempt, latest))


def _task(request, username, name, attempt_index, role, task_index):
    attempt_index, task_index = int(attempt_index), int(task_index)
    job = _job(request, username, name)
    if not storable_text(role):
        raise NoJobError(f"Task role of job {username}~{name} is not found.")
    task = (
        Task.objects.readable_by(request.user)
        .select_related("job_attempt")
        .prefetch_related("attempts")
        .filter(job_attempt__job=job, job_attempt__index=attempt_index, task_role=role, index=task_index)
        .first()
    )
    if task is None:
        raise NoJobError(f"Task {role}[{task_index}] of attempt {attempt_index} of job {username}~{name} is not found.")
    return job, task


_TASK_PARAMETERS = _JOB_PARAMETERS + [
    OpenApiParameter("attempt_index", _INDEX, OpenApiParameter.PATH, description="job attempt index"),
    OpenApiParameter("task_role", OpenApiTypes.STR, OpenApiParameter.PATH),
    OpenApiParameter("task_index", _INDEX, OpenApiParameter.PATH),
]


class TaskAttemptsView(APIView):
    @extend_schema(
        operation_id="getTaskAttempts", summary="The attempts (pods) of one task", parameters=_TASK_PARAMETERS,
        responses={200: TaskAttemptsSerializer, 403: _ERRORS[403], 404: _ERRORS[404]},
    )
    def get(self, request, username, name, attempt_index, task_role, task_index):
        job, task = _task(request, username, name, attempt_index, task_role, task_index)
        return Response({
            "jobName": job.name,
            "frameworkName": job.framework_name,
            "userName": job.owner.username,
            "jobAttemptId": task.job_attempt.index,
            "taskRoleName": task.task_role,
            "taskIndex": task.index,
            "taskState": task.state,
            "retries": task.retries,
            "accountableRetries": task.accountable_retries,
            "attempts": [_task_attempt_status(job, task.job_attempt, task, a) for a in task.attempts.all()],
        })


def _task_attempt(request, username, name, attempt_index, task_role, task_index, task_attempt_index):
    job, task = _task(request, username, name, attempt_index, task_role, task_index)
    task_attempt = next((a for a in task.attempts.all() if a.index == int(task_attempt_index)), None)
    if task_attempt is None:
        raise NoJobError(f"Attempt {task_attempt_index} of task {task_role}[{task_index}] is not found.")
    return job, task, task_attempt


def _tail_mode(request):
    params = request.query_params
    return "true" in (params.get("tail-mode", "").lower(), params.get("tailMode", "").lower())


class TaskAttemptLogsView(APIView):
    @extend_schema(
        operation_id="getTaskAttemptLogs", summary="Where a task attempt's logs are", description=docs.LOGS,
        parameters=_TASK_PARAMETERS + [OpenApiParameter("task_attempt_index", _INDEX, OpenApiParameter.PATH)],
        responses={200: LogLocationsSerializer, 403: _ERRORS[403], 404: _ERRORS[404]},
    )
    def get(self, request, username, name, attempt_index, task_role, task_index, task_attempt_index):
        job, task, task_attempt = _task_attempt(
            request, username, name, attempt_index, task_role, task_index, task_attempt_index
        )
        locations = []
        if log_file(task_attempt) is not None or kept_log(task_attempt) is not None:
            uri = _log_uri(request, job, task.job_attempt, task, task_attempt)
            # OpenPAI's clients ask for the tail here (`tail-mode`, or the JS SDK's `tailMode`).
            if _tail_mode(request):
                uri += "?tail-mode=true"
            locations.append({"name": "all", "uri": uri})
        return Response({"locations": locations})


class TaskAttemptLogView(APIView):
    @extend_schema(
        operation_id="getTaskAttemptLog", summary="A task attempt's log text",
        parameters=_TASK_PARAMETERS + [
            OpenApiParameter("task_attempt_index", _INDEX, OpenApiParameter.PATH),
            OpenApiParameter("tail-mode", OpenApiTypes.BOOL, description="only the last 16 KiB"),
        ],
        responses={(200, "text/plain"): OpenApiTypes.STR, 403: _ERRORS[403], 404: _ERRORS[404]},
    )
    def get(self, request, username, name, attempt_index, task_role, task_index, task_attempt_index):
        _, _, task_attempt = _task_attempt(
            request, username, name, attempt_index, task_role, task_index, task_attempt_index
        )
        path = log_file(task_attempt)
        if path is None:
            kept = kept_log(task_attempt)
            if kept is None:
                raise NoJobError("This task attempt has no log yet.")
            data = kept.encode()
            if _tail_mode(request):
                data = data[-LOG_TAIL_BYTES:]
            return HttpResponse(data, content_type="text/plain; charset=utf-8")
        handle = path.open("rb")
        if _tail_mode(request):
            size = path.stat().st_size
            handle.seek(max(0, size - LOG_TAIL_BYTES))
        return FileResponse(handle, content_type="text/plain; charset=utf-8")
