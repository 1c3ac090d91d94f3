"""The API server's validation of the fields pai sets, with its field paths and messages."""

import base64
import binascii
import json
import re

from .quantity import QuantityError, parse_quantity

DNS1123_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
ENV_NAME_RE = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")

DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
QUANTITY_MSG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
STANDARD_RESOURCES = {"cpu", "memory", "ephemeral-storage", "pods"}


class Undecodable(ValueError):
    """A value the server cannot even decode (an unparseable quantity, bad base64): 400."""


class Errors:
    def __init__(self):
        self.causes = []

    def _quote(self, value):
        return json.dumps(value) if isinstance(value, str) else json.dumps(value, default=str)

    def required(self, field):
        self.causes.append({"reason": "FieldValueRequired", "message": "Required value", "field": field})

    def invalid(self, field, value, detail):
        self.causes.append(
            {"reason": "FieldValueInvalid", "message": f"Invalid value: {self._quote(value)}: {detail}", "field": field}
        )

    def duplicate(self, field, value):
        self.causes.append(
            {"reason": "FieldValueDuplicate", "message": f"Duplicate value: {self._quote(value)}", "field": field}
        )

    def not_supported(self, field, value, allowed):
        choices = ", ".join(f'"{a}"' for a in allowed)
        self.causes.append(
            {
                "reason": "FieldValueNotSupported",
                "message": f"Unsupported value: {self._quote(value)}: supported values: {choices}",
                "field": field,
            }
        )

    def forbidden(self, field, detail):
        self.causes.append({"reason": "FieldValueForbidden", "message": f"Forbidden: {detail}", "field": field})

    def too_long(self, field, limit):
        self.causes.append(
            {"reason": "FieldValueTooLong", "message": f"Too long: may not be more than {limit} bytes", "field": field}
        )


def _name(errors, meta, field, label_only, generated):
    name = meta.get("name")
    if not name:
        if not generated:
            errors.causes.append(
                {"reason": "FieldValueRequired", "message": "Required value: name or generateName is required", "field": "metadata.name"}
            )
        return
    regex, msg, limit = (
        (DNS1123_LABEL_RE, DNS1123_LABEL_MSG, 63) if label_only else (DNS1123_SUBDOMAIN_RE, DNS1123_SUBDOMAIN_MSG, 253)
    )
    if not isinstance(name, str) or len(name) > limit or not regex.match(name):
        errors.invalid(field, name, msg if isinstance(name, str) and len(name) <= limit else f"must be no more than {limit} characters")


def _qualified_key(errors, field, key):
    if not isinstance(key, str) or not key:
        errors.invalid(field, key, "name part must be non-empty")
        return
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS1123_SUBDOMAIN_RE.match(prefix)):
        errors.invalid(field, key, "prefix part " + DNS1123_SUBDOMAIN_MSG)
    if len(name) > 63 or not LABEL_NAME_RE.match(name):
        errors.invalid(
            field,
            key,
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
            "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        )


def validate_metadata(errors, meta, *, label_only=False, namespaced=True):
    if not isinstance(meta, dict):
        errors.required("metadata")
        return
    _name(errors, meta, "metadata.name", label_only, bool(meta.get("generateName")))
    labels = meta.get("labels") or {}
    if not isinstance(labels, dict):
        errors.invalid("metadata.labels", labels, "must be a map of strings")
        labels = {}
    for key, value in labels.items():
        _qualified_key(errors, "metadata.labels", key)
        if not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE_RE.match(value):
            errors.invalid(
                "metadata.labels",
                value,
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
                "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            )
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, dict):
        errors.invalid("metadata.annotations", annotations, "must be a map of strings")
        annotations = {}
    _owner_references(errors, meta.get("ownerReferences"))
    total = 0
    for key, value in annotations.items():
        _qualified_key(errors, "metadata.annotations", key)
        if not isinstance(value, str):
            errors.invalid(f"metadata.annotations[{key}]", value, "must be a string")
            continue
        total += len(key) + len(value)
    if total > 256 * 1024:
        errors.too_long("metadata.annotations", 256 * 1024)


def _owner_references(errors, references):
    if references is None:
        return
    if not isinstance(references, list) or not all(isinstance(ref, dict) for ref in references):
        raise Undecodable("metadata.ownerReferences must be a list of objects")
    field = "metadata.ownerReferences"
    for ref in references:
        api_version = ref.get("apiVersion") or ""
        if not api_version.rpartition("/")[2]:
            errors.invalid(f"{field}.apiVersion", api_version, "version must not be empty")
        for key, what in (("kind", "kind"), ("name", "name"), ("uid", "uid")):
            if not ref.get(key):
                errors.invalid(f"{field}.{key}", ref.get(key) or "", f"{what} must not be empty")
    if sum(1 for ref in references if ref.get("controller")) > 1:
        errors.invalid(field, references, "Only one reference can have Controller set to true")


def _quantity(field, value):
    try:
        return parse_quantity(value)
    except QuantityError as exc:
        raise Undecodable(f"{field}: {QUANTITY_MSG}") from exc


def _resources(errors, base, resources):
    resources = resources or {}
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    parsed = {"limits": {}, "requests": {}}
    for kind, values in (("limits", limits), ("requests", requests)):
        for name, raw in values.items():
            field = f"{base}.resources.{kind}[{name}]"
            value = _quantity(field, raw)
            parsed[kind][name] = value
            if value < 0:
                errors.invalid(field, raw, "must be greater than or equal to 0")
            if name not in STANDARD_RESOURCES and "/" in name and value != value.to_integral_value():
                errors.invalid(field, raw, "must be an integer")
    for name, request in parsed["requests"].items():
        field = f"{base}.resources.requests"
        if name in parsed["limits"]:
            limit = parsed["limits"][name]
            if name not in STANDARD_RESOURCES and "/" in name:
                if request != limit:
                    errors.invalid(field, requests[name], f"must be equal to {name} limit of {limits[name]}")
            elif request > limit:
                errors.invalid(field, requests[name], f"must be less than or equal to {name} limit of {limits[name]}")
        elif name not in STANDARD_RESOURCES and "/" in name:
            errors.forbidden(f"{base}.resources.limits", "Limit must be set for non overcommitable resources")


def _container(errors, base, container, names, volume_names):
    name = container.get("name")
    if not name:
        errors.required(f"{base}.name")
    elif not isinstance(name, str) or len(name) > 63 or not DNS1123_LABEL_RE.match(name):
        errors.invalid(f"{base}.name", name, DNS1123_LABEL_MSG)
    elif name in names:
        errors.duplicate(f"{base}.name", name)
    else:
        names.add(name)
    if not container.get("image"):
        errors.required(f"{base}.image")
    for i, port in enumerate(container.get("ports") or []):
        number = port.get("containerPort")
        if not isinstance(number, int) or isinstance(number, bool) or not 1 <= number <= 65535:
            errors.invalid(f"{base}.ports[{i}].containerPort", number, "must be between 1 and 65535, inclusive")
        protocol = port.get("protocol", "TCP")
        if protocol not in {"TCP", "UDP", "SCTP"}:
            errors.not_supported(f"{base}.ports[{i}].protocol", protocol, ["SCTP", "TCP", "UDP"])
    for i, env in enumerate(container.get("env") or []):
        env_name = env.get("name")
        if not env_name:
            errors.required(f"{base}.env[{i}].name")
        elif not ENV_NAME_RE.match(env_name):
            errors.invalid(
                f"{base}.env[{i}].name",
                env_name,
                "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', "
                "or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or "
                "'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')",
            )
    mount_paths = set()
    for i, mount in enumerate(container.get("volumeMounts") or []):
        if mount.get("name") not in volume_names:
            errors.not_supported(f"{base}.volumeMounts[{i}].name", mount.get("name"), sorted(volume_names))
        path = mount.get("mountPath")
        if not path:
            errors.required(f"{base}.volumeMounts[{i}].mountPath")
        elif path in mount_paths:
            errors.invalid(f"{base}.volumeMounts[{i}].mountPath", path, "must be unique")
        mount_paths.add(path)
    _resources(errors, base, container.get("resources"))


def validate_pod(pod):
    """Causes for a pod the API server would refuse with 422; raises Undecodable for a 400."""
    errors = Errors()
    validate_metadata(errors, pod.get("metadata"))
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        errors.required("spec")
        return errors.causes
    volume_names = set()
    for i, volume in enumerate(spec.get("volumes") or []):
        name = volume.get("name")
        if not name:
            errors.required(f"spec.volumes[{i}].name")
        elif not DNS1123_LABEL_RE.match(name) or len(name) > 63:
            errors.invalid(f"spec.volumes[{i}].name", name, DNS1123_LABEL_MSG)
        elif name in volume_names:
            errors.duplicate(f"spec.volumes[{i}].name", name)
        volume_names.add(name)
        claim = volume.get("persistentVolumeClaim")
        if claim is not None and not claim.get("claimName"):
            errors.required(f"spec.volumes[{i}].persistentVolumeClaim.claimName")
        secret = volume.get("secret")
        if secret is not None:
            if not secret.get("secretName"):
                errors.required(f"spec.volumes[{i}].secret.secretName")
            mode = secret.get("defaultMode")
            if mode is not None and (not isinstance(mode, int) or isinstance(mode, bool) or not 0 <= mode <= 0o777):
                errors.invalid(f"spec.volumes[{i}].secret.defaultMode", mode,
                               "must be a number between 0 and 0777 (octal), both inclusive")
    containers = spec.get("containers")
    if not containers:
        errors.required("spec.containers")
    names = set()
    for i, container in enumerate(containers or []):
        _container(errors, f"spec.containers[{i}]", container, names, volume_names)
    for i, container in enumerate(spec.get("initContainers") or []):
        _container(errors, f"spec.initContainers[{i}]", container, names, volume_names)
    restart = spec.get("restartPolicy", "Always")
    if restart not in {"Always", "OnFailure", "Never"}:
        errors.not_supported("spec.restartPolicy", restart, ["Always", "OnFailure", "Never"])
    node_name = spec.get("nodeName")
    if node_name and not DNS1123_SUBDOMAIN_RE.match(node_name):
        errors.invalid("spec.nodeName", node_name, DNS1123_SUBDOMAIN_MSG)
    grace = spec.get("terminationGracePeriodSeconds")
    if grace is not None and (not isinstance(grace, int) or grace < 0):
        errors.invalid("spec.terminationGracePeriodSeconds", grace, "must be greater than or equal to 0")
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and (not isinstance(deadline, int) or deadline < 1):
        errors.invalid("spec.activeDeadlineSeconds", deadline, "must be between 1 and 2147483647, inclusive")
    for i, secret in enumerate(spec.get("imagePullSecrets") or []):
        if not secret.get("name"):
            errors.required(f"spec.imagePullSecrets[{i}].name")
    return errors.causes


def validate_named(obj, *, label_only=False):
    errors = Errors()
    validate_metadata(errors, obj.get("metadata"), label_only=label_only)
    return errors.causes


def validate_resource_quota(quota):
    errors = Errors()
    validate_metadata(errors, quota.get("metadata"))
    for name, raw in ((quota.get("spec") or {}).get("hard") or {}).items():
        value = _quantity(f"spec.hard[{name}]", raw)
        if value < 0:
            errors.invalid(f"spec.hard[{name}]", raw, "must be greater than or equal to 0")
    return errors.causes


def validate_priority_class(pc):
    errors = Errors()
    validate_metadata(errors, pc.get("metadata"))
    name = (pc.get("metadata") or {}).get("name") or ""
    if name.startswith("system-"):
        errors.forbidden("metadata.name", "priority class names with 'system-' prefix are reserved")
    value = pc.get("value")
    if not isinstance(value, int) or isinstance(value, bool):
        errors.required("value")
    elif value > 1_000_000_000:
        errors.forbidden("value", "maximum allowed value of a user defined priority is 1000000000")
    policy = pc.get("preemptionPolicy", "PreemptLowerPriority")
    if policy not in {"PreemptLowerPriority", "Never"}:
        errors.not_supported("preemptionPolicy", policy, ["Never", "PreemptLowerPriority"])
    return errors.causes


def validate_pvc(pvc):
    errors = Errors()
    validate_metadata(errors, pvc.get("metadata"))
    spec = pvc.get("spec") or {}
    if not spec.get("accessModes"):
        errors.required("spec.accessModes")
    storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    if storage is None:
        errors.required("spec.resources[storage]")
    else:
        _quantity("spec.resources.requests[storage]", storage)
    return errors.causes


def validate_event(event):
    errors = Errors()
    validate_metadata(errors, event.get("metadata"))
    involved = event.get("involvedObject") or {}
    namespace = (event.get("metadata") or {}).get("namespace")
    if involved.get("namespace") and namespace and involved["namespace"] != namespace:
        errors.invalid("involvedObject.namespace", involved["namespace"], "does not match event.namespace")
    return errors.causes


SECRET_KEY_RE = re.compile(r"^[-._a-zA-Z0-9]+$")


def validate_secret(secret):
    """Keys must be valid config keys; values must decode (else the server answers 400)."""
    errors = Errors()
    validate_metadata(errors, secret.get("metadata"))
    for key, value in (secret.get("data") or {}).items():
        if not SECRET_KEY_RE.fullmatch(key) or len(key) > 253:
            errors.invalid(f"data[{key}]", key, "a valid config key must consist of alphanumeric characters, '-', '_' or '.'")
        if key == ".":
            errors.invalid(f"data[{key}]", key, "must not be '.'")
        elif key == "..":
            errors.invalid(f"data[{key}]", key, "must not be '..'")
        elif key.startswith(".."):
            errors.invalid(f"data[{key}]", key, "must not start with '..'")
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, TypeError) as exc:
            raise Undecodable(f"illegal base64 data in data[{key}]") from exc
    if secret.get("type") == "kubernetes.io/dockerconfigjson" and ".dockerconfigjson" not in (secret.get("data") or {}):
        errors.required("data[.dockerconfigjson]")
    return errors.causes
