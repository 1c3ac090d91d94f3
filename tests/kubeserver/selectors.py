"""Label and field selectors with the API server's syntax and errors."""

import re


class SelectorError(ValueError):
    pass


_TOKEN_RE = re.compile(r"\s*(!=|==|=|\(|\)|,|!|[^\s!=(),]+)")


def _tokens(text):
    pos, out = 0, []
    text = text.strip()
    while pos < len(text):
        match = _TOKEN_RE.match(text, pos)
        if not match:
            raise SelectorError(f"unable to parse requirement: {text!r}")
        out.append(match.group(1))
        pos = match.end()
    return out


def parse_label_selector(text):
    """A list of (key, operator, values) requirements; operators: in, notin, =, !=, exists, !."""
    if not text or not text.strip():
        return []
    tokens = _tokens(text)
    requirements = []
    i = 0

    def expect_value(idx):
        if idx >= len(tokens) or tokens[idx] in {",", "(", ")", "=", "==", "!=", "!"}:
            raise SelectorError(f"unable to parse requirement: found {tokens[idx] if idx < len(tokens) else 'end of string'!r}, expected: identifier")
        return tokens[idx]

    while i < len(tokens):
        if tokens[i] == "!":
            key = expect_value(i + 1)
            requirements.append((key, "!", ()))
            i += 2
        else:
            key = expect_value(i)
            i += 1
            if i >= len(tokens) or tokens[i] == ",":
                requirements.append((key, "exists", ()))
            elif tokens[i] in {"=", "=="}:
                if i + 1 < len(tokens) and tokens[i + 1] != ",":
                    requirements.append((key, "=", (tokens[i + 1],)))
                    i += 2
                else:
                    requirements.append((key, "=", ("",)))
                    i += 1
            elif tokens[i] == "!=":
                if i + 1 < len(tokens) and tokens[i + 1] != ",":
                    requirements.append((key, "!=", (tokens[i + 1],)))
                    i += 2
                else:
                    requirements.append((key, "!=", ("",)))
                    i += 1
            elif tokens[i] in {"in", "notin"}:
                op = tokens[i]
                if i + 1 >= len(tokens) or tokens[i + 1] != "(":
                    raise SelectorError(f"unable to parse requirement: found {tokens[i + 1] if i + 1 < len(tokens) else 'end of string'!r}, expected: '('")
                i += 2
                values = []
                while True:
                    if i >= len(tokens):
                        raise SelectorError("unable to parse requirement: found end of string, expected: ')'")
                    if tokens[i] == ")":
                        i += 1
                        break
                    if tokens[i] == ",":
                        i += 1
                        continue
                    values.append(tokens[i])
                    i += 1
                requirements.append((key, op, tuple(values)))
            else:
                raise SelectorError(f"unable to parse requirement: found {tokens[i]!r}, expected: in, notin, =, ==, !=, gt, lt")
        if i < len(tokens):
            if tokens[i] != ",":
                raise SelectorError(f"unable to parse requirement: found {tokens[i]!r}, expected: ','")
            i += 1
            if i >= len(tokens):
                raise SelectorError("unable to parse requirement: found end of string, expected: identifier")
    return requirements


def labels_match(requirements, labels):
    labels = labels or {}
    for key, op, values in requirements:
        present = key in labels
        value = labels.get(key)
        if op == "exists" and not present:
            return False
        if op == "!" and present:
            return False
        if op == "=" and value != values[0]:
            return False
        if op == "!=" and present and value == values[0]:
            return False
        if op == "in" and (not present or value not in values):
            return False
        if op == "notin" and present and value in values:
            return False
    return True


def parse_field_selector(text, supported):
    """A list of (field, operator, value); only fields in `supported` are accepted, like the server."""
    if not text or not text.strip():
        return []
    requirements = []
    for part in text.split(","):
        part = part.strip()
        for op in ("!=", "==", "="):
            if op in part:
                field, value = part.split(op, 1)
                break
        else:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        field = field.strip()
        if field not in supported:
            raise SelectorError(f'field label not supported: {field}')
        requirements.append((field, "!=" if op == "!=" else "=", value.strip()))
    return requirements


def field_value(obj, path):
    node = obj
    for part in path.split("."):
        if not isinstance(node, dict):
            return ""
        node = node.get(part)
    if node is None:
        return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


def fields_match(requirements, obj):
    for field, op, value in requirements:
        actual = field_value(obj, field)
        if op == "=" and actual != value:
            return False
        if op == "!=" and actual == value:
            return False
    return True
