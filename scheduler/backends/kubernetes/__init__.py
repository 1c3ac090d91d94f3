"""The Kubernetes backend (see :mod:`.backend`) and how to connect to a cluster (:mod:`.config`)."""

from .backend import KubernetesBackend
from .client import API_CALLS, Backoff, Circuit, KubeApi, TokenBucket, Unavailable
from .config import connect
from .manifests import LabelKeys, PodOptions

__all__ = [
    "API_CALLS", "Backoff", "Circuit", "KubeApi", "KubernetesBackend", "LabelKeys", "PodOptions", "TokenBucket",
    "Unavailable", "connect",
]
