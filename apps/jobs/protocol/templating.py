"""OpenPAI's `<% $... %>` placeholders.

Commands may use `$parameters.<name>` and the fields of the task role's data, output and
script prerequisites (`$data.uri[0]`, `$script.uri`, `$output.uri`); image `auth` may
use `$secrets.<name>`. A placeholder that does not resolve stays as written, as in
OpenPAI.
"""

import json
import re

PLACEHOLDER = re.compile(r"<%\s*\$(\w+)\.([\w-]+)(?:\[(\d+)\])?\s*%>")


def as_text(value):
    """A document value as placeholders and secret files show it: strings as they are,
    anything else as JSON (`8080`, `true`, `{"a":1}`)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)) or value is None:
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"))


def render(text, scopes):
    """`text` with each placeholder whose scope and key exist in `scopes` replaced."""

    def substitute(match):
        scope, key, index = match.group(1), match.group(2), match.group(3)
        values = scopes.get(scope)
        if not isinstance(values, dict) or key not in values:
            return match.group(0)
        value = values[key]
        if index is not None:
            if not isinstance(value, list) or int(index) >= len(value):
                return match.group(0)
            value = value[int(index)]
        elif isinstance(value, list) and scope != "parameters":
            # `$data.uri` on a list of URIs means all of them, comma-separated.
            value = ",".join(as_text(v) for v in value)
        return as_text(value)

    return PLACEHOLDER.sub(substitute, text)


def unresolved(text, scopes):
    """The placeholders in `text` that `render` would leave as written."""
    return [m.group(0) for m in PLACEHOLDER.finditer(text) if render(m.group(0), scopes) == m.group(0)]
