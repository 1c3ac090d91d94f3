"""OpenPAI's PAI_* environment and the host-port allocator."""

import pytest

from scheduler.podenv import (
    JobInfo,
    PortAllocator,
    PortsExhaustedError,
    TaskAddress,
    TaskRoleInfo,
    requested_ports,
    task_environment,
    task_environments,
)

JOB = JobInfo(
    name="mnist",
    user="alice",
    virtual_cluster="team_a",
    task_roles=(
        TaskRoleInfo("ps", 1, gpu=0, cpu=2, memory_mb=4096),
        TaskRoleInfo("worker", 2, gpu=1, cpu=4.5, memory_mb=8192, shm_mb=1024, min_failed_instances=-1, min_succeeded_instances=1),
    ),
)
ADDRESSES = [
    TaskAddress("ps", 0, "10.0.0.1", {"http": [20001], "ssh": [20000]}),
    TaskAddress("worker", 0, "10.0.0.2", {"http": [21001], "ssh": [21000], "sync": [21002, 21003]}),
    TaskAddress("worker", 1, "10.0.0.3", {"http": [22001], "ssh": [22000], "sync": [22002, 22003]}),
]


def test_the_environment_of_a_task_has_openpais_names_and_formats():
    env = task_environment(JOB, ADDRESSES, "worker", 1)
    assert env["PAI_JOB_NAME"] == "alice~mnist"
    assert env["PAI_USER_NAME"] == "alice"
    assert env["PAI_VIRTUAL_CLUSTER"] == "team_a"
    assert env["PAI_TASK_ROLE_COUNT"] == "2"
    assert env["PAI_TASK_ROLE_LIST"] == "ps,worker"
    assert env["PAI_TASK_ROLE_TASK_COUNT_ps"] == "1"
    assert env["PAI_TASK_ROLE_TASK_COUNT_worker"] == "2"
    assert env["PAI_RESOURCE_ps"] == "0,2,4096,512"
    assert env["PAI_RESOURCE_worker"] == "1,4.5,8192,1024"
    assert env["PAI_MIN_FAILED_TASK_COUNT_ps"] == "1"
    assert env["PAI_MIN_SUCCEEDED_TASK_COUNT_ps"] == "-1"
    assert env["PAI_MIN_FAILED_TASK_COUNT_worker"] == "-1"
    assert env["PAI_MIN_SUCCEEDED_TASK_COUNT_worker"] == "1"
    assert env["PAI_CURRENT_TASK_ROLE_NAME"] == "worker"
    assert env["PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX"] == "1"
    assert env["PAI_TASK_INDEX"] == "1"
    assert env["PAI_HOST_IP_ps_0"] == "10.0.0.1"
    assert env["PAI_HOST_IP_worker_0"] == "10.0.0.2"
    assert env["PAI_HOST_IP_worker_1"] == "10.0.0.3"
    assert env["PAI_PORT_LIST_worker_0_sync"] == "21002,21003"
    assert env["PAI_PORT_LIST_ps_0_ssh"] == "20000"
    assert all(isinstance(v, str) for v in env.values())


def test_every_task_sees_the_same_job_wide_variables():
    first = task_environment(JOB, ADDRESSES, "ps", 0)
    second = task_environment(JOB, ADDRESSES, "worker", 0)
    own = {"PAI_CURRENT_TASK_ROLE_NAME", "PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX", "PAI_TASK_INDEX"}
    assert {k: v for k, v in first.items() if k not in own} == {k: v for k, v in second.items() if k not in own}


def test_the_environments_of_all_tasks_at_once_are_each_tasks_own():
    everyone = task_environments(JOB, ADDRESSES)
    assert set(everyone) == {("ps", 0), ("worker", 0), ("worker", 1)}
    for (role, index), env in everyone.items():
        assert env == task_environment(JOB, ADDRESSES, role, index)
    everyone[("ps", 0)]["PAI_JOB_NAME"] = "changed"  # each task's dict is its own
    assert everyone[("worker", 0)]["PAI_JOB_NAME"] == "alice~mnist"
    with pytest.raises(ValueError, match=r"taskRoles.worker: task 1 has no address"):
        task_environments(JOB, ADDRESSES[:2])


def test_a_task_without_an_address_or_an_unknown_task_is_refused():
    with pytest.raises(ValueError, match=r"taskRoles.worker: task 1 has no address"):
        task_environment(JOB, ADDRESSES[:2], "ps", 0)
    with pytest.raises(ValueError, match=r"taskRoles.chief"):
        task_environment(JOB, ADDRESSES, "chief", 0)
    with pytest.raises(ValueError, match=r"no task 2"):
        task_environment(JOB, ADDRESSES, "worker", 2)


def test_openpai_default_port_labels_are_added():
    assert requested_ports({"sync": 2}) == {"sync": 2, "ssh": 1, "http": 1}
    assert requested_ports(None) == {"ssh": 1, "http": 1}
    assert requested_ports({"ssh": 3}) == {"ssh": 3, "http": 1}


def test_ports_are_deterministic_for_the_same_state():
    one, two = PortAllocator(), PortAllocator()
    assert one.allocate("127.0.0.1", "job-worker-0", {"a": 2, "b": 1}) == two.allocate("127.0.0.1", "job-worker-0", {"a": 2, "b": 1})


def test_ports_never_collide_on_one_host_and_stay_in_range():
    allocator = PortAllocator(first=30000, last=30019)
    seen = set()
    for i in range(5):
        ports = allocator.allocate("127.0.0.1", f"pod-{i}", {"ssh": 1, "http": 1, "x": 2})
        flat = [p for group in ports.values() for p in group]
        assert len(flat) == 4
        assert all(30000 <= p <= 30019 for p in flat)
        assert not seen & set(flat)
        seen |= set(flat)
    with pytest.raises(PortsExhaustedError):
        allocator.allocate("127.0.0.1", "one-more", {"ssh": 1})
    # another host is independent
    assert allocator.allocate("10.0.0.9", "pod-0", {"ssh": 1})


def test_released_and_reserved_ports_are_respected():
    allocator = PortAllocator(first=30000, last=30003)
    allocator.reserve("h", [30000, 30001, 30002])
    assert allocator.allocate("h", "k", {"ssh": 1}) == {"ssh": (30003,)}
    allocator.release("h", [30001])
    assert allocator.allocate("h", "k2", {"ssh": 1}) == {"ssh": (30001,)}
    assert allocator.taken("h") == frozenset({30000, 30001, 30002, 30003})
