"""What the pods of a placed job attempt look like: one PodSpec per task attempt."""

import json
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from apps.storage.choices import StorageKind
from apps.storage.models import StorageConfig
from scheduler import podenv
from scheduler.backends import ANNOTATION_PLACEMENT, SECRETS_DIR_ENV, SECRETS_MOUNT_PATH, ImagePullAuth, PodSpec
from scheduler.backends import PortRequest, StorageMount, pod_labels, pod_name
from scheduler.spec import device_range

from ..protocol.templating import as_text

# How long a stopped task has to end on SIGTERM before SIGKILL.
DEFAULT_GRACE_SECONDS = 10.0


@dataclass(frozen=True)
class DevicePlan:
    """How a cluster's pods get their devices. ``gpus_per_leaf``: the devices one leaf
    cell of each SKU brings (the leaf cells of a CPU SKU are shares of a node, not
    devices: its pods get none); ``resources``: each SKU's device resource; ``by_index``:
    the hosts carrying several SKUs of one device resource, whose pods get their devices
    by index (a device plugin counting that resource could hand out another SKU's)."""

    gpus_per_leaf: dict[str, int] = field(default_factory=dict)
    resources: dict[str, str] = field(default_factory=dict)
    by_index: frozenset[str] = frozenset()

    @classmethod
    def for_cluster(cls, cluster):
        from apps.clusters.models import PhysicalCell
        from apps.clusters.topology import CellChains

        chains = CellChains.for_cluster(cluster)
        leaves = [t for t in chains.by_id.values() if t.is_leaf]
        gpus, resources = {t.name: t.gpu for t in leaves}, {t.name: t.device_resource for t in leaves}
        ranged = list(PhysicalCell.objects.filter(
            cluster=cluster, cell_type__is_node_level=True, address__contains="/"
        ).values_list("address", "cell_type_id"))
        if not ranged:
            return cls(gpus, resources)  # the usual case: one SKU per host
        by_host = {}
        for address, type_id in ranged:
            by_host.setdefault(device_range(address)[0], []).append(type_id)
        for address, type_id in PhysicalCell.objects.filter(
            cluster=cluster, cell_type__is_node_level=True, address__in=sorted(by_host)
        ).values_list("address", "cell_type_id"):
            by_host[address].append(type_id)
        shared = set()
        for host, type_ids in by_host.items():
            kinds = [chains.leaf(chains.by_id[t]).device_resource for t in type_ids]
            if len(set(kinds)) < len(kinds):
                shared.add(host)
        return cls(gpus, resources, frozenset(shared))


def job_key(job):
    """The job's identity in pod names and labels: stable for the job's life, never reused by another job."""
    return f"pai-{job.pk}-{int(job.submitted_at.timestamp())}"


def task_roles(job):
    """(name, spec) of the job's task roles in the document's order."""
    return list(job.spec["taskRoles"].items())


def job_info(job):
    roles = []
    for name, spec in task_roles(job):
        resources = spec.get("resourcePerInstance") or {}
        completion = spec.get("completion") or {}
        roles.append(
            podenv.TaskRoleInfo(
                name=name,
                instances=int(spec.get("instances", 1)),
                gpu=int(resources.get("gpu", 0)),
                cpu=float(resources.get("cpu", 1)),
                memory_mb=int(resources.get("memoryMB", 0)),
                shm_mb=int((spec.get("extraContainerOptions") or {}).get("shmMB", podenv.DEFAULT_SHM_MB)),
                min_failed_instances=completion.get("minFailedInstances"),
                min_succeeded_instances=completion.get("minSucceededInstances"),
            )
        )
    return podenv.JobInfo(
        name=job.name, user=job.owner.username, virtual_cluster=job.virtual_cluster.name, task_roles=tuple(roles)
    )


def allocate_ports(job, attempt_index, placement, node_ips, allocator):
    """{(task role, index): {label: ports}} for every pod of a placement, reserved in `allocator`.

    All or nothing: PortsExhaustedError, with nothing reserved, when a host lacks the ports
    its pods need together.
    """
    roles = dict(task_roles(job))
    wanted, per_host = [], {}
    for pod in placement["pods"]:
        counts = podenv.requested_ports((roles[pod["task_role"]].get("resourcePerInstance") or {}).get("ports"))
        host = node_ips[pod["node"]]
        wanted.append((pod, host, counts))
        per_host[host] = per_host.get(host, 0) + sum(counts.values())
    for host, count in sorted(per_host.items()):
        allocator.check(host, count)
    ports = {}
    for pod, host, counts in wanted:
        key = pod_name(job_key(job), pod["task_role"], pod["index"], attempt_index, 0)
        ports[(pod["task_role"], pod["index"])] = {
            label: list(values) for label, values in allocator.allocate(host, key, counts).items()
        }
    return ports


def storage_mounts(job):
    """The job's storages as mounts. The directory inside the storage (its sub-path, then
    the owner's name for a per-user storage) is applied once: a host-path storage's
    ``host_path`` is that directory itself, any other storage's claim gets it as
    ``sub_path``."""
    names = [s["name"] for s in job.launch.get("storages", [])]
    if not names:
        return ()
    configs = {c.name: c for c in StorageConfig.objects.filter(name__in=names).select_related("server")}
    mounts = []
    for item in job.launch.get("storages", []):
        config = configs.get(item["name"])
        if config is None:
            continue
        inside = PurePosixPath(config.sub_path.strip("/") or ".")
        if config.per_user_sub_path:
            inside /= job.owner.username
        host_path, sub_path = None, "" if str(inside) == "." else str(inside)
        if config.server.kind == StorageKind.HOST_PATH:
            host_path, sub_path = str(PurePosixPath(config.server.root_path) / inside), ""
        mounts.append(
            StorageMount(
                name=config.name,
                claim=config.claim_name or config.name,
                mount_path=item.get("mountPath") or config.mount_path,
                sub_path=sub_path,
                read_only=config.read_only,
                host_path=host_path,
            )
        )
    return tuple(mounts)


def secret_files(secret):
    """The job's `secrets` as the task's files, key → text (a YAML number is written as its digits)."""
    return {str(key): as_text(value) for key, value in (secret.values if secret is not None else {}).items()}


def pod_specs(job, attempt_index, task_attempts, placement, node_ips, devices):
    """PodSpec per task attempt row; `task_attempts` are (TaskAttempt, Task) pairs of the attempt;
    `devices`: the cluster's :class:`DevicePlan`.
    """
    info = job_info(job)
    roles = dict(task_roles(job))
    by_task = {(p["task_role"], p["index"]): p for p in placement["pods"]}
    addresses = [
        podenv.TaskAddress(
            task_role=task.task_role,
            index=task.index,
            host_ip=node_ips[by_task[(task.task_role, task.index)]["node"]],
            ports={label: tuple(values) for label, values in (ta.ports or {}).items()},
        )
        for ta, task in task_attempts
    ]
    secret = getattr(job, "secret", None)
    image_auth = secret.image_auth if secret is not None else {}
    files = secret_files(secret)
    mounts = storage_mounts(job)
    environments = podenv.task_environments(info, addresses)
    specs = []
    for ta, task in task_attempts:
        role = roles[task.task_role]
        resources = role.get("resourcePerInstance") or {}
        launch = job.launch["taskRoles"][task.task_role]
        pod = by_task[(task.task_role, task.index)]
        auth = image_auth.get(role.get("dockerImage"))
        env = environments.get((task.task_role, task.index))
        if env is None:  # a task the job's document does not have
            env = podenv.task_environment(info, addresses, task.task_role, task.index)  # raises, naming it
        env = dict(env)
        if files:
            # Where the container sees them; a backend without containers sets its own directory.
            env[SECRETS_DIR_ENV] = SECRETS_MOUNT_PATH
        specs.append(
            PodSpec(
                name=ta.pod_name,
                node=pod["node"],
                commands="\n".join(launch["commands"]),
                namespace=f"pai-{job.tenant.slug}",
                labels=pod_labels(job_key(job), task.task_role, task.index, attempt_index, ta.index),
                annotations={ANNOTATION_PLACEMENT: json.dumps(pod, sort_keys=True)},
                devices=tuple(pod["devices"]) if devices.gpus_per_leaf.get(launch["sku"], 1) else (),
                device_resource=devices.resources.get(launch["sku"], ""),
                devices_by_index=pod["node"] in devices.by_index,
                image=launch.get("image") or "",
                image_pull_auth=ImagePullAuth(
                    username=auth.get("username", ""), password=auth.get("password", ""),
                    registry=auth.get("registryuri", ""),
                ) if auth else None,
                env=env,
                storage_mounts=mounts,
                ports=tuple(PortRequest(label, tuple(values)) for label, values in sorted((ta.ports or {}).items())),
                shm_mb=int((role.get("extraContainerOptions") or {}).get("shmMB", podenv.DEFAULT_SHM_MB)),
                cpu=float(resources.get("cpu", 0)),
                memory_mb=int(resources.get("memoryMB", 0)),
                gpu=int(resources.get("gpu", 0)),
                priority_class=job.priority_class,
                grace_seconds=DEFAULT_GRACE_SECONDS,
                secrets=dict(files),
            )
        )
    return specs
