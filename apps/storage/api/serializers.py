"""OpenPAI's storage objects (a summary in lists, a detail with the server), never with credentials."""

from rest_framework import serializers

from apps.storage.choices import StorageKind

OPENPAI_TYPES = {
    StorageKind.NFS: "nfs",
    StorageKind.SMB: "samba",
    StorageKind.AZURE_FILE: "azureFile",
    StorageKind.AZURE_BLOB: "azureBlob",
}


class StorageSummarySerializer(serializers.Serializer):
    name = serializers.CharField()
    share = serializers.BooleanField(help_text="False when every user mounts their own sub-path.")
    volumeName = serializers.CharField(help_text="The PersistentVolumeClaim mounted into job pods.")
    default = serializers.BooleanField(help_text="Mounted into your jobs when a job names no storage.")
    readOnly = serializers.BooleanField()
    mountPath = serializers.CharField(help_text="pai extension: where tasks see the storage.")


class StorageListSerializer(serializers.Serializer):
    storages = StorageSummarySerializer(many=True)


class StorageDetailSerializer(StorageSummarySerializer):
    type = serializers.ChoiceField(choices=["nfs", "samba", "azureFile", "azureBlob", "other", "unknown"])
    data = serializers.DictField(help_text="Where the data lives: nfs {server, path}, samba {address}, azureFile "
                                 "{shareName, accountName}, azureBlob {containerName, accountName}, other {}. "
                                 "Account keys and passwords are never returned.")
    mountOptions = serializers.ListField(child=serializers.CharField())
    subPath = serializers.CharField(help_text="pai extension: the sub-path of the server mounted.")
    perUserSubPath = serializers.BooleanField(help_text="pai extension: each user mounts <subPath>/<username>.")


SUMMARY_EXAMPLE = {
    "name": "team-a-data",
    "share": True,
    "volumeName": "team-a-data",
    "default": True,
    "readOnly": False,
    "mountPath": "/mnt/team-a-data",
}
DETAIL_EXAMPLE = {
    **SUMMARY_EXAMPLE,
    "type": "nfs",
    "data": {"server": "10.0.0.1", "path": "/export/team-a"},
    "mountOptions": ["nfsvers=4.1"],
    "subPath": "team-a",
    "perUserSubPath": False,
}


def present_summary(storage, default):
    return {
        "name": storage.name,
        "share": not storage.per_user_sub_path,
        "volumeName": storage.claim_name or storage.name,
        "default": default,
        "readOnly": storage.read_only,
        "mountPath": storage.mount_path,
    }


def _path(*parts):
    joined = "/".join(p.strip("/") for p in parts if p and p.strip("/"))
    return "/" + joined


def _mount_options(options):
    if isinstance(options, dict):
        # Sorted: PostgreSQL (jsonb) does not keep the keys in the order they were written.
        return [
            key if value is True else f"{key}={value}" for key, value in sorted(options.items()) if value is not False
        ]
    if isinstance(options, list):
        return [str(o) for o in options]
    return []


def present_detail(storage, default):
    server = storage.server
    kind = OPENPAI_TYPES.get(server.kind, "other")
    if kind == "nfs":
        data = {"server": server.address, "path": _path(server.root_path, storage.sub_path)}
    elif kind == "samba":
        data = {"address": server.address + _path(server.root_path, storage.sub_path)}
    elif kind == "azureFile":
        data = {"shareName": server.root_path.strip("/"), "accountName": server.address}
    elif kind == "azureBlob":
        data = {"containerName": server.root_path.strip("/"), "accountName": server.address}
    else:
        data = {}
    return {
        **present_summary(storage, default),
        "type": kind,
        "data": data,
        "mountOptions": _mount_options(server.options),
        "subPath": storage.sub_path,
        "perUserSubPath": storage.per_user_sub_path,
    }
