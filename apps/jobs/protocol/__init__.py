"""Job protocol v2: OpenPAI's job document, parsed, checked, normalised and masked.

`parse_job(body)` is the entry point: it takes the request body (YAML text or a JSON
object) and returns a `ParsedJob` or raises `ProtocolError` listing every broken rule
as `path: rule`. Checks that need the database (the VC, its SKUs, storages) are made
by the caller with `plan_leaf_cells` and the storage grants.
"""

import copy
from dataclasses import dataclass, field

import yaml

from scheduler.backends import MAX_SECRETS_BYTES

from ..choices import DEFAULT_PRIORITY_CLASS, PRIORITY_OF_CLASS
from .errors import ProtocolError
from .limits import check_limits
from .references import check_references, prerequisites_by_type
from .resources import Sku, TaskRolePlan, leaf_cells_for, plan_leaf_cells
from .structure import YAML_DUMPER, check_structure, load
from .templating import PLACEHOLDER, as_text, render, unresolved

__all__ = [
    "ParsedJob", "ProtocolError", "Sku", "TaskRolePlan", "leaf_cells_for", "parse_job", "plan_leaf_cells",
    "MASK", "PRIORITY_CLASSES",
]

MASK = "******"
PRIORITY_CLASSES = {str(name): priority for name, priority in PRIORITY_OF_CLASS.items()}

_KNOWN_EXTRAS = {"gangAllocation", "submitFrom", "hivedScheduler", "storages",
                 "com.microsoft.pai.runtimeplugin", "jobStatusChangeNotification"}
_KNOWN_PREREQUISITE_FIELDS = {"name", "type", "uri", "auth", "version", "contributor", "description",
                              "protocolVersion"}
_KNOWN_CONTAINER_OPTIONS = {"shmMB"}
_KNOWN_DEFAULTS = {"virtualCluster", "deployment"}
_KNOWN_DEPLOYMENT_FIELDS = {"name", "taskRoles", "protocolVersion"}
_KNOWN_HIVED = {"jobPriorityClass", "taskRoles", "lazyPreemptionEnable"}
_KNOWN_HIVED_TASK_ROLE = {"skuType", "skuNumber", "skuNum", "pinnedCellId", "affinityGroupName"}


@dataclass
class ParsedJob:
    name: str
    spec: dict  # normalised, secrets masked: what is stored and shown
    protocol_text: str  # `spec` as YAML
    virtual_cluster: str | None
    priority_class: str
    priority: int
    gang_allocation: bool
    job_retry_count: int
    commands: dict  # task role → rendered command lines, deployment included
    secrets: dict  # the document's secrets map, as submitted
    image_auth: dict  # dockerimage prerequisite name → auth with secrets substituted
    storages: list  # [{name, mountPath}] as asked; empty means the user's defaults
    warnings: list = field(default_factory=list)

    def task_roles(self):
        return self.spec["taskRoles"]


def parse_job(body):
    document = load(body)
    check_structure(document)
    check_references(document)
    check_limits(document)
    document = _with_defaults(document)
    warnings = _warnings(document)
    secrets = dict(document.get("secrets") or {})
    _check_secrets_size(secrets)
    image_auth, auth_warnings = _image_auth(document, secrets)
    commands, command_warnings = _render_commands(document)
    spec = mask(document)
    extras = document.get("extras") or {}
    hived = extras.get("hivedScheduler") or {}
    priority_class = hived.get("jobPriorityClass", str(DEFAULT_PRIORITY_CLASS))
    return ParsedJob(
        name=document["name"],
        spec=spec,
        protocol_text=yaml.dump(spec, Dumper=YAML_DUMPER, sort_keys=False, allow_unicode=True),
        virtual_cluster=(document.get("defaults") or {}).get("virtualCluster"),
        priority_class=priority_class,
        priority=PRIORITY_CLASSES[priority_class],
        gang_allocation=extras.get("gangAllocation", True),
        job_retry_count=document.get("jobRetryCount", 0),
        commands=commands,
        secrets=secrets,
        image_auth=image_auth,
        storages=extras.get("storages") or [],
        warnings=warnings + auth_warnings + command_warnings,
    )


def _with_defaults(document):
    document = copy.deepcopy(document)
    document["protocolVersion"] = 2
    document.setdefault("jobRetryCount", 0)
    for spec in document["taskRoles"].values():
        spec.setdefault("instances", 1)
        spec.setdefault("taskRetryCount", 0)
        completion = spec.setdefault("completion", {})
        if completion.get("minFailedInstances") is None:
            completion["minFailedInstances"] = 1
        if completion.get("minSucceededInstances") is None:
            completion["minSucceededInstances"] = -1
        spec.setdefault("extraContainerOptions", {}).setdefault("shmMB", 512)
        spec["resourcePerInstance"].setdefault("ports", {})
    extras = document.get("extras")
    if extras is not None:
        for storage in extras.get("storages") or []:
            storage.setdefault("mountPath", f"/mnt/{storage['name']}")
    return document


def mask(document):
    """The document with secret values and literal registry passwords replaced by the mask."""
    masked = copy.deepcopy(document)
    if isinstance(masked.get("secrets"), dict):
        masked["secrets"] = {key: MASK for key in masked["secrets"]}
    for item in masked.get("prerequisites") or []:
        auth = item.get("auth")
        if isinstance(auth, dict) and "password" in auth and not _is_placeholder(auth["password"]):
            auth["password"] = MASK
    return masked


def _check_secrets_size(secrets):
    size = sum(len(as_text(value).encode()) for value in secrets.values())
    if size > MAX_SECRETS_BYTES:
        raise ProtocolError([
            f"secrets: the values must total at most {MAX_SECRETS_BYTES} bytes (1 MiB, what one Kubernetes Secret "
            f"holds), not {size}"
        ])


def _is_placeholder(value):
    """Whether a registry password is only a reference to a secret, which shows nothing: any
    text beside it (`<% $secrets.a %>LIT`), or another kind of placeholder, which the image
    auth does not resolve, is the password itself, or part of it."""
    match = PLACEHOLDER.fullmatch(value.strip()) if isinstance(value, str) else None
    return match is not None and match.group(1) == "secrets"


def _image_auth(document, secrets):
    resolved, warnings = {}, []
    for i, item in enumerate(document.get("prerequisites") or []):
        if item["type"] != "dockerimage" or not item.get("auth"):
            continue
        auth = {}
        for key, value in item["auth"].items():
            auth[key] = render(value, {"secrets": secrets})
            for placeholder in unresolved(value, {"secrets": secrets}):
                warnings.append(f"prerequisites[{i}].auth.{key}: {placeholder} names no secret; kept as written")
        resolved[item["name"]] = auth
    return resolved, warnings


def _render_commands(document):
    prerequisites = prerequisites_by_type(document)
    deployment_name = (document.get("defaults") or {}).get("deployment")
    deployment = next(
        (d for d in document.get("deployments") or [] if d["name"] == deployment_name), {"taskRoles": {}}
    )
    rendered, warnings = {}, []
    for role, spec in document["taskRoles"].items():
        scopes = {"parameters": document.get("parameters") or {}}
        for kind in ("data", "output", "script"):
            if spec.get(kind):
                scopes[kind] = prerequisites[kind][spec[kind]]
        wrap = deployment["taskRoles"].get(role) or {}
        lines = (wrap.get("preCommands") or []) + spec["commands"] + (wrap.get("postCommands") or [])
        rendered[role] = [render(line, scopes) for line in lines]
        for line in lines:
            for placeholder in unresolved(line, scopes):
                if not placeholder.replace(" ", "").startswith("<%$secrets."):
                    warnings.append(f"taskRoles.{role}.commands: {placeholder} does not resolve; kept as written")
    return rendered, list(dict.fromkeys(warnings))


def _warnings(document):
    """Fields pai keeps but does not act on yet."""
    warnings = []
    extras = document.get("extras") or {}
    for key in extras:
        if key not in _KNOWN_EXTRAS:
            warnings.append(f"extras.{key}: kept; pai does not act on it")
    for i, plugin in enumerate(extras.get("com.microsoft.pai.runtimeplugin") or []):
        warnings.append(
            f"extras.com.microsoft.pai.runtimeplugin[{i}]: runtime plugin '{plugin['plugin']}' is kept; "
            "pai does not run runtime plugins yet"
        )
    hived = extras.get("hivedScheduler") or {}
    for key in hived:
        if key not in _KNOWN_HIVED:
            warnings.append(f"extras.hivedScheduler.{key}: kept; pai does not act on it")
    for role, settings in (hived.get("taskRoles") or {}).items():
        if settings.get("affinityGroupName") is not None:
            warnings.append(
                f"extras.hivedScheduler.taskRoles.{role}.affinityGroupName: kept; pai places each job as one "
                "affinity group"
            )
        for key in settings:
            if key not in _KNOWN_HIVED_TASK_ROLE:
                warnings.append(f"extras.hivedScheduler.taskRoles.{role}.{key}: kept; pai does not act on it")
    for key in document.get("defaults") or {}:
        if key not in _KNOWN_DEFAULTS:
            warnings.append(f"defaults.{key}: kept; pai does not act on it")
    for i, deployment in enumerate(document.get("deployments") or []):
        for key in deployment:
            if key not in _KNOWN_DEPLOYMENT_FIELDS:
                warnings.append(f"deployments[{i}].{key}: kept; pai does not act on it")
    for i, item in enumerate(document.get("prerequisites") or []):
        for key in item:
            if key not in _KNOWN_PREREQUISITE_FIELDS:
                warnings.append(f"prerequisites[{i}].{key}: kept; pai does not run prerequisite plugins yet")
    gang = extras.get("gangAllocation", True)
    for role, spec in document["taskRoles"].items():
        if spec.get("prerequisites"):
            warnings.append(f"taskRoles.{role}.prerequisites: kept; pai does not run prerequisite plugins yet")
        if gang and spec.get("taskRetryCount"):
            warnings.append(
                f"taskRoles.{role}.taskRetryCount: kept; with gang allocation (the default) a failed task fails "
                "its attempt and jobRetryCount applies, as in OpenPAI; set extras.gangAllocation: false to retry "
                "tasks on their own"
            )
        for key in spec.get("extraContainerOptions") or {}:
            if key == "infiniband":
                warnings.append(f"taskRoles.{role}.extraContainerOptions.infiniband: kept; pai does not set up "
                                "InfiniBand devices yet")
            elif key not in _KNOWN_CONTAINER_OPTIONS:
                warnings.append(f"taskRoles.{role}.extraContainerOptions.{key}: kept; pai does not act on it")
    return warnings
