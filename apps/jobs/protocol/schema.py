"""The structural rules of job protocol v2, as a JSON Schema.

`x-message` gives the rule in words for every keyword of its schema node, so an error
reads `taskRoles.worker.resourcePerInstance.gpu: must be an integer ≥ 0` whichever of
`type` or `minimum` failed. Rules that relate fields to each other (references,
uniqueness, completion counts) are checked in `references.py`.
"""

from scheduler.backends import SECRET_KEY_PATTERN

NAME_PATTERN = r"^[a-zA-Z0-9_-]+$"
TASK_ROLE_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"


def _integer(minimum, message=None):
    return {"type": "integer", "minimum": minimum, "x-message": message or f"must be an integer ≥ {minimum}"}


def _string(message="must be a string"):
    return {"type": "string", "x-message": message}


_STRING_LIST = {
    "type": "array",
    "items": _string("must be a string (one command line)"),
    "x-message": "must be a list of strings",
}
_NULLABLE_COUNT = {"type": ["integer", "null"], "minimum": -1, "x-message": "must be an integer ≥ -1 or null"}
_PROTOCOL_VERSION = {"enum": [2, "2"], "x-message": "must be 2"}
# FrameworkController's RetryPolicySpec.maxRetryCount, as OpenPAI hands jobRetryCount and
# taskRetryCount to it: -1 retries every failure without limit, -2 retries even a success.
_RETRY_COUNT = {
    "type": "integer",
    "minimum": -2,
    "x-message": "must be an integer ≥ -2 (-1: retry failures without limit, -2: retry even after success)",
}

_AUTH = {
    "type": "object",
    "properties": {"username": _string(), "password": _string(), "registryuri": _string()},
    "additionalProperties": False,
    "x-message": "must be a map with username, password and registryuri",
}

_PREREQUISITE = {
    "type": "object",
    "required": ["name", "type"],
    "properties": {
        "name": {"type": "string", "minLength": 1, "x-message": "must be a non-empty string"},
        "type": {
            "enum": ["dockerimage", "script", "output", "data"],
            "x-message": "must be one of dockerimage, script, output, data",
        },
        "protocolVersion": _PROTOCOL_VERSION,
        "version": {"type": ["string", "number"], "x-message": "must be a string or a number"},
        "contributor": _string(),
        "description": _string(),
        "plugin": _string("must be a plugin name"),
        "require": {"type": "array", "items": _string(), "x-message": "must be a list of strings"},
        "uri": {
            "type": ["string", "array"],
            "items": _string(),
            "x-message": "must be a string or a list of strings",
        },
        "auth": _AUTH,
    },
    # Plugins (data, output, script) may carry fields of their own.
    "additionalProperties": True,
    "allOf": [
        {
            "if": {"properties": {"type": {"const": "dockerimage"}}, "required": ["type"]},
            "then": {
                "required": ["uri"],
                "properties": {"uri": {"type": "string", "minLength": 1, "x-message": "must be the image name"}},
            },
        }
    ],
    "x-message": "must be a map",
}

_TASK_ROLE = {
    "type": "object",
    "required": ["dockerImage", "resourcePerInstance", "commands"],
    "properties": {
        "protocolVersion": _PROTOCOL_VERSION,
        "instances": _integer(1),
        "completion": {
            "type": "object",
            "properties": {"minFailedInstances": _NULLABLE_COUNT, "minSucceededInstances": _NULLABLE_COUNT},
            "additionalProperties": False,
            "x-message": "must be a map with minFailedInstances and minSucceededInstances",
        },
        "taskRetryCount": _RETRY_COUNT,
        "prerequisites": {
            "type": "array",
            "items": _string("must be a prerequisite name"),
            "x-message": "must be a list of prerequisite names",
        },
        "dockerImage": {"type": "string", "minLength": 1, "x-message": "must name a dockerimage prerequisite"},
        "data": _string("must name a data prerequisite"),
        "output": _string("must name an output prerequisite"),
        "script": _string("must name a script prerequisite"),
        "extraContainerOptions": {
            "type": "object",
            "properties": {
                "shmMB": _integer(0),
                "infiniband": {"type": "boolean", "x-message": "must be true or false"},
            },
            "additionalProperties": True,
            "x-message": "must be a map",
        },
        "resourcePerInstance": {
            "type": "object",
            "required": ["cpu", "memoryMB", "gpu"],
            "properties": {
                "cpu": _integer(1),
                "memoryMB": _integer(1),
                "gpu": _integer(0),
                "ports": {
                    "type": "object",
                    "propertyNames": {
                        "pattern": TASK_ROLE_PATTERN,
                        "x-message": "port labels start with a letter or '_', then letters, digits or '_'",
                    },
                    "additionalProperties": _integer(0, "must be an integer ≥ 0 (the number of ports)"),
                    "x-message": "must be a map of port label to count",
                },
            },
            "additionalProperties": False,
            "x-message": "must be a map with cpu, memoryMB, gpu and optional ports",
        },
        "commands": {**_STRING_LIST, "minItems": 1, "x-message": "must be a list of at least one command line"},
    },
    "additionalProperties": False,
    "x-message": "must be a map",
}

def _nullable_string(message="must be a string or null"):
    return {"type": ["string", "null"], "x-message": message}


# OpenPAI's webportal writes `skuNum` and `skuType: null` into every task role on HiveD
# clusters; unknown keys are kept (and reported as warnings), as OpenPAI kept them.
_HIVED_TASK_ROLE = {
    "type": "object",
    "properties": {
        "skuType": _nullable_string("must be a SKU name or null"),
        "skuNumber": {"type": ["integer", "null"], "minimum": 1, "x-message": "must be an integer ≥ 1 or null"},
        "skuNum": {"type": ["integer", "null"], "minimum": 1, "x-message": "must be an integer ≥ 1 or null"},
        "pinnedCellId": _nullable_string(),
        "affinityGroupName": _nullable_string(),
    },
    "additionalProperties": True,
    "x-message": "must be a map with skuType, skuNum (or skuNumber), pinnedCellId, affinityGroupName",
}

_EXTRAS = {
    "type": "object",
    "properties": {
        "gangAllocation": {"type": "boolean", "x-message": "must be true or false"},
        "submitFrom": _string(),
        "hivedScheduler": {
            "type": "object",
            "properties": {
                "jobPriorityClass": {"enum": ["prod", "test", "oppo"], "x-message": "must be one of prod, test, oppo"},
                "taskRoles": {
                    "type": "object",
                    "additionalProperties": _HIVED_TASK_ROLE,
                    "x-message": "must be a map of task role name to settings",
                },
                "lazyPreemptionEnable": {"type": "boolean", "x-message": "must be true or false"},
            },
            "additionalProperties": True,
            "x-message": "must be a map with jobPriorityClass, taskRoles, lazyPreemptionEnable",
        },
        "storages": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "minLength": 1, "x-message": "must be a storage name"},
                    "mountPath": {"type": "string", "pattern": "^/", "x-message": "must be an absolute path"},
                },
                "additionalProperties": False,
                "x-message": "must be a map with name and mountPath",
            },
            "x-message": "must be a list",
        },
        "com.microsoft.pai.runtimeplugin": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["plugin"],
                "properties": {"plugin": _string("must be a plugin name")},
                "x-message": "must be a map with a plugin name",
            },
            "x-message": "must be a list of plugins",
        },
        "jobStatusChangeNotification": {
            "type": "object",
            "properties": {
                state: {"type": "boolean", "x-message": "must be true or false"}
                for state in ("running", "succeeded", "stopped", "failed", "retried")
            },
            "additionalProperties": False,
            "x-message": "must be a map of running, succeeded, stopped, failed, retried to true/false",
        },
    },
    "additionalProperties": True,
    "x-message": "must be a map",
}

JOB_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["protocolVersion", "name", "type", "taskRoles"],
    "properties": {
        "protocolVersion": _PROTOCOL_VERSION,
        "name": {
            "type": "string",
            "pattern": NAME_PATTERN,
            "minLength": 1,
            "maxLength": 255,
            "x-message": "must be 1 to 255 letters, digits, '_' or '-'",
        },
        "type": {"const": "job", "x-message": "must be 'job'"},
        "version": {"type": ["string", "number"], "x-message": "must be a string or a number"},
        "contributor": _string(),
        "description": _string(),
        "parameters": {"type": "object", "x-message": "must be a map"},
        "secrets": {
            "type": "object",
            "propertyNames": {
                "pattern": SECRET_KEY_PATTERN,
                "x-message": "secret names are 1 to 253 letters, digits, '-', '_' or '.', neither '.' nor "
                             "starting with '..' (each becomes a file name)",
            },
            "x-message": "must be a map",
        },
        "jobRetryCount": _RETRY_COUNT,
        "prerequisites": {"type": "array", "items": _PREREQUISITE, "x-message": "must be a list"},
        "taskRoles": {
            "type": "object",
            "minProperties": 1,
            "propertyNames": {
                "pattern": TASK_ROLE_PATTERN,
                "x-message": "task role names start with a letter or '_', then letters, digits or '_'",
            },
            "additionalProperties": _TASK_ROLE,
            "x-message": "must be a map of at least one task role",
        },
        "deployments": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "taskRoles"],
                "properties": {
                    "protocolVersion": _PROTOCOL_VERSION,
                    "name": {"type": "string", "minLength": 1, "x-message": "must be a non-empty string"},
                    "taskRoles": {
                        "type": "object",
                        "additionalProperties": {
                            "type": "object",
                            "properties": {"preCommands": _STRING_LIST, "postCommands": _STRING_LIST},
                            "additionalProperties": False,
                            "x-message": "must be a map with preCommands and postCommands",
                        },
                        "x-message": "must be a map of task role name to commands",
                    },
                },
                "additionalProperties": True,
                "x-message": "must be a map with name and taskRoles",
            },
            "x-message": "must be a list",
        },
        "defaults": {
            "type": "object",
            "properties": {"virtualCluster": _string("must be a virtual cluster name"), "deployment": _string()},
            "additionalProperties": True,
            "x-message": "must be a map with virtualCluster and deployment",
        },
        "extras": _EXTRAS,
    },
    "additionalProperties": False,
    "x-message": "must be a map (the job document)",
}
