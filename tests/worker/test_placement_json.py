"""A placement as the worker stores it (`Job.placement`) and reads it back on restart."""

import json
from dataclasses import asdict

from hypothesis import given
from hypothesis import strategies as st

from apps.jobs.worker.controller import allocation_from_json, placement_json
from scheduler import Allocation, PodPlacement

_names = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_pods = st.builds(
    PodPlacement,
    task_role=_names,
    index=st.integers(0, 1000),
    node=_names,
    devices=st.lists(st.integers(0, 15), max_size=8).map(tuple),
    cell_chain=st.lists(_names, max_size=4).map(tuple),
    vc_cell=st.none() | _names,
    lent_by=st.none() | _names,
    vc_entry=st.none() | _names,
)
_allocations = st.builds(
    Allocation,
    job_id=_names,
    vc=_names,
    user=_names,
    priority=st.integers(-1, 1000),
    opportunistic=st.booleans(),
    lazy_preempted=st.booleans(),
    started_at=st.floats(0, 2e9),
    pods=st.lists(_pods, max_size=4).map(tuple),
    lazy_preemption=st.booleans(),
    max_runtime=st.none() | st.floats(0, 1e7),
    min_runtime=st.floats(0, 1e7),
    state=st.sampled_from(["running", "preempting", "terminating"]),
    victims=st.lists(_names, max_size=3).map(tuple),
    planned=st.booleans(),
)


@given(_allocations)
def test_a_placement_is_plain_json_and_reads_back_as_the_same_allocation(allocation):
    stored = placement_json(allocation)
    assert json.loads(json.dumps(stored)) == stored == json.loads(json.dumps(asdict(allocation)))
    assert allocation_from_json(stored) == allocation
