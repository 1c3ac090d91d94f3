"""No single job's data may fail a scheduling cycle: a job that cannot be placed, or whose data
makes a step of the cycle fail, waits or fails with a reason, and every other job goes on."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from django.core.cache import cache

from apps.jobs.models import Job, TaskAttempt
from apps.jobs.services import set_execution_type
from apps.jobs.worker import launch
from apps.jobs.worker.controller import Controller

from tests.jobs.test_fuzz import _paths

from .conftest import job_yaml

pytestmark = pytest.mark.django_db


def _stop_everything(controller):
    for pod in controller.backend.list_pods():
        controller.backend.delete_pod(pod.name, grace_seconds=0)
    controller.backend.close()


def _ports_job(name, instances, ports, vc="team_a"):
    text = job_yaml(name, vc=vc, roles={"main": {"commands": ["sleep 30"], "instances": instances, "gpu": 0}})
    return text.replace("      gpu: 0\n", f"      gpu: 0\n      ports:\n        p: {ports}\n")


def _placed(job):
    job = Job.objects.get(pk=job.pk)
    return job.placement is not None


def test_a_job_that_cannot_get_its_ports_waits_and_another_teams_job_is_placed(world, worker, submit, settings):
    # Within a looser per-task limit, team A's first job holds 18,004 of the local host's
    # 20,000 ports (every local task is on 127.0.0.1); its second cannot get 5,002 more.
    settings.PAI_JOB_MAX_PORTS_PER_TASK = 9002
    holder = submit(world.a_member, _ports_job("holder", 2, 9000))
    worker.cycle()
    assert _placed(holder)
    hog = submit(world.a_member, _ports_job("port-hog", 1, 5000))
    other = submit(world.b_member, job_yaml("other-team", vc="team_b", roles={"main": {"commands": ["sleep 30"]}}))

    worker.cycle()

    assert _placed(other)
    hog = Job.objects.get(pk=hog.pk)
    assert (hog.state, hog.placement) == ("WAITING", None)
    assert hog.wait_reason == "Waiting for host ports: its tasks need 5002 on 127.0.0.1, where 1996 are free."
    assert not hog.attempts.exists()

    # The ports come back with the holder's end, and the job is placed.
    set_execution_type(world.a_member, holder, "STOP")
    worker.run_until(lambda: _placed(hog), timeout=30)


def test_a_stored_job_asking_more_ports_than_a_host_has_fails_with_the_reason(world, worker, submit):
    # A row accepted before ports were bounded at submit (the attack: p: 2147483647).
    hog = submit(world.a_member, _ports_job("port-hog", 1, 1))
    spec = hog.spec
    spec["taskRoles"]["main"]["resourcePerInstance"]["ports"] = {"p": 2147483647}
    Job.objects.filter(pk=hog.pk).update(spec=spec)
    other = submit(world.b_member, job_yaml("other-team", vc="team_b", roles={"main": {"commands": ["sleep 30"]}}))

    worker.cycle()

    assert _placed(other)
    hog = Job.objects.get(pk=hog.pk)
    assert hog.state == "FAILED"
    assert hog.wait_reason == (
        "This job can never run here: its tasks need 2147483649 host ports on 127.0.0.1, which has 20000 in all."
    )


def _corrupt_spec_commands(job):
    job.spec["taskRoles"]["main"]["commands"] = [None]
    job.launch["taskRoles"]["main"]["commands"] = [None]
    return {"spec": job.spec, "launch": job.launch}


@pytest.mark.parametrize("corrupt, step", [
    (lambda job: {"spec": {**job.spec, "taskRoles": [job.spec["taskRoles"]]}}, "schedule"),
    (lambda job: {"launch": {**job.launch, "taskRoles": {"main": {**job.launch["taskRoles"]["main"], "sku": ["A100"]}}}},
     "schedule"),
    (lambda job: {"spec": {**job.spec, "taskRoles": {"main": {**job.spec["taskRoles"]["main"], "instances": 2**31 - 1}}}},
     "schedule"),
    (_corrupt_spec_commands, "pods"),
])
def test_a_stored_job_the_worker_cannot_read_fails_alone(world, worker, submit, corrupt, step):
    # Rows a looser validator or an older pai may have written.
    bad = submit(world.a_member, job_yaml("bad", roles={"main": {"commands": ["sleep 30"]}}))
    Job.objects.filter(pk=bad.pk).update(**corrupt(Job.objects.get(pk=bad.pk)))
    other = submit(world.b_member, job_yaml("other-team", vc="team_b", roles={"main": {"commands": ["sleep 30"]}}))

    worker.run_until(lambda: Job.objects.get(pk=bad.pk).state == "FAILED", timeout=20)

    assert _placed(other)
    bad = Job.objects.get(pk=bad.pk)
    if step == "schedule":
        assert bad.wait_reason.startswith("This job can never run here: pai could not schedule it (")
    else:
        diagnostics = bad.attempts.get().exit_diagnostics
        assert "Why: pai could not build its pods from the job's document (TypeError: " in diagnostics


# What the worker reads from a job document, at values the protocol accepts (extremes included).
_completion = st.sampled_from([None, -1, 1])
_role = st.fixed_dictionaries({
    "instances": st.integers(min_value=1, max_value=3),
    "gpu": st.sampled_from([0, 1, 2, 8]),
    "ports": st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,7}", fullmatch=True),
                             st.one_of(st.integers(0, 3), st.integers(0, 20000)), max_size=3),
    "minFailedInstances": _completion,
    "minSucceededInstances": _completion,
    "taskRetryCount": st.integers(min_value=-2, max_value=2),
    "shmMB": st.integers(min_value=0, max_value=2**31 - 1),
    "pinnedCellId": st.one_of(st.none(), st.sampled_from(["gpu-node-1", "rack-1", "no-such-cell", ""])),
    "command": st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20),
})


def _fuzzed_job(name, roles, retry, lazy, gang):
    document_roles, hived_roles = {}, {}
    for i, role in enumerate(roles):
        name_i = f"r{i}"
        completion = {k: role[k] for k in ("minFailedInstances", "minSucceededInstances")}
        document_roles[name_i] = {
            "instances": role["instances"],
            "completion": completion,
            "taskRetryCount": role["taskRetryCount"],
            "dockerImage": "image",
            "extraContainerOptions": {"shmMB": role["shmMB"]},
            "resourcePerInstance": {"cpu": 1, "memoryMB": 1024, "gpu": role["gpu"], "ports": role["ports"]},
            "commands": [f"exit 0 # {role['command']}"],
        }
        if role["pinnedCellId"] is not None:
            hived_roles[name_i] = {"pinnedCellId": role["pinnedCellId"]}
    return {
        "protocolVersion": 2, "name": name, "type": "job", "jobRetryCount": retry,
        "prerequisites": [{"name": "image", "type": "dockerimage", "uri": "ubuntu:22.04"}],
        "defaults": {"virtualCluster": "team_a"},
        "taskRoles": document_roles,
        "extras": {"gangAllocation": gang,
                   "hivedScheduler": {"jobPriorityClass": "test", "lazyPreemptionEnable": lazy, "taskRoles": hived_roles}},
    }


# Values a stored row may hold after a looser validator or an older pai wrote it.
_stored_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**31), 2**31), st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=6,
)
_corruptions = st.one_of(
    st.none(),
    st.tuples(st.sampled_from(["spec", "launch"]), st.integers(0, 10**6), st.one_of(st.none(), _stored_values)),
)


def _corrupt(job, corruption):
    """Replace (or, with None, remove) one field of the job's stored spec or launch document."""
    field, pick, value = corruption
    document = getattr(job, field)
    paths = [p for p in _paths(document) if p]
    path = paths[pick % len(paths)]
    parent = document
    for key in path[:-1]:
        parent = parent[key]
    if value is None and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    Job.objects.filter(pk=job.pk).update(**{field: document})


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    roles=st.lists(_role, min_size=1, max_size=3),
    retry=st.integers(min_value=-2, max_value=2),
    lazy=st.booleans(),
    gang=st.booleans(),
    corruption=_corruptions,
)
def test_whatever_a_job_holds_the_cycle_goes_on_for_the_others(world, settings, roles, retry, lazy, gang, corruption):
    settings.PAI_JOB_MAX_PORTS_PER_TASK = 20002
    cache.clear()  # the submit throttle's counters
    client = APIClient()
    client.force_authenticate(world.a_member)
    response = client.post("/api/v2/jobs", _fuzzed_job("fuzzed", roles, retry, lazy, gang), format="json")
    assert response.status_code in (202, 400), response.content
    if response.status_code == 202 and corruption is not None:
        _corrupt(Job.objects.get(name="fuzzed"), corruption)
    # A higher priority than the fuzzed job's: placed first, so that it never waits for the
    # fuzzed job's ports or cells, only for the cycle.
    client.force_authenticate(world.b_member)
    response = client.post(
        "/api/v2/jobs", job_yaml("bystander", vc="team_b", priority="prod", roles={"main": {"commands": ["sleep 30"]}}),
        content_type="text/yaml",
    )
    assert response.status_code == 202
    # And one of the fuzzed job's own priority, queued after it: nothing it holds may keep
    # another team's job of the same rank waiting either.
    response = client.post(
        "/api/v2/jobs", job_yaml("peer", vc="team_b", priority="test", roles={"main": {"commands": ["sleep 30"]}}),
        content_type="text/yaml",
    )
    assert response.status_code == 202
    controller = Controller(world.cluster)
    try:
        for _ in range(2):
            controller.run_cycle()
        for name in ("bystander", "peer"):
            placed = Job.objects.get(name=name)
            assert placed.placement is not None or placed.state in ("RUNNING", "SUCCEEDED"), (name, placed.wait_reason)
        fuzzed = Job.objects.filter(name="fuzzed").first()
        if fuzzed is not None and fuzzed.state == "WAITING" and fuzzed.placement is None:
            assert fuzzed.wait_reason
    finally:
        _stop_everything(controller)
        Job.objects.all().delete()


def test_a_batch_one_job_breaks_is_placed_again_job_by_job_with_the_same_task_attempts(world, worker, submit):
    # The placements of a cycle are persisted a batch at a time; a job whose stored ports
    # cannot be read fails the batch, which goes again one job at a time: that job fails
    # alone, and the others' first task attempts are what the batch would have written.
    ok = submit(world.a_member, _ports_job("ok", 2, 2))
    bad = submit(world.a_member, _ports_job("bad", 1, 1))
    spec = bad.spec
    spec["taskRoles"]["main"]["resourcePerInstance"]["ports"] = {"p": "many"}
    Job.objects.filter(pk=bad.pk).update(spec=spec)
    other = submit(world.b_member, _ports_job("other-team", 2, 2, vc="team_b"))

    worker.cycle()

    bad = Job.objects.get(pk=bad.pk)
    assert bad.state == "FAILED"
    assert bad.wait_reason.startswith("This job can never run here: pai could not schedule it (ValueError: ")
    for job in (ok, other):
        job = Job.objects.get(pk=job.pk)
        attempt = job.attempts.get()
        pods = {(pod["task_role"], pod["index"]): pod for pod in job.placement["pods"]}
        task_attempts = list(TaskAttempt.objects.filter(task__job_attempt=attempt).select_related("task"))
        assert sorted((ta.task.task_role, ta.task.index) for ta in task_attempts) == sorted(pods)
        for ta in task_attempts:
            pod = pods[(ta.task.task_role, ta.task.index)]
            assert ta.index == 0
            assert ta.pod_name == launch.pod_name(launch.job_key(job), ta.task.task_role, ta.task.index, 0, 0)
            assert (ta.node_name, ta.device_indices) == (pod["node"], list(pod["devices"]))
            assert ta.log_path.endswith(f"/pods/{ta.pod_name}/all.log")
            assert len(ta.ports["p"]) == 2
    # No host port is given twice across the jobs' tasks.
    given = [port for ta in TaskAttempt.objects.all() for values in ta.ports.values() for port in values]
    assert len(given) == len(set(given))


def test_a_node_row_no_physical_cell_describes_fails_no_cycle(world, worker, submit):
    # An admin registers a machine before describing its cells (or removes its cells and keeps
    # the row): the engine has no such node. Its health is not the engine's business, and
    # every other node's jobs are still placed.
    from apps.clusters.models import Node

    Node.objects.create(cluster=world.cluster, name="not-yet-described", ready=False)
    job = submit(world.a_member, job_yaml("placed-anyway", roles={"main": {"commands": ["sleep 30"], "gpu": 0}}))

    worker.cycle()

    assert _placed(job)
