"""Rules that relate fields to each other: names, references, completion counts."""

from .errors import ProtocolError, at

REFERENCE_FIELDS = {"dockerImage": "dockerimage", "data": "data", "output": "output", "script": "script"}


def prerequisites_by_type(document):
    """{type: {name: prerequisite}}; assumes `check_references` passed."""
    index = {}
    for item in document.get("prerequisites") or []:
        index.setdefault(item["type"], {})[item["name"]] = item
    return index


def check_references(document):
    errors = []
    seen = {}
    for i, item in enumerate(document.get("prerequisites") or []):
        key = (item["type"], item["name"])
        if key in seen:
            errors.append(
                at(["prerequisites", i, "name"], f"'{item['name']}' is already the name of {item['type']} "
                   f"prerequisite prerequisites[{seen[key]}] (names are unique per type)")
            )
        else:
            seen[key] = i
    prerequisites = prerequisites_by_type(document)
    task_roles = document["taskRoles"]

    for role, spec in task_roles.items():
        for field, kind in REFERENCE_FIELDS.items():
            name = spec.get(field)
            if name is not None and name not in prerequisites.get(kind, {}):
                errors.append(at(["taskRoles", role, field], f"no {kind} prerequisite is named '{name}'"))
        instances = spec.get("instances", 1)
        for field in ("minFailedInstances", "minSucceededInstances"):
            value = (spec.get("completion") or {}).get(field)
            if value is not None and value != -1 and not 1 <= value <= instances:
                errors.append(
                    at(["taskRoles", role, "completion", field],
                       f"must be -1, null, or between 1 and instances ({instances})")
                )

    deployment_names = {}
    for i, deployment in enumerate(document.get("deployments") or []):
        if deployment["name"] in deployment_names:
            errors.append(at(["deployments", i, "name"], f"'{deployment['name']}' is already a deployment's name"))
        deployment_names.setdefault(deployment["name"], i)
        for role in deployment["taskRoles"]:
            if role not in task_roles:
                errors.append(at(["deployments", i, "taskRoles", role], f"no task role is named '{role}'"))
    default_deployment = (document.get("defaults") or {}).get("deployment")
    if default_deployment is not None and default_deployment not in deployment_names:
        errors.append(at(["defaults", "deployment"], f"no deployment is named '{default_deployment}'"))

    hived = (document.get("extras") or {}).get("hivedScheduler") or {}
    for role, settings in (hived.get("taskRoles") or {}).items():
        if role not in task_roles:
            errors.append(at(["extras", "hivedScheduler", "taskRoles", role], f"no task role is named '{role}'"))
        number, num = settings.get("skuNumber"), settings.get("skuNum")
        if number is not None and num is not None and number != num:
            errors.append(at(["extras", "hivedScheduler", "taskRoles", role, "skuNum"],
                             f"is {num} but skuNumber is {number}; give one, or the same count"))

    storage_names = {}
    for i, storage in enumerate((document.get("extras") or {}).get("storages") or []):
        if storage["name"] in storage_names:
            errors.append(at(["extras", "storages", i, "name"], f"'{storage['name']}' is listed twice"))
        storage_names.setdefault(storage["name"], i)

    if errors:
        raise ProtocolError(errors)
