"""The cluster backend behind a Cluster row.

Local clusters run pods as processes (:mod:`scheduler.backends.local`), sandboxed as
``PAI_LOCAL_SANDBOX`` says: every local cluster keeps its tenants' uids and the single
tenant of an unsandboxed machine in pai's data directory, which no task sees. Kubernetes
clusters (:mod:`scheduler.backends.kubernetes`) connect as the row's ``connection`` says:

- ``in-cluster``: pai runs in the cluster and uses its pod's service account (the Helm
  chart's ClusterRole grants exactly the calls the backend makes);
- ``kubeconfig:<path>`` or ``kubeconfig:<path>#<context>``: a kubeconfig file readable by
  the worker, with its current context or the named one.

The client's request rate is the Cluster row's ``api_qps`` and ``api_burst`` (admin, API).
Settings: ``PAI_KUBE_RETRY_SECONDS`` is how long one call retries and
``PAI_KUBE_CIRCUIT_SECONDS`` how long a cluster whose API stayed down is paused;
``PAI_KUBE_SKU_LABEL`` and ``PAI_KUBE_TOPOLOGY_LABELS`` name the node labels
that carry a node's SKU and topology; ``PAI_KUBE_ASSIGN_DEVICES`` makes pods get pai's
device indices through ``NVIDIA_VISIBLE_DEVICES`` instead of a device-plugin limit;
``PAI_KUBE_DEDICATED_TAINT`` is the key of the taint of pai's GPU nodes, which pai's pods tolerate.
"""

import math

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from apps.clusters.choices import BackendKind
from apps.clusters.models import CellType, Node, PhysicalCell
from apps.clusters.services import set_node_health
from apps.monitoring import figures
from apps.tenants.models import Tenant
from apps.virtualclusters.models import VirtualClusterCell
from scheduler.backends.kubernetes import Backoff, Circuit, KubernetesBackend, LabelKeys, PodOptions, connect
from scheduler.backends.kubernetes.config import ConnectionFormatError
from scheduler.backends.local import LocalBackend
from scheduler.backends.local.sandbox import Isolation

NAMESPACE_PREFIX = "pai-"


def local_state_dir(cluster):
    return settings.PAI_DATA_DIR / "clusters" / cluster.name


def local_isolation():
    return Isolation(
        mode=settings.PAI_LOCAL_SANDBOX,
        registry_dir=settings.PAI_DATA_DIR,
        hidden=(settings.PAI_DATA_DIR,),
        uid_base=settings.PAI_LOCAL_SANDBOX_UID_BASE,
    )


def local_nodes(cluster):
    """The local backend's virtual nodes are the cluster's Node rows (capacity and health)."""
    return [
        {
            "name": node.name,
            "gpu": node.gpu_capacity,
            "cpu": node.cpu_capacity or 1,
            "memory_mb": node.memory_mb_capacity or 1024,
            "ip": node.ip or "127.0.0.1",
            "labels": {str(k): str(v) for k, v in (node.labels or {}).items()},
            "ready": node.ready,
            "schedulable": node.schedulable,
        }
        for node in Node.objects.filter(cluster=cluster).order_by("name")
    ]


def _leaves(cell_type, types=None):
    """(leaf cell type, how many of it one cell of `cell_type` holds); `types`: the cluster's
    cell types by id, read beforehand, else each child is read in turn."""
    count = 1
    while cell_type.child_id is not None:
        count *= cell_type.child_count
        cell_type = cell_type.child if types is None else types[cell_type.child_id]
    return cell_type, count


def tenant_quota(cluster, namespace):
    """The ResourceQuota of a tenant's namespace: what the tenant's virtual clusters on
    this cluster guarantee (devices, CPU, memory of their leaf cells). ``None`` for a
    namespace that is not a tenant's."""
    tenant = Tenant.objects.filter(slug=namespace.removeprefix(NAMESPACE_PREFIX)).first()
    if not namespace.startswith(NAMESPACE_PREFIX) or tenant is None:
        return None
    devices, cpu, memory_mb = {}, 0.0, 0
    cells = VirtualClusterCell.objects.filter(
        virtual_cluster__tenant=tenant, virtual_cluster__cluster=cluster
    ).select_related("cell_type")
    for vc_cell in cells:
        leaf, count = _leaves(vc_cell.cell_type)
        leaves = count * vc_cell.count
        if leaf.gpu and leaf.device_resource:
            devices[leaf.device_resource] = devices.get(leaf.device_resource, 0) + leaves * leaf.gpu
        cpu += leaves * leaf.cpu
        memory_mb += leaves * leaf.memory_mb
    hard = {f"requests.{resource}": str(count) for resource, count in sorted(devices.items())}
    hard["requests.cpu"] = f"{round(cpu * 1000)}m"
    hard["requests.memory"] = f"{memory_mb}Mi"
    return hard


def record_node(cluster, info):
    """The node watch saw a change: keep the Node row's health, the devices other pods hold
    there and the leaf cells they keep from pai (the engine reads health and cells)."""
    node = Node.objects.filter(cluster=cluster, name=info.name).first()
    if node is not None:
        set_node_health(node, ready=info.ready, schedulable=info.schedulable)
        changes = {}
        if node.gpu_used_by_others != info.gpu_used_by_others:
            changes["gpu_used_by_others"] = info.gpu_used_by_others
        cells = cells_used_by_others(cluster, info)
        if node.cells_used_by_others != cells:
            changes["cells_used_by_others"] = cells
        if changes:
            Node.objects.filter(pk=node.pk).update(**changes)


def cells_used_by_others(cluster, info):
    """How many of the node's leaf cells pods pai does not manage keep from pai: those whose
    devices they hold, and those whose CPU or memory they take. A node's allocatable CPU
    and memory beyond its leaf cells' (what a DaemonSet's pods are meant to use) is spent
    first: only what other pods take beyond it costs leaf cells. A node that is no
    physical cell, or a host carrying several SKUs (node cells ``host/first-last``), counts
    the devices alone (the engine takes them from the host's highest device range down)."""
    if not (info.gpu_used_by_others or info.cpu_used_by_others or info.memory_mb_used_by_others):
        return 0  # the usual case: nothing to look up
    cell = PhysicalCell.objects.filter(cluster=cluster, address=info.name, cell_type__is_node_level=True).first()
    if cell is None or PhysicalCell.objects.filter(
        cluster=cluster, address__startswith=f"{info.name}/", cell_type__is_node_level=True
    ).exists():
        return info.gpu_used_by_others
    types = {t.pk: t for t in CellType.objects.filter(cluster=cluster)}
    leaf, leaves = _leaves(types[cell.cell_type_id], types)
    taken = -(-info.gpu_used_by_others // leaf.gpu) if leaf.gpu else 0
    for per_leaf, allocatable, used in (
        (leaf.cpu, info.cpu, info.cpu_used_by_others),
        (leaf.memory_mb, info.memory_mb, info.memory_mb_used_by_others),
    ):
        if per_leaf > 0 and used > 0 and allocatable > 0:
            fit = max(0, math.floor((allocatable - used) / per_leaf + 1e-9))
            taken = max(taken, leaves - min(leaves, fit))
    return min(leaves, taken)


def kubernetes_backend(cluster, guard=None):
    try:
        api = connect(
            cluster.connection, qps=cluster.api_qps, burst=cluster.api_burst,
            # The four watches, and the requests the controller sends at once.
            pool_size=settings.PAI_KUBE_CONCURRENCY + 6,
            backoff=Backoff.within(settings.PAI_KUBE_RETRY_SECONDS),
            circuit=Circuit(cooldown=settings.PAI_KUBE_CIRCUIT_SECONDS, max_cooldown=6 * settings.PAI_KUBE_CIRCUIT_SECONDS),
            guard=guard,
            observer=figures.pod_api_observer(cluster.name),
        )
    except ConnectionFormatError as exc:
        raise ImproperlyConfigured(f"Cluster {cluster.name}: connection: {exc}") from exc
    resources = set(
        CellType.objects.filter(cluster=cluster, child__isnull=True, gpu__gt=0)
        .exclude(device_resource="")
        .values_list("device_resource", flat=True)
    )
    return KubernetesBackend(
        api,
        namespace_quota=lambda namespace: tenant_quota(cluster, namespace),
        pod_options=PodOptions(
            device_resource=min(resources) if len(resources) == 1 else "nvidia.com/gpu",
            assign_devices=settings.PAI_KUBE_ASSIGN_DEVICES,
            dedicated_taint=settings.PAI_KUBE_DEDICATED_TAINT,
        ),
        label_keys=LabelKeys(sku=settings.PAI_KUBE_SKU_LABEL, topology=tuple(settings.PAI_KUBE_TOPOLOGY_LABELS)),
        device_resources=tuple(sorted(resources)) or ("nvidia.com/gpu",),
        on_node_change=lambda info: record_node(cluster, info),
    )


def backend_for(cluster, guard=None):
    """The cluster's backend. `guard(write)` is asked before every request to the cluster's
    API and raises to forbid it (the scheduler lease's fence)."""
    if cluster.backend == BackendKind.LOCAL:
        return LocalBackend(local_state_dir(cluster), local_nodes(cluster), isolation=local_isolation())
    if cluster.backend == BackendKind.KUBERNETES:
        return kubernetes_backend(cluster, guard)
    raise ImproperlyConfigured(f"Cluster {cluster.name}: unknown backend {cluster.backend!r}")
