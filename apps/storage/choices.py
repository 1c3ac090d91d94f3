from django.db import models


class StorageKind(models.TextChoices):
    NFS = "nfs", "NFS"
    SMB = "smb", "SMB / CIFS"
    AZURE_FILE = "azurefile", "Azure File"
    AZURE_BLOB = "azureblob", "Azure Blob"
    CEPHFS = "cephfs", "CephFS"
    HOST_PATH = "hostPath", "Host path (local backend)"
