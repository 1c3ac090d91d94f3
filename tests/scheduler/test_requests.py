"""Requests that can never run are refused with an error naming the field and numbers."""

import pytest

from scheduler import (
    Engine,
    GangRequest,
    InvalidRequestError,
    PodRequest,
    Rejection,
    SkuSpec,
    leaf_cells_for,
    priority_from_class,
)

from .helpers import gang, mixed_cluster, vc, waiting


@pytest.fixture
def engine():
    return Engine(mixed_cluster(), [
        vc("vision", ("A100-NODE", 2), pinned_cells=("pin-a5",)),
        vc("small", ("A100-SWITCH", 2)),
        vc("cpu", ("CPU-NODE", 1)),
    ])


def pods(*specs):
    return tuple(PodRequest(role, i, sku, n) for role, i, sku, n in specs)


@pytest.mark.parametrize(
    "request_, field, message",
    [
        (gang("j", "nowhere", (1, 1)), "virtualCluster", "unknown VC 'nowhere'; known: cpu, small, vision"),
        (gang("j", "vision", (1, 1), sku="V100"), "taskRoles.r0.skuType",
         "VC 'vision' has no V100 cells (it has: A100)"),
        (gang("j", "vision", (1, 1), sku="H100"), "taskRoles.r0.skuType", "unknown SKU 'H100'"),
        (gang("j", "vision", (1, 1), priority=1001), "jobPriorityClass",
         "priority 1001 is out of range: use -1 (oppo) or 0..1000"),
        (gang("j", "vision", (1, 1), priority=-5), "jobPriorityClass",
         "priority -5 is out of range: use -1 (oppo) or 0..1000"),
        (gang("j", "vision", (1, 1), pinned="pin-x"), "taskRoles.r0.pinnedCellId",
         "VC 'vision' has no pinned cell 'pin-x' (its pinned cells: pin-a5)"),
        (gang("j", "small", (1, 1), pinned="pin-a5"), "taskRoles.r0.pinnedCellId",
         "VC 'small' has no pinned cell 'pin-a5' (its pinned cells: none)"),
        (gang("j", "vision", (1, 16)), "taskRoles.r0.resourcePerInstance",
         "a pod needs 16 A100 on one node but A100 nodes have 8"),
        (gang("j", "vision", (1, 0)), "taskRoles.r0.resourcePerInstance",
         "a pod needs at least 1 leaf cell, asked for 0"),
        (gang("j", "small", (1, 4)), "taskRoles.r0.resourcePerInstance",
         "a pod needs 4 A100 in one cell but the largest A100 cell VC 'small' can use holds 2"),
        (gang("j", "vision", (3, 8)), "taskRoles", "the job needs 24 A100 but VC 'vision' can never hold more than 16"),
        (gang("j", "vision", (2, 8), pinned="pin-a5"), "taskRoles",
         "the job needs 16 A100 in pinned cell 'pin-a5', which holds 8"),
        (GangRequest("j", "vision", "u", 10, pods(("w", 0, "A100", 1), ("w", 2, "A100", 1)), 0.0),
         "taskRoles.w.taskNumber", "pod indices must be 0..1, got [0, 2]"),
        (GangRequest("j", "vision", "u", 10, pods(("w", 0, "A100", 1), ("w", 1, "A100", 2)), 0.0),
         "taskRoles.w.resourcePerInstance", "pods of one task role must ask for the same resources"),
        (GangRequest("j", "vision", "u", 10, (), 0.0), "taskRoles", "the job has no pods"),
        (GangRequest("j", "cpu", "u", 10, (PodRequest("w", 0, None, 1, gpu=1),), 0.0), "taskRoles.w.skuType",
         "VC 'cpu' has no GPU SKU that can serve task role 'w'"),
    ],
)
def test_invalid_request_is_refused_with_field_and_numbers(engine, request_, field, message):
    with pytest.raises(InvalidRequestError) as caught:
        engine.check_request(request_)
    assert caught.value.field == field
    assert message in caught.value.message


def test_invalid_gang_in_the_queue_is_rejected_without_stopping_the_cycle(engine):
    result = engine.schedule([gang("bad", "nowhere", (1, 1)), gang("good", "vision", (1, 1), at=1)], now=0)

    assert result.rejected == (Rejection("bad", "virtualCluster", "unknown VC 'nowhere'; known: cpu, small, vision"),)
    assert [a.job_id for a in result.placements] == ["good"]


def test_a_running_job_queued_again_is_rejected(engine):
    engine.schedule([gang("j", "vision", (1, 1))], now=0)
    result = engine.schedule([gang("j", "vision", (1, 1))], now=1)
    assert [r.job_id for r in result.rejected] == ["j"] and result.placements == ()


def test_priority_classes_and_leaf_cell_rule():
    assert [priority_from_class(c) for c in ("prod", "test", "oppo")] == [100, 10, -1]
    with pytest.raises(ValueError, match="unknown priority class 'urgent'"):
        priority_from_class("urgent")
    a100 = SkuSpec("A100", gpu=1, cpu=12, memory_mb=110_000)
    assert leaf_cells_for(a100, gpu=2, cpu=4, memory_mb=1000) == 2
    assert leaf_cells_for(a100, gpu=1, cpu=30, memory_mb=1000) == 3  # cpu dominates
    assert leaf_cells_for(a100, gpu=0, cpu=1, memory_mb=300_000) == 3  # memory dominates
    cpu_sku = SkuSpec("CPU", gpu=0, cpu=4, memory_mb=16_000)
    with pytest.raises(ValueError, match="provides no gpu"):
        leaf_cells_for(cpu_sku, gpu=1, cpu=1, memory_mb=1)


def test_gang_larger_than_free_quota_waits_with_the_numbers(engine):
    engine.schedule([gang("first", "vision", (1, 8))], now=0)

    result = engine.schedule([gang("pair", "vision", (2, 8))], now=1)

    assert waiting(result)["pair"] == (
        "VC 'vision' has 8 of 16 A100 free; the job needs 2 × 8 A100 on whole nodes; "
        "8 A100 are used by its jobs of equal or higher priority"
    )
