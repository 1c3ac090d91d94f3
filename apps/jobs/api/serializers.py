"""OpenPAI's JSON shapes for jobs (its swagger's JobSummary, JobDetail, JobAttempt).

These describe the responses in the OpenAPI schema; the views build the bodies as plain
dicts (the list, the hottest route, from plain rows) and tests check them field by field."""

from datetime import UTC

from rest_framework import serializers

from scheduler import exitcodes

from ..choices import ExecutionType, JobState, JobSubState


def epoch_ms(value):
    """A datetime as OpenPAI gives times: milliseconds since the Unix epoch, or None."""
    return None if value is None else int(value.timestamp() * 1000)


def iso_time(value):
    """A datetime as OpenPAI gives Kubernetes events' times: `2020-09-29T09:46:42.000Z`."""
    return None if value is None else value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + (
        f"{value.microsecond // 1000:03d}Z"
    )


class RetryDetailsSerializer(serializers.Serializer):
    user = serializers.IntegerField()
    platform = serializers.IntegerField()
    resource = serializers.IntegerField()


class JobSummarySerializer(serializers.Serializer):
    """OpenPAI's JobSummary; the list route builds these rows in `summaries.py`."""

    name = serializers.CharField()
    username = serializers.CharField()
    state = serializers.ChoiceField(choices=JobState.choices)
    subState = serializers.ChoiceField(choices=JobSubState.choices)
    executionType = serializers.ChoiceField(choices=ExecutionType.choices)
    tags = serializers.ListField(child=serializers.CharField())
    retries = serializers.IntegerField()
    retryDetails = RetryDetailsSerializer()
    retryDelayTime = serializers.IntegerField(allow_null=True)
    submissionTime = serializers.IntegerField(help_text="milliseconds since the Unix epoch")
    createdTime = serializers.IntegerField()
    launchedTime = serializers.IntegerField(allow_null=True)
    completedTime = serializers.IntegerField(allow_null=True)
    appExitCode = serializers.IntegerField(allow_null=True)
    virtualCluster = serializers.CharField()
    totalGpuNumber = serializers.IntegerField()
    totalTaskNumber = serializers.IntegerField()
    totalTaskRoleNumber = serializers.IntegerField()
    jobPriority = serializers.ChoiceField(choices=["prod", "test", "oppo"])
    debugId = serializers.CharField()


class ExitSpecSerializer(serializers.Serializer):
    """The exit spec row (scheduler/exitspec.yaml) that explains an exit, in OpenPAI's ExitSpec shape."""

    code = serializers.IntegerField(help_text="The exit code (a code no row names keeps its own value).")
    phrase = serializers.CharField(help_text="OpenPAI's phrase where its exit spec has the code.")
    type = serializers.ChoiceField(choices=["succeeded", "transient", "permanent", "unknown"])
    issuer = serializers.CharField()
    causer = serializers.ChoiceField(choices=["user", "platform", "resource"])
    behavior = serializers.ChoiceField(choices=["TRANSIENT", "PERMANENT", "UNKNOWN"], help_text="OpenPAI's word "
                                       "for the type.")
    reaction = serializers.ChoiceField(choices=["ALWAYS_RETRY", "NEVER_RETRY", "RETRY_TO_MAX"])
    reason = serializers.CharField()
    solution = serializers.ListField(child=serializers.CharField(), help_text="What to do, step by step.")


def exit_spec(exit_code, spec_code=None):
    """The exit spec of an exit code and the row it was classified as (None without either)."""
    if exit_code is None and spec_code is None:
        return None
    return exitcodes.row(spec_code if spec_code is not None else exit_code).as_dict(exit_code)


class TaskAttemptSerializer(serializers.Serializer):
    """One task attempt (a pod): OpenPAI's container fields."""

    attemptId = serializers.IntegerField()
    attemptState = serializers.ChoiceField(choices=JobState.choices)
    currentAttemptCreatedTime = serializers.IntegerField(allow_null=True)
    currentAttemptLaunchedTime = serializers.IntegerField(allow_null=True)
    currentAttemptCompletedTime = serializers.IntegerField(allow_null=True)
    containerId = serializers.CharField(allow_null=True)
    containerIp = serializers.CharField(allow_null=True)
    containerNodeName = serializers.CharField(allow_null=True)
    containerPorts = serializers.DictField()
    containerGpus = serializers.CharField(allow_null=True, help_text="Device indices, comma-separated; null for "
                                          "CPU-only tasks.")
    containerLog = serializers.CharField(allow_null=True, help_text="Path of the attempt's log locations.")
    containerExitCode = serializers.IntegerField(allow_null=True)
    containerExitSpec = ExitSpecSerializer(allow_null=True)
    containerExitDiagnostics = serializers.CharField(allow_null=True)


class TaskStatusSerializer(TaskAttemptSerializer):
    """A task, with its current (latest) task attempt's fields."""

    taskIndex = serializers.IntegerField()
    taskUid = serializers.CharField()
    taskState = serializers.ChoiceField(choices=JobState.choices)
    retries = serializers.IntegerField()
    accountableRetries = serializers.IntegerField(help_text="Retries that used up taskRetryCount.")
    createdTime = serializers.IntegerField(allow_null=True)
    launchedTime = serializers.IntegerField(allow_null=True)
    completedTime = serializers.IntegerField(allow_null=True)
    attemptId = serializers.IntegerField(allow_null=True)
    attemptState = serializers.ChoiceField(choices=JobState.choices, allow_null=True)


class TaskRoleStatusSerializer(serializers.Serializer):
    taskRoleStatus = serializers.DictField()
    taskStatuses = TaskStatusSerializer(many=True)


class ExitMessagesSerializer(serializers.Serializer):
    container = serializers.CharField(allow_null=True)
    runtime = serializers.CharField(allow_null=True)
    launcher = serializers.CharField(allow_null=True)


class JobStatusSerializer(serializers.Serializer):
    username = serializers.CharField()
    state = serializers.ChoiceField(choices=JobState.choices)
    subState = serializers.ChoiceField(choices=JobSubState.choices)
    executionType = serializers.ChoiceField(choices=ExecutionType.choices)
    retries = serializers.IntegerField()
    retryDetails = RetryDetailsSerializer()
    retryDelayTime = serializers.IntegerField(allow_null=True)
    submissionTime = serializers.IntegerField()
    createdTime = serializers.IntegerField(allow_null=True)
    launchedTime = serializers.IntegerField(allow_null=True)
    completedTime = serializers.IntegerField(allow_null=True)
    appId = serializers.CharField()
    appProgress = serializers.IntegerField()
    appTrackingUrl = serializers.CharField(allow_blank=True)
    appCreatedTime = serializers.IntegerField(allow_null=True)
    appLaunchedTime = serializers.IntegerField(allow_null=True)
    appCompletedTime = serializers.IntegerField(allow_null=True)
    appExitCode = serializers.IntegerField(allow_null=True)
    appExitSpec = ExitSpecSerializer(allow_null=True)
    appExitDiagnostics = serializers.CharField(allow_null=True)
    appExitMessages = ExitMessagesSerializer(allow_null=True)
    appExitTriggerMessage = serializers.CharField(allow_null=True)
    appExitTriggerTaskRoleName = serializers.CharField(allow_null=True)
    appExitTriggerTaskIndex = serializers.IntegerField(allow_null=True)
    appExitType = serializers.ChoiceField(choices=["Succeeded", "Failed"], allow_null=True)
    attemptId = serializers.IntegerField(allow_null=True)
    attemptState = serializers.CharField(allow_null=True)
    virtualCluster = serializers.CharField()
    jobPriority = serializers.CharField()
    waitReason = serializers.CharField(allow_blank=True)
    queuePosition = serializers.IntegerField(allow_null=True)


class JobDetailSerializer(serializers.Serializer):
    name = serializers.CharField()
    debugId = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    jobStatus = JobStatusSerializer()
    taskRoles = serializers.DictField(child=TaskRoleStatusSerializer())
    gpuEfficiency = serializers.JSONField(
        help_text="pai's own (OpenPAI clients ignore it): the attempt's utilisation as the worker sampled it — "
        "`source` (prometheus: DCGM's GPU utilisation; nvidia-smi; cpu: the task's CPU use, where no GPU figure "
        "exists), the job's last `percent` and `averagePercent`, `idleSinceTime` (below the team's threshold since), "
        "`warnedTime` and `actionTime` of the idle-GPU rule, the team's `idleRule` (and whether the job carries its "
        "exemption tag), and per task its `percent`, `averagePercent` and `samples`."
    )


class ExitDiagnosticsSerializer(serializers.Serializer):
    diagnosticsSummary = serializers.CharField()
    runtime = serializers.CharField(allow_null=True)
    launcher = serializers.CharField(allow_null=True)


class JobAttemptSerializer(serializers.Serializer):
    jobName = serializers.CharField()
    frameworkName = serializers.CharField()
    uid = serializers.CharField()
    userName = serializers.CharField()
    state = serializers.CharField()
    originState = serializers.CharField()
    maxAttemptCount = serializers.IntegerField(allow_null=True, help_text="null: retried without limit "
                                               "(jobRetryCount -1 or -2).")
    attemptIndex = serializers.IntegerField()
    jobStartedTime = serializers.IntegerField(allow_null=True)
    attemptStartedTime = serializers.IntegerField(allow_null=True)
    attemptCompletedTime = serializers.IntegerField(allow_null=True)
    exitCode = serializers.IntegerField(allow_null=True)
    exitPhrase = serializers.CharField(allow_null=True)
    exitType = serializers.CharField(allow_null=True)
    exitDiagnostics = ExitDiagnosticsSerializer(allow_null=True)
    appExitSpec = ExitSpecSerializer(allow_null=True)
    appExitDiagnostics = serializers.CharField(allow_null=True)
    appExitMessages = ExitMessagesSerializer(allow_null=True)
    appExitTriggerMessage = serializers.CharField(allow_null=True)
    appExitTriggerTaskRoleName = serializers.CharField(allow_null=True)
    appExitTriggerTaskIndex = serializers.IntegerField(allow_null=True)
    totalGpuNumber = serializers.IntegerField()
    totalTaskNumber = serializers.IntegerField()
    totalTaskRoleNumber = serializers.IntegerField()
    taskRoles = serializers.DictField(child=TaskRoleStatusSerializer())
    isLatest = serializers.BooleanField()


class TaskAttemptsSerializer(serializers.Serializer):
    jobName = serializers.CharField()
    frameworkName = serializers.CharField()
    userName = serializers.CharField()
    jobAttemptId = serializers.IntegerField()
    taskRoleName = serializers.CharField()
    taskIndex = serializers.IntegerField()
    taskState = serializers.ChoiceField(choices=JobState.choices)
    retries = serializers.IntegerField()
    accountableRetries = serializers.IntegerField()
    attempts = TaskAttemptSerializer(many=True)


class JobEventSerializer(serializers.Serializer):
    uid = serializers.CharField()
    frameworkName = serializers.CharField(help_text="The job's debugId, as OpenPAI names its framework.")
    podUid = serializers.CharField()
    taskroleName = serializers.CharField()
    taskName = serializers.CharField(help_text="The pod's name.")
    taskIndex = serializers.IntegerField(allow_null=True)
    type = serializers.CharField()
    reason = serializers.CharField()
    message = serializers.CharField()
    firstTimestamp = serializers.CharField(help_text="ISO 8601, UTC")
    lastTimestamp = serializers.CharField(help_text="ISO 8601, UTC")
    count = serializers.IntegerField()
    sourceComponent = serializers.CharField()
    sourceHost = serializers.CharField(allow_null=True)


class JobEventsSerializer(serializers.Serializer):
    totalCount = serializers.IntegerField()
    data = JobEventSerializer(many=True)


class LogLocationSerializer(serializers.Serializer):
    name = serializers.CharField()
    uri = serializers.CharField()


class LogLocationsSerializer(serializers.Serializer):
    locations = LogLocationSerializer(many=True)


class ValueSerializer(serializers.Serializer):
    value = serializers.CharField(max_length=255)


class ExecutionTypeSerializer(serializers.Serializer):
    value = serializers.ChoiceField(choices=ExecutionType.choices)


class SubmitResponseSerializer(serializers.Serializer):
    message = serializers.CharField()
    name = serializers.CharField()
    virtualCluster = serializers.CharField()
    warnings = serializers.ListField(child=serializers.CharField())
