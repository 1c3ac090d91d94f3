"""A Kubernetes API test server for the official client, with hooks for tests."""

from .server import KubeServer

__all__ = ["KubeServer"]
