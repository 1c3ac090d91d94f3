from apps.jobs.choices import JobState
from apps.jobs.models import Job
from apps.jobs.selectors import resources_in_use_by_vc


def _job(world, name, state, placement=None, gpu=8, cpu=64, memory=524288):
    return Job.objects.create(
        owner=world.a_member, tenant=world.tenant_a, virtual_cluster=world.vc_a, name=name,
        protocol_text="", spec={}, state=state, placement=placement,
        cell_gpu=gpu, cell_cpu=cpu, cell_memory_mb=memory,
    )


def test_resources_in_use_count_running_and_placed_waiting_jobs_only(world):
    _job(world, "running", JobState.RUNNING)
    _job(world, "placed", JobState.WAITING, placement={"gpu-node-1": [0, 1]}, gpu=2, cpu=16, memory=131072)
    _job(world, "queued", JobState.WAITING)
    _job(world, "done", JobState.SUCCEEDED)

    usage = resources_in_use_by_vc([world.vc_a, world.vc_b])

    assert usage == {
        world.vc_a.pk: {"cpu": 80, "memory": 655360, "gpu": 10},
        world.vc_b.pk: {"cpu": 0, "memory": 0, "gpu": 0},
    }
