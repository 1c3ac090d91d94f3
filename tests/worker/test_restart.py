from apps.jobs.models import TaskAttempt
from scheduler.backends import PodSpec, pod_labels

from .conftest import Worker, job_yaml


def test_a_new_leader_keeps_finished_pods_logs_and_deletes_orphans(world, worker, submit):
    job = worker.wait_for_state(submit(world.a_member, job_yaml("done", roles={"main": {"commands": ["echo kept"]}})), "SUCCEEDED")
    pod = TaskAttempt.objects.get(task__job_attempt__job=job).pod_name
    # A pod with pai's labels that no task attempt knows, as a crashed older version might leave.
    stray = worker.controller.backend.create_pod(
        PodSpec(name="stray-pod-0-0-0", node="gpu-node-1", commands="sleep 60", labels=pod_labels("stray", "main", 0, 0, 0))
    )
    assert stray.uid

    successor = Worker(world.cluster)  # relists on its first cycle, as after a restart
    try:
        successor.cycle()
        # The finished pod was deleted once it ended; the local backend keeps its log.
        names = {p.name for p in successor.controller.backend.list_pods()}
        assert pod not in names
        assert "kept" in successor.controller.backend.read_log(pod)
        successor.run_until(lambda: "stray-pod-0-0-0" not in {p.name for p in successor.controller.backend.list_pods()})
    finally:
        successor.close()


def test_a_configuration_change_reaches_a_running_leader(world, worker, submit):
    from apps.virtualclusters.services import create_virtual_cluster, grant_virtual_cluster, set_quota

    worker.wait_for_state(submit(world.a_member, job_yaml("before", roles={"main": {"commands": ["true"]}})), "SUCCEEDED")
    # A new VC made while the leader runs: its jobs are refused until the leader reads it, then run.
    set_quota(world.root, world.vc_a, [(world.gpu_node, 1), (world.cpu_node, 1)])
    vision = create_virtual_cluster(world.root, tenant=world.tenant_a, cluster=world.cluster, name="vision",
                                    cells=[(world.gpu_node, 1)])
    grant_virtual_cluster(world.root, vision, world.group_a)
    job = submit(world.a_member, job_yaml("after", vc="vision", roles={"main": {"gpu": 8, "commands": ["true"]}}))
    job = worker.wait_for_state(job, "SUCCEEDED", "FAILED")
    assert job.state == "SUCCEEDED"
