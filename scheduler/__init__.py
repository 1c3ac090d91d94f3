"""The pai scheduling engine: HiveD-style cells, guarantees and gang placement.

Pure Python with no Django import; the control plane feeds it the cluster, the VCs, the
persisted placements and the queue, and applies the decisions it returns::

    engine = Engine(cluster_spec, vc_specs)          # raises ConfigurationError
    engine.restore(persisted_allocations)            # after a start or a config change
    engine.set_node_health("a100-07", False)         # as nodes change
    engine.check_request(gang)                       # at submission: InvalidRequestError
    capacity(cluster_spec, vc_specs)                 # per chain and type: cells, guarantees, spare
    result = engine.schedule(waiting_gangs, now)     # every cycle (budgets=: GPU-hour budgets)
    # delete result.preemptions' (non-lazy) victims' pods, create result.placements'
    # pods, store every allocation (engine.allocations(): running, preempting and
    # terminating), show result.waiting's reasons
    engine.release(job_id)   # when a job's pods are gone (ended, deleted, preempted)

``engine.allocations()`` is exactly what to persist; ``restore`` of it rebuilds the
same state and so the same later decisions.
"""

from .budgets import GpuHourBudget
from .decisions import (
    Allocation,
    CellTypeStatus,
    ChainCapacity,
    CycleResult,
    DeviceUse,
    NodeStatus,
    PodPlacement,
    Preemption,
    Rejection,
    ReservationInfo,
    RestoreIssue,
    RestoreReport,
    Shortage,
    TypeCapacity,
    VcStatus,
    WaitInfo,
)
from .engine import DEFAULT_STARVATION_THRESHOLD, Engine
from .errors import ConfigurationError, InvalidRequestError
from .quota import capacity, quota_shortages, validate_configuration
from .spec import (
    DEFAULT_PRIORITY,
    MAX_PRIORITY,
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
    "Allocation", "CellTypeSpec", "CellTypeStatus", "ChainCapacity", "ClusterSpec", "ConfigurationError", "CycleResult",
    "DEFAULT_PRIORITY", "DEFAULT_STARVATION_THRESHOLD", "DeviceUse", "MAX_PRIORITY", "Engine", "GangRequest",
    "GpuHourBudget", "InvalidRequestError", "NodeStatus",
    "PRIORITY_CLASSES", "PhysicalCellSpec", "PodPlacement", "PodRequest", "Preemption", "Rejection",
    "ReservationInfo", "RestoreIssue",
    "RestoreReport", "Shortage", "SkuSpec", "TypeCapacity", "VcStatus", "VirtualClusterSpec", "WaitInfo",
    "capacity", "leaf_cells_for", "priority_from_class", "quota_shortages", "validate_configuration",
]
