"""The pai scheduling engine: HiveD-style cells, guarantees and gang placement.

Pure Python with no Django import; the control plane feeds it the cluster, the VCs, the
persisted placements and the queue, and applies the decisions it returns.
"""

from .decisions import (
    Allocation,
    CellTypeStatus,
    CycleResult,
    DeviceUse,
    NodeStatus,
    PodPlacement,
    Preemption,
    Rejection,
    RestoreIssue,
    RestoreReport,
    VcStatus,
    WaitInfo,
)
from .engine import DEFAULT_STARVATION_THRESHOLD, Engine
from .errors import ConfigurationError, InvalidRequestError
from .quota import validate_configuration
from .spec import (
    PRIORITY_CLASSES,
    CellTypeSpec,
    ClusterSpec,
    GangRequest,
    PhysicalCellSpec,
    PodRequest,
    SkuSpec,
    VirtualClusterSpec,
    leaf_cells_for,
    priority_from_class,
)

__all__ = [
    "Allocation", "CellTypeSpec", "CellTypeStatus", "ClusterSpec", "ConfigurationError", "CycleResult",
    "DEFAULT_STARVATION_THRESHOLD", "DeviceUse", "Engine", "GangRequest", "InvalidRequestError", "NodeStatus",
    "PRIORITY_CLASSES", "PhysicalCellSpec", "PodPlacement", "PodRequest", "Preemption", "Rejection", "RestoreIssue",
    "RestoreReport", "SkuSpec", "VcStatus", "VirtualClusterSpec", "WaitInfo", "leaf_cells_for",
    "priority_from_class", "validate_configuration",
]
