"""The local backend (see :mod:`.backend`): pods as supervised subprocesses."""

from .backend import LocalBackend, LocalNode

__all__ = ["LocalBackend", "LocalNode"]
