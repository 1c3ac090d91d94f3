"""How a cluster's connection string becomes an API client.

Formats (the Cluster row's ``connection``):

- ``in-cluster``: the pod's service account (token and CA mounted by Kubernetes);
- ``kubeconfig:<path>`` or ``kubeconfig:<path>#<context>``: a kubeconfig file, with its
  current context or the named one.
"""

from __future__ import annotations

import os
import socket

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from .client import KubeApi

IN_CLUSTER = "in-cluster"
KUBECONFIG_PREFIX = "kubeconfig:"


class ConnectionFormatError(ValueError):
    pass


def parse(connection: str) -> tuple[str, str | None, str | None]:
    """``("in-cluster", None, None)`` or ``("kubeconfig", path, context or None)``."""
    text = (connection or "").strip()
    if text == IN_CLUSTER:
        return IN_CLUSTER, None, None
    if text.startswith(KUBECONFIG_PREFIX):
        path, _, context = text[len(KUBECONFIG_PREFIX):].partition("#")
        if not path:
            raise ConnectionFormatError("kubeconfig: needs a file path, e.g. kubeconfig:/etc/pai/kubeconfig#prod")
        return "kubeconfig", path, context or None
    raise ConnectionFormatError(
        f"unknown connection {connection!r}: use 'in-cluster' or 'kubeconfig:<path>[#context]'"
    )


def user_agent() -> str:
    """Names this process in the API server's audit log: which worker made a call."""
    return f"pai-worker ({socket.gethostname()}; pid {os.getpid()})"


def connect(connection: str, pool_size: int = 0, **options) -> KubeApi:
    """One API client for one cluster (``options``: :class:`KubeApi`'s). urllib3's own
    retries are off: :class:`KubeApi` retries with its own backoff and sees every 429 and 5xx.
    ``pool_size``: connections kept open to the API server (at least the client's default),
    enough for the watches and the requests the caller sends at once."""
    kind, path, context = parse(connection)
    configuration = k8s.Configuration()
    if kind == IN_CLUSTER:
        k8s_config.load_incluster_config(client_configuration=configuration)
    else:
        k8s_config.load_kube_config(config_file=path, context=context, client_configuration=configuration)
    configuration.retries = False
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize, pool_size)
    api_client = k8s.ApiClient(configuration)
    api_client.user_agent = user_agent()
    return KubeApi(api_client, **options)
