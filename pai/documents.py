"""Reading the documents users send (job YAML, JSON bodies) within bounds, before anything expands.

A YAML alias is a pointer: nine aliases nested nine deep describe 9⁹ nodes in a few
hundred bytes, and whatever walks the parsed document (`json.dumps`, the schema check,
the database) expands them. So the YAML is composed first — libyaml shares an aliased
node instead of copying it — and the node graph is measured as if expanded, without
expanding it: documents with too many aliases, too large once expanded, nested too
deeply, or containing themselves (a recursive alias) are refused before any Python
object is built. JSON has no aliases; its nesting is bounded.
"""

import json

import yaml

# libyaml's loader when PyYAML was built with it.
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Deeper than any job file or API body has a reason to be (a job document is ~6 levels).
MAX_DEPTH = 64
# Hand-written job files may share a block through an anchor; OpenPAI's own examples and
# its web portal's exports use none.
MAX_ALIASES = 100
# The expanded document's size: the characters of its scalars plus one per node.
MAX_EXPANDED_SIZE = 1024 * 1024


class DocumentError(ValueError):
    """A document refused before it was built; the message says which bound it broke."""


def load_yaml(text):
    """The YAML document in `text`, or DocumentError if it breaks a bound or is not YAML
    (yaml.YAMLError, raised as it is, so that callers can show its line and column)."""
    loader = YAML_LOADER(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise DocumentError(f"is nested more than {MAX_DEPTH} levels deep") from None
        if node is None:
            return None
        _check_graph(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _refuse_constant(name):
    raise ValueError(f"{name} is not a JSON number")


def load_json(text):
    """The JSON value in `text` (str or bytes), or DocumentError when nested too deeply;
    ValueError when it is not JSON (NaN and Infinity are not)."""
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise DocumentError(f"is nested more than {MAX_DEPTH} levels deep") from None
    check_depth(value)
    return value


def check_depth(value, limit=MAX_DEPTH):
    """DocumentError when lists and maps in `value` nest more than `limit` deep (no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            raise DocumentError(f"is nested more than {limit} levels deep")
        stack.extend((child, depth + 1) for child in children)


def _children(node):
    if isinstance(node, yaml.SequenceNode):
        return node.value
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return ()


def _check_graph(root):
    """Measure the node graph as if its aliases were expanded, each node once (iteratively)."""
    size, depth = {}, {}  # node id → expanded size and depth, once the node is done
    on_path = set()  # ids of the nodes being walked: reaching one again is a recursive alias
    aliases = 0
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            children = _children(node)
            size[key] = 1 + len(node.value if isinstance(node, yaml.ScalarNode) else "") + sum(
                size[id(c)] for c in children
            )
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            on_path.discard(key)
            if size[key] > MAX_EXPANDED_SIZE:
                raise DocumentError(
                    f"is larger than {MAX_EXPANDED_SIZE} characters once its aliases are expanded"
                )
            if depth[key] > MAX_DEPTH:
                raise DocumentError(f"is nested more than {MAX_DEPTH} levels deep")
            continue
        if key in size:
            aliases += 1  # a second reference to a finished node
            if aliases > MAX_ALIASES:
                raise DocumentError(f"uses more than {MAX_ALIASES} aliases (*name)")
            continue
        if key in on_path:
            mark = node.start_mark
            raise DocumentError(
                f"the node anchored at line {mark.line + 1}, column {mark.column + 1} contains an alias to "
                "itself (a recursive alias)"
            )
        on_path.add(key)
        stack.append((node, True))
        # Pushed in reverse: children are walked in document order.
        stack.extend((child, False) for child in reversed(_children(node)))
