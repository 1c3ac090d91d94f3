"""Descriptions and examples for the job routes' OpenAPI schema."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter

SUBMIT = """Submit a job protocol v2 document, as OpenPAI's clients send it: YAML with
`Content-Type: text/yaml` (a JSON object of the same document is accepted too).

The virtual cluster is `defaults.virtualCluster`, else your default VC: the one you chose
on the portal's account page while you may still submit there, else the first, by name,
granted to your groups. SKU and priority come from `extras.hivedScheduler`,
gang allocation from `extras.gangAllocation` (default true). Validation errors name the
field path and the rule. Fields pai keeps but does not act on yet come back as
`warnings`. Secrets are substituted only in image `auth`, reach each task as one file
per key in the directory `$PAI_SECRETS_DIR` names, and are shown as `******` everywhere.
The job is queued as `WAITING` / `AttemptCreationPending`.

Bounds: the document is at most `PAI_JOB_PROTOCOL_MAX_BYTES` (256 KiB; 413 beyond), nested
at most 64 levels, with at most 100 YAML aliases and at most 1 MiB once they are
expanded (a recursive alias is refused); a job has at most `PAI_JOB_MAX_TASKS` tasks
(10,000) and each task at most `PAI_JOB_MAX_PORTS_PER_TASK` host ports (100, OpenPAI's
`ssh` and `http` included), the job no more than one host's port range (20,000)."""

LIST = """Jobs you may see, newest first: your own, and the other jobs in your teams' virtual
clusters (as summaries). Filters take comma-separated lists. Without `withTotalCount=true`
the body is a JSON array, as in OpenPAI; with it, `{totalCount, data}`. `limit`
defaults to 100 and is at most 1000."""

CONFIG = """The job's protocol document with secrets masked: YAML by default (as OpenPAI
returns it), JSON with `Accept: application/json`. Readable by the owner, the team's
admins and platform admins."""

EXECUTION_TYPE = """`STOP` marks the job for stop. A job with no pods yet ends `STOPPED` at once
(exit code -210); otherwise it becomes `STOPPING` and the worker deletes its pods.
`START` on a running job changes nothing; a stopped job is not restarted."""

DETAIL = """The job's status and its latest attempt's tasks, in OpenPAI's JobDetail shape;
`/attempts/{attempt_index}` shows that attempt instead (OpenPAI's SDK `getJob(user, job,
attemptId)`). pai adds `jobPriority`, `waitReason` (why a waiting job waits) and
`queuePosition`."""

EVENTS = "Kubernetes events about the job's pods, oldest first, as the worker recorded them."

LOGS = """The log files the backend has written for this task attempt, each with a URI that
serves its text (`?tail-mode=true` or `tailMode=true`, here or on the text, for the last
16 KiB). Empty until a pod has written a log: pai lists only logs that exist. On Kubernetes the worker keeps the end of a
task's log (the last 1,000 lines, at most `PAI_TASK_LOG_KEEP_BYTES`) when its pod ends,
and deletes the pod: that end is what the URI serves afterwards."""

LIST_PARAMETERS = [
    OpenApiParameter("username", OpenApiTypes.STR, description="owners, comma-separated"),
    OpenApiParameter("vc", OpenApiTypes.STR, description="virtual clusters, comma-separated"),
    OpenApiParameter("state", OpenApiTypes.STR, description="states, comma-separated (WAITING, RUNNING, ...)"),
    OpenApiParameter("keyword", OpenApiTypes.STR, description="matched in the job, user and VC names"),
    OpenApiParameter("tagsContain", OpenApiTypes.STR, description="jobs with any of these tags"),
    OpenApiParameter("tagsNotContain", OpenApiTypes.STR, description="jobs with none of these tags"),
    OpenApiParameter("offset", OpenApiTypes.INT),
    OpenApiParameter("limit", OpenApiTypes.INT, description="1 to 1000, default 100"),
    OpenApiParameter("withTotalCount", OpenApiTypes.BOOL),
    OpenApiParameter(
        "order", OpenApiTypes.STR,
        description="`<field>,ASC|DESC`; field one of jobName, submissionTime, username, vc, retries, "
        "totalTaskNumber, totalGpuNumber, state, completionTime",
    ),
]

JOB_YAML = """protocolVersion: 2
name: mnist_pytorch
type: job
prerequisites:
  - name: image
    type: dockerimage
    uri: openpai/standard:python_3.6-pytorch_1.2.0-gpu
taskRoles:
  worker:
    instances: 1
    dockerImage: image
    resourcePerInstance: {cpu: 8, memoryMB: 16384, gpu: 1}
    commands:
      - python mnist.py --epochs 1
defaults:
  virtualCluster: team_a
extras:
  hivedScheduler:
    jobPriorityClass: test
"""

SUBMIT_EXAMPLES = [
    OpenApiExample("single-role GPU job (YAML)", value=JOB_YAML, media_type="text/yaml", request_only=True),
    OpenApiExample(
        "accepted",
        value={"message": "update job mnist_pytorch successfully", "name": "mnist_pytorch",
               "virtualCluster": "team_a", "warnings": []},
        response_only=True, status_codes=["202"],
    ),
    OpenApiExample(
        "invalid", value={"code": "InvalidProtocolError",
                          "message": "taskRoles.worker.resourcePerInstance.gpu: must be an integer ≥ 0"},
        response_only=True, status_codes=["400"],
    ),
]

LIST_EXAMPLE = OpenApiExample(
    "one job",
    value=[{
        "name": "mnist_pytorch", "username": "alice", "state": "WAITING", "subState": "AttemptCreationPending",
        "executionType": "START", "tags": [], "retries": 0,
        "retryDetails": {"user": 0, "platform": 0, "resource": 0}, "retryDelayTime": None,
        "submissionTime": 1764680000000, "createdTime": None, "launchedTime": None, "completedTime": None,
        "appExitCode": None, "virtualCluster": "team_a", "totalGpuNumber": 1, "totalTaskNumber": 1,
        "totalTaskRoleNumber": 1, "jobPriority": "test", "debugId": "5f1c0e1b0b0d4c7e9a9b3c1d2e3f4a5b",
    }],
    response_only=True,
)

DETAIL_EXAMPLE = OpenApiExample(
    "queued job",
    value={
        "name": "mnist_pytorch", "debugId": "5f1c0e1b0b0d4c7e9a9b3c1d2e3f4a5b", "tags": [],
        "jobStatus": {
            "username": "alice", "state": "WAITING", "subState": "AttemptCreationPending", "executionType": "START",
            "retries": 0, "retryDetails": {"user": 0, "platform": 0, "resource": 0}, "retryDelayTime": None,
            "createdTime": 1764680000000, "completedTime": None, "appId": "5f1c0e1b0b0d4c7e9a9b3c1d2e3f4a5b",
            "appLaunchedTime": None, "appCompletedTime": None, "appExitCode": None, "appExitSpec": None,
            "appExitDiagnostics": None, "appExitTriggerTaskRoleName": None, "appExitTriggerTaskIndex": None,
            "attemptId": None, "attemptState": None, "virtualCluster": "team_a", "jobPriority": "test",
            "waitReason": "", "queuePosition": None,
        },
        "taskRoles": {"worker": {"taskRoleStatus": {"name": "worker"}, "taskStatuses": []}},
    },
    response_only=True,
)
