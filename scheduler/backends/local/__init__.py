"""The local backend (see :mod:`.backend`): pods as supervised subprocesses."""

from .backend import LocalBackend, LocalNode
from .sandbox import Isolation

__all__ = ["Isolation", "LocalBackend", "LocalNode"]
