"""OpenPAI's JSON shapes for jobs (its swagger's JobSummary, JobDetail, JobAttempt).

These describe the responses in the OpenAPI schema; the views build the bodies as plain
dicts (the list, the hottest route, from plain rows) and tests check them field by field."""

from rest_framework import serializers

from scheduler import exitcodes

from ..choices import ExecutionType, JobState, JobSubState


def epoch_ms(value):
    """A datetime as OpenPAI gives times: milliseconds since the Unix epoch, or None."""
    return None if value is None else int(value.timestamp() * 1000)


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
    """The exit spec row (scheduler/exitspec.yaml) that explains an exit: what happened, what to do."""

    code = serializers.IntegerField()
    phrase = serializers.CharField()
    type = serializers.ChoiceField(choices=["succeeded", "transient", "permanent", "unknown"])
    issuer = serializers.CharField()
    causer = serializers.ChoiceField(choices=["user", "platform", "resource"])
    reason = serializers.CharField()
    solution = serializers.CharField()


def exit_spec(code):
    return None if code is None else exitcodes.row(code).as_dict()


class TaskStatusSerializer(serializers.Serializer):
    taskIndex = serializers.IntegerField()
    taskState = serializers.ChoiceField(choices=JobState.choices)
    retries = serializers.IntegerField()
    containerId = serializers.CharField(allow_null=True)
    containerIp = serializers.CharField(allow_null=True)
    containerNodeName = serializers.CharField(allow_null=True)
    containerPorts = serializers.DictField(allow_null=True)
    containerGpus = serializers.CharField(allow_null=True)
    containerLog = serializers.CharField(allow_null=True)
    containerExitCode = serializers.IntegerField(allow_null=True)
    containerExitSpec = ExitSpecSerializer(allow_null=True)
    launchedTime = serializers.IntegerField(allow_null=True)
    completedTime = serializers.IntegerField(allow_null=True)


class TaskRoleStatusSerializer(serializers.Serializer):
    taskRoleStatus = serializers.DictField()
    taskStatuses = TaskStatusSerializer(many=True)


class JobStatusSerializer(serializers.Serializer):
    username = serializers.CharField()
    state = serializers.ChoiceField(choices=JobState.choices)
    subState = serializers.ChoiceField(choices=JobSubState.choices)
    executionType = serializers.ChoiceField(choices=ExecutionType.choices)
    retries = serializers.IntegerField()
    retryDetails = RetryDetailsSerializer()
    retryDelayTime = serializers.IntegerField(allow_null=True)
    createdTime = serializers.IntegerField(allow_null=True)
    completedTime = serializers.IntegerField(allow_null=True)
    appId = serializers.CharField()
    appLaunchedTime = serializers.IntegerField(allow_null=True)
    appCompletedTime = serializers.IntegerField(allow_null=True)
    appExitCode = serializers.IntegerField(allow_null=True)
    appExitSpec = ExitSpecSerializer(allow_null=True)
    appExitDiagnostics = serializers.CharField(allow_null=True)
    appExitTriggerTaskRoleName = serializers.CharField(allow_null=True)
    appExitTriggerTaskIndex = serializers.IntegerField(allow_null=True)
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


class JobAttemptSerializer(serializers.Serializer):
    jobName = serializers.CharField()
    frameworkName = serializers.CharField()
    userName = serializers.CharField()
    state = serializers.CharField()
    originState = serializers.CharField()
    maxAttemptCount = serializers.IntegerField()
    attemptIndex = serializers.IntegerField()
    jobStartedTime = serializers.IntegerField(allow_null=True)
    attemptStartedTime = serializers.IntegerField(allow_null=True)
    attemptCompletedTime = serializers.IntegerField(allow_null=True)
    exitCode = serializers.IntegerField(allow_null=True)
    exitPhrase = serializers.CharField(allow_null=True)
    exitType = serializers.CharField(allow_null=True)
    appExitSpec = ExitSpecSerializer(allow_null=True)
    appExitDiagnostics = serializers.CharField(allow_null=True)
    appExitTriggerTaskRoleName = serializers.CharField(allow_null=True)
    appExitTriggerTaskIndex = serializers.IntegerField(allow_null=True)
    totalGpuNumber = serializers.IntegerField()
    totalTaskNumber = serializers.IntegerField()
    totalTaskRoleNumber = serializers.IntegerField()
    taskRoles = serializers.DictField(child=TaskRoleStatusSerializer())
    isLatest = serializers.BooleanField()


class TaskAttemptSerializer(serializers.Serializer):
    attemptId = serializers.IntegerField()
    attemptState = serializers.ChoiceField(choices=JobState.choices)
    currentAttemptLaunchedTime = serializers.IntegerField(allow_null=True)
    currentAttemptCompletedTime = serializers.IntegerField(allow_null=True)
    containerId = serializers.CharField(allow_null=True)
    containerIp = serializers.CharField(allow_null=True)
    containerNodeName = serializers.CharField(allow_null=True)
    containerPorts = serializers.DictField()
    containerGpus = serializers.CharField(allow_null=True)
    containerExitCode = serializers.IntegerField(allow_null=True)
    containerExitSpec = ExitSpecSerializer(allow_null=True)
    containerExitDiagnostics = serializers.CharField(allow_blank=True)


class TaskAttemptsSerializer(serializers.Serializer):
    jobName = serializers.CharField()
    frameworkName = serializers.CharField()
    userName = serializers.CharField()
    jobAttemptId = serializers.IntegerField()
    taskRoleName = serializers.CharField()
    taskIndex = serializers.IntegerField()
    taskState = serializers.ChoiceField(choices=JobState.choices)
    retries = serializers.IntegerField()
    attempts = TaskAttemptSerializer(many=True)


class JobEventSerializer(serializers.Serializer):
    uid = serializers.CharField()
    frameworkName = serializers.CharField()
    podUid = serializers.CharField()
    taskroleName = serializers.CharField()
    taskIndex = serializers.IntegerField(allow_null=True)
    type = serializers.CharField()
    reason = serializers.CharField()
    message = serializers.CharField()
    firstTimestamp = serializers.IntegerField()
    lastTimestamp = serializers.IntegerField()
    count = serializers.IntegerField()
    sourceComponent = serializers.CharField()
    sourceHost = serializers.CharField()


class JobEventsSerializer(serializers.Serializer):
    frameworkName = serializers.CharField()
    events = JobEventSerializer(many=True)


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
