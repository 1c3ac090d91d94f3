"""The three PATCH flavours the API server accepts for built-in types.

Strategic merge knows the merge keys of the list fields pai touches (containers, env,
volumes, conditions, container statuses, ...); other lists are replaced, as they are on a
real server for lists without a patch strategy.
"""

import copy


class PatchError(ValueError):
    """The patch itself is malformed (the server answers 400 or 422)."""


class PatchTestFailed(PatchError):
    pass


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON pointer must start with '/': {path!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _walk(doc, parts, path):
    node = doc
    for part in parts:
        if isinstance(node, dict):
            if part not in node:
                raise PatchError(f"doc is missing path: {path!r}")
            node = node[part]
        elif isinstance(node, list):
            try:
                node = node[int(part)]
            except (ValueError, IndexError) as exc:
                raise PatchError(f"doc is missing path: {path!r}") from exc
        else:
            raise PatchError(f"doc is missing path: {path!r}")
    return node


def _get(doc, path):
    parts = _pointer(path)
    return _walk(doc, parts, path)


def _remove(doc, path):
    parts = _pointer(path)
    if not parts:
        raise PatchError("cannot remove the document root")
    parent = _walk(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"unable to remove nonexistent key: {last}: missing value")
        return parent.pop(last)
    if isinstance(parent, list):
        try:
            return parent.pop(int(last))
        except (ValueError, IndexError) as exc:
            raise PatchError(f"unable to remove index {last}: out of bounds") from exc
    raise PatchError(f"doc is missing path: {path!r}")


def _add(doc, path, value, replace=False):
    parts = _pointer(path)
    if not parts:
        return value
    parent = _walk(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise PatchError(f"replace operation does not apply: doc is missing key: {path}: missing value")
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(value)
        else:
            try:
                index = int(last)
            except ValueError as exc:
                raise PatchError(f"invalid array index {last!r}") from exc
            if replace:
                if not 0 <= index < len(parent):
                    raise PatchError(f"replace operation does not apply: index {index} out of bounds")
                parent[index] = value
            else:
                if not 0 <= index <= len(parent):
                    raise PatchError(f"add operation does not apply: index {index} out of bounds")
                parent.insert(index, value)
    else:
        raise PatchError(f"doc is missing path: {path!r}")
    return doc


def json_patch(target, operations):
    """RFC 6902 JSON patch: add, remove, replace, move, copy, test."""
    if not isinstance(operations, list):
        raise PatchError("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid JSON patch operation: {op!r}")
        kind, path = op["op"], op["path"]
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            doc = _add(doc, path, copy.deepcopy(op.get("value")), replace=True)
        elif kind == "move":
            value = _remove(doc, op.get("from", ""))
            doc = _add(doc, path, value)
        elif kind == "copy":
            doc = _add(doc, path, copy.deepcopy(_get(doc, op.get("from", ""))))
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise PatchTestFailed(f"testing value {path} failed: test failed")
        else:
            raise PatchError(f"Unexpected kind: {kind}")
    return doc


# Merge keys of the list fields, by field name (Kubernetes' patchMergeKey tags).
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "conditions": "type",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
    "ephemeralContainerStatuses": "name",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "addresses": "type",
    "taints": "key",
    "podIPs": "ip",
    "hostIPs": "ip",
    "hostAliases": "ip",
}
# Primitive lists that strategic merge unions instead of replacing.
MERGED_PRIMITIVE_LISTS = {"finalizers"}


def strategic_merge_patch(target, patch):
    if not isinstance(patch, dict):
        raise PatchError("strategic merge patch must be a JSON object")
    return _smp_map(copy.deepcopy(target) if isinstance(target, dict) else {}, patch)


def _smp_map(original, patch):
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    if directive is not None:
        raise PatchError(f"Unknown patch type: {directive}")
    result = original
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key == "$retainKeys":
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [item for item in result.get(field) or [] if item not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = _smp_map(result.get(key) if isinstance(result.get(key), dict) else {}, value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list) and key in MERGE_KEYS:
            result[key] = _smp_list(result.get(key) or [], value, MERGE_KEYS[key])
        elif isinstance(value, list) and key in MERGED_PRIMITIVE_LISTS:
            merged = list(result.get(key) or [])
            merged += [item for item in value if item not in merged]
            result[key] = merged
        else:
            result[key] = copy.deepcopy(value)
    return result


def _smp_list(original, patch, merge_key):
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(item) for item in patch if not (isinstance(item, dict) and "$patch" in item)]
    result = [copy.deepcopy(item) for item in original]
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise PatchError(f"map: {item!r} does not contain declared merge key: {merge_key}")
        index = next((i for i, existing in enumerate(result) if existing.get(merge_key) == item[merge_key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                result.pop(index)
            continue
        if index is None:
            result.append({k: copy.deepcopy(v) for k, v in item.items() if k != "$patch"})
        else:
            result[index] = _smp_map(result[index], item)
    return result
