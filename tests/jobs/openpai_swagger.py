"""The job response schemas of OpenPAI's REST API (its swagger, microsoft/openpaisdk
`src/api/v2/swagger.yaml`): the subset pai's job routes must satisfy, as JSON Schema.

OpenAPI's `nullable: true` is written as a type list with "null". Each schema also lists
the fields OpenPAI's webportal and SDK read (`required`), beyond the swagger's own
required lists: a client that reads them must find them.
"""

import jsonschema

STATES = ["WAITING", "RUNNING", "STOPPING", "STOPPED", "SUCCEEDED", "FAILED", "UNKNOWN"]
SUB_STATES = [
    "AttemptCreationPending", "AttemptCreationRequested", "AttemptPreparing", "AttemptRunning",
    "AttemptDeletionPending", "AttemptDeletionRequested", "AttemptDeleting", "AttemptCompleted", "Completed",
]


def _nullable(kind):
    return {"type": [kind, "null"]}


EXIT_SPEC = {
    "type": ["object", "null"],
    "properties": {
        "code": {"type": "integer"},
        "phrase": {"type": "string"},
        "issuer": {"type": "string"},
        "causer": {"type": "string"},
        "type": {"type": "string"},
        "stage": {"type": "string"},
        "behavior": {"type": "string"},
        "reaction": {"type": "string"},
        "reason": {"type": "string"},
        "repro": {"type": "array", "items": {"type": "string"}},
        # The webportal's failed-job page calls solution.map(...).
        "solution": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["code", "phrase", "reason", "solution"],
}

EXIT_MESSAGES = {
    "type": ["object", "null"],
    "properties": {"container": _nullable("string"), "runtime": {}, "launcher": _nullable("string")},
}

TASK_STATUS = {
    "type": "object",
    "properties": {
        "taskIndex": {"type": "integer"},
        "taskUid": {"type": "string"},
        "taskState": {"enum": STATES},
        "containerId": _nullable("string"),
        "containerIp": _nullable("string"),
        "containerNodeName": _nullable("string"),
        "containerPorts": {"type": "object"},
        "containerGpus": _nullable("string"),
        "containerLog": _nullable("string"),
        "containerExitCode": _nullable("integer"),
        "containerExitSpec": EXIT_SPEC,
        "containerExitDiagnostics": _nullable("string"),
        "retries": {"type": "integer"},
        "accountableRetries": {"type": "integer"},
        "createdTime": _nullable("integer"),
        "launchedTime": _nullable("integer"),
        "completedTime": _nullable("integer"),
        "attemptId": _nullable("integer"),
        "attemptState": {"enum": STATES + [None]},
        "currentAttemptCreatedTime": _nullable("integer"),
        "currentAttemptLaunchedTime": _nullable("integer"),
        "currentAttemptCompletedTime": _nullable("integer"),
        "hived": {"type": ["object", "null"]},
    },
    "required": [
        "taskIndex", "taskUid", "taskState", "containerId", "containerIp", "containerPorts", "containerGpus",
        "containerLog", "containerExitCode", "containerExitSpec", "containerExitDiagnostics", "retries",
        "accountableRetries", "createdTime", "completedTime", "attemptId", "attemptState",
        "currentAttemptCreatedTime", "currentAttemptLaunchedTime",
    ],
}

TASK_ROLES = {
    "type": "object",
    "additionalProperties": {
        "type": "object",
        "properties": {
            "taskRoleStatus": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
            "taskStatuses": {"type": "array", "items": TASK_STATUS},
        },
        "required": ["taskRoleStatus", "taskStatuses"],
    },
}

RETRY_DETAILS = {
    "type": "object",
    "properties": {k: {"type": "integer"} for k in ("user", "platform", "resource")},
    "required": ["user", "platform", "resource"],
}

JOB_DETAIL = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "debugId": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "jobStatus": {
            "type": "object",
            "properties": {
                "username": {"type": "string"},
                "state": {"enum": STATES},
                "subState": {"enum": SUB_STATES},
                "executionType": {"enum": ["START", "STOP"]},
                "retries": {"type": "integer"},
                "retryDetails": RETRY_DETAILS,
                "retryDelayTime": _nullable("integer"),
                "submissionTime": {"type": "integer"},
                "createdTime": _nullable("integer"),
                "completedTime": _nullable("integer"),
                "appId": {"type": "string"},
                "appCreatedTime": _nullable("integer"),
                "appLaunchedTime": _nullable("integer"),
                "appCompletedTime": _nullable("integer"),
                "appExitCode": _nullable("integer"),
                "appExitSpec": EXIT_SPEC,
                "appExitDiagnostics": _nullable("string"),
                "appExitMessages": EXIT_MESSAGES,
                "appExitTriggerMessage": _nullable("string"),
                "appExitTriggerTaskRoleName": _nullable("string"),
                "appExitTriggerTaskIndex": _nullable("integer"),
                "appExitType": _nullable("string"),
                "attemptId": _nullable("integer"),
                "attemptState": _nullable("string"),
                "virtualCluster": {"type": "string"},
            },
            "required": [
                "username", "virtualCluster", "state", "subState", "executionType", "retries", "retryDetails",
                "createdTime", "completedTime", "appCreatedTime", "appLaunchedTime", "appCompletedTime",
                "appExitCode", "appExitSpec", "appExitDiagnostics", "appExitMessages", "appExitTriggerMessage",
                "appExitTriggerTaskRoleName", "appExitTriggerTaskIndex", "appExitType",
            ],
        },
        "taskRoles": TASK_ROLES,
    },
    "required": ["name", "jobStatus", "taskRoles"],
}

JOB_ATTEMPT = {
    "type": "object",
    "properties": {
        "jobName": {"type": "string"},
        "frameworkName": {"type": "string"},
        "uid": {"type": "string"},
        "userName": {"type": "string"},
        "state": {"type": "string"},
        "originState": _nullable("string"),
        "maxAttemptCount": _nullable("integer"),
        "attemptIndex": _nullable("integer"),
        "jobStartedTime": _nullable("integer"),
        "attemptStartedTime": _nullable("integer"),
        "attemptCompletedTime": _nullable("integer"),
        "exitCode": _nullable("integer"),
        "exitPhrase": _nullable("string"),
        "exitType": _nullable("string"),
        "exitDiagnostics": {
            "type": ["object", "null"],
            "properties": {"diagnosticsSummary": {"type": "string"}, "launcher": _nullable("string")},
        },
        "appExitTriggerMessage": _nullable("string"),
        "appExitTriggerTaskRoleName": _nullable("string"),
        "appExitTriggerTaskIndex": _nullable("integer"),
        "appExitSpec": EXIT_SPEC,
        "appExitDiagnostics": _nullable("string"),
        "appExitMessages": EXIT_MESSAGES,
        "totalGpuNumber": {"type": "integer"},
        "totalTaskNumber": {"type": "integer"},
        "totalTaskRoleNumber": {"type": "integer"},
        "taskRoles": TASK_ROLES,
        "isLatest": {"type": "boolean"},
    },
    "required": ["jobName", "frameworkName", "userName", "state", "attemptIndex", "taskRoles", "isLatest"],
}

JOB_EVENTS = {
    "type": "object",
    "properties": {
        "totalCount": {"type": "number"},
        "data": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "uid": {"type": "string"},
                    "frameworkName": {"type": "string"},
                    "podUid": {"type": "string"},
                    "taskroleName": {"type": "string"},
                    "taskName": {"type": "string"},
                    "taskIndex": {"type": "integer"},
                    "type": {"enum": ["Normal", "Warning"]},
                    "reason": {"type": "string"},
                    "message": {"type": "string"},
                    "firstTimestamp": {"type": "string"},
                    "lastTimestamp": {"type": "string"},
                    "count": {"type": "integer"},
                    "sourceComponent": {"type": "string"},
                    "sourceHost": _nullable("string"),
                },
                "required": ["uid", "frameworkName", "podUid", "taskroleName", "taskName", "taskIndex", "type",
                             "reason", "message", "firstTimestamp", "lastTimestamp", "count", "sourceComponent",
                             "sourceHost"],
            },
        },
    },
    "required": ["totalCount", "data"],
}


def assert_valid(schema, body):
    jsonschema.validate(body, schema, cls=jsonschema.Draft202012Validator)
    return body
