"""The response shapes of OpenPAI's REST API v2, as its swagger (microsoft/pai
src/rest-server/docs/swagger.yaml) describes them, for checking pai's answers."""

import jsonschema

RESOURCES = {
    "type": "object",
    "properties": {k: {"type": "number"} for k in ("cpu", "vCores", "memory", "gpu", "GPUs")},
}

SCHEMAS = {
    "Info": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "version": {"type": "string"},
            "launcherType": {"enum": ["yarn", "k8s"]},
            "authnMethod": {"enum": ["basic", "OIDC"]},
        },
        "required": ["name", "version", "launcherType", "authnMethod"],
    },
    "Login": {
        "type": "object",
        "properties": {"token": {"type": "string"}, "user": {"type": "string"}, "admin": {"type": "boolean"}},
        "required": ["token", "user", "admin"],
    },
    "Tokens": {
        "type": "object",
        "properties": {"tokens": {"type": "array", "items": {"type": "string"}}},
        "required": ["tokens"],
    },
    "ApplicationToken": {
        "type": "object",
        "properties": {"token": {"type": "string"}, "application": {"type": "boolean"}},
    },
    "Response": {
        "type": "object",
        "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
        "required": ["message"],
    },
    "UserInfo": {
        "type": "object",
        "properties": {
            "username": {"type": "string"},
            "admin": {"type": "boolean"},
            "virtualCluster": {"type": "array", "items": {"type": "string"}},
            "storageConfig": {"type": "array", "items": {"type": "string"}},
            "email": {"type": "string"},
            "extension": {"type": "object"},
        },
        "required": ["username", "admin", "virtualCluster", "storageConfig", "email", "extension"],
    },
    "Group": {
        "type": "object",
        "properties": {
            "groupname": {"type": "string"},
            "description": {"type": "string"},
            "externalName": {"type": "string"},
            "extension": {"type": "object"},
        },
        "required": ["groupname", "description", "externalName", "extension"],
    },
    "GroupMember": {
        "type": "object",
        "properties": {"username": {"type": "string"}, "clusterAdmin": {"type": "boolean"}},
    },
    "VirtualCluster": {
        "type": "object",
        "properties": {
            "capacity": {"type": "number"},
            "usedCapacity": {"type": "number"},
            "maxCapacity": {"type": "number"},
            "dedicated": {"type": "boolean"},
            "resourcesUsed": RESOURCES,
            "resourcesGuaranteed": RESOURCES,
            "resourcesTotal": RESOURCES,
        },
        "required": ["capacity", "usedCapacity", "maxCapacity", "resourcesUsed", "resourcesGuaranteed",
                     "resourcesTotal"],
    },
    "StorageSummary": {
        "type": "object",
        "properties": {
            "storages": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "share": {"type": "boolean"},
                        "volumeName": {"type": "string"},
                        "default": {"type": "boolean"},
                    },
                    "required": ["name", "share", "volumeName", "default"],
                },
            }
        },
        "required": ["storages"],
    },
    "StorageDetail": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "share": {"type": "boolean"},
            "volumeName": {"type": "string"},
            "type": {"enum": ["nfs", "samba", "azureFile", "azureBlob", "other", "unknown"]},
            "data": {
                "anyOf": [
                    {"type": "object", "properties": {"server": {"type": "string"}, "path": {"type": "string"}},
                     "required": ["server", "path"]},
                    {"type": "object", "properties": {"address": {"type": "string"}}, "required": ["address"]},
                    {"type": "object", "properties": {"shareName": {"type": "string"}}, "required": ["shareName"]},
                    {"type": "object", "properties": {"containerName": {"type": "string"}},
                     "required": ["containerName"]},
                    {"type": "object", "properties": {}},
                ]
            },
            "readOnly": {"type": "boolean"},
            "mountOptions": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["name", "share", "volumeName", "type", "data"],
    },
}


def assert_openpai(name, body, many=False):
    schema = {"type": "array", "items": SCHEMAS[name]} if many else SCHEMAS[name]
    jsonschema.validate(body, schema)


def assert_error(response, status, code):
    assert response.status_code == status, (response.status_code, response.content)
    body = response.json()
    assert_openpai("Response", body)
    assert body["code"] == code, body
    return body["message"]
