class ProtocolError(Exception):
    """An invalid job document. `errors` are `path: rule` lines, one per broken rule."""

    def __init__(self, errors):
        self.errors = list(errors)
        super().__init__("; ".join(self.errors))


class ProtocolTooLargeError(ProtocolError):
    """A job document longer than the limit, refused before it is parsed."""

    def __init__(self, limit, size):
        self.limit, self.size = limit, size
        super().__init__([f"body: the job document is {size} bytes; the limit is {limit} bytes"])


def join_path(parts):
    """`taskRoles.worker.commands[0]` from ("taskRoles", "worker", "commands", 0)."""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def at(parts, message):
    path = join_path(parts)
    return f"{path}: {message}" if path else message
