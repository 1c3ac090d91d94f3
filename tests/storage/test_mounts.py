"""Where a job's storages land: the storage's sub-path, then the owner's directory for a
per-user storage, applied once — a host-path storage's directory is its ``host_path``,
a claim's is its ``subPath`` — the same for the Kubernetes manifests as for the local
backend (tests/security/test_local_isolation.py runs jobs writing into them)."""

from apps.jobs.worker import launch
from apps.storage.models import StorageConfig, StorageGrant, StorageServer
from scheduler.backends import PodSpec
from scheduler.backends.kubernetes import PodOptions
from scheduler.backends.kubernetes.manifests import pod
from tests.jobs.factories import submitted_job


def add_storage(world, server, name, sub_path, per_user, read_only=False):
    config = StorageConfig.objects.create(
        tenant=world.tenant_a, server=server, name=name, sub_path=sub_path, mount_path=f"/mnt/{name}",
        per_user_sub_path=per_user, read_only=read_only,
    )
    StorageGrant.objects.create(storage=config, group=world.group_a, is_default=True)


def test_sub_paths_and_user_directories_are_applied_once(world):
    host = StorageServer.objects.create(tenant=world.tenant_a, name="a-host", kind="hostPath", root_path="/srv/team-a")
    nfs = StorageServer.objects.create(tenant=world.tenant_a, name="a-nfs", kind="nfs", address="10.0.0.2", root_path="/x")
    add_storage(world, host, "data", "datasets/imagenet", per_user=False, read_only=True)
    add_storage(world, host, "home", "home", per_user=True)
    add_storage(world, host, "whole", "", per_user=False)
    add_storage(world, nfs, "scratch", "/scratch/", per_user=True)
    add_storage(world, nfs, "bare", "", per_user=False)
    job = submitted_job(world.a_member, vc="team_a")

    mounts = {m.name: m for m in launch.storage_mounts(job)}
    user = world.a_member.username
    assert {name: (m.host_path, m.sub_path) for name, m in mounts.items() if name in {"data", "home", "whole", "scratch", "bare"}} == {
        "data": ("/srv/team-a/datasets/imagenet", ""),
        "home": (f"/srv/team-a/home/{user}", ""),
        "whole": ("/srv/team-a", ""),
        "scratch": (None, f"scratch/{user}"),
        "bare": (None, ""),
    }

    manifest = pod(PodSpec(name="p", node="gpu-node-1", commands="true", storage_mounts=tuple(mounts.values())), PodOptions())
    volumes = {v["name"]: v for v in manifest["spec"]["volumes"]}
    by_path = {}
    for mount in manifest["spec"]["containers"][0]["volumeMounts"]:
        volume = volumes[mount["name"]]
        source = volume.get("hostPath", {}).get("path") or volume.get("persistentVolumeClaim", {}).get("claimName")
        by_path[mount["mountPath"]] = (source, mount.get("subPath"), mount.get("readOnly", False))
    assert {path: by_path[path] for path in ("/mnt/data", "/mnt/home", "/mnt/whole", "/mnt/scratch", "/mnt/bare")} == {
        "/mnt/data": ("/srv/team-a/datasets/imagenet", None, True),
        "/mnt/home": (f"/srv/team-a/home/{user}", None, False),
        "/mnt/whole": ("/srv/team-a", None, False),
        "/mnt/scratch": ("scratch", f"scratch/{user}", False),
        "/mnt/bare": ("bare", None, False),
    }
