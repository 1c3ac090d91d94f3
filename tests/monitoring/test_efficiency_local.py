"""The local backend reads GPU utilisation from nvidia-smi when the machine has it.

The machine under test has no GPU: a stand-in `nvidia-smi` on PATH answers the query pai
sends, in nvidia-smi's CSV form, for two devices (one reports no figure)."""

import os

import pytest

from apps.monitoring.efficiency import sample_cluster
from apps.monitoring.models import TaskUtilization
from tests.worker.conftest import job_yaml, submit, worker  # noqa: F401 (fixtures)

NVIDIA_SMI = """#!/bin/sh
[ "$1 $2" = "--query-gpu=index,utilization.gpu --format=csv,noheader,nounits" ] || exit 9
printf '0, 87\\n1, 41\\n2, [N/A]\\n'
"""


@pytest.fixture
def nvidia_smi(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(NVIDIA_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def test_a_local_task_gets_the_utilisation_of_its_own_devices(world, worker, submit, nvidia_smi, settings, tmp_path):
    settings.PAI_DATA_DIR = tmp_path
    two = submit(world.a_member, job_yaml("two", roles={"main": {"gpu": 2, "commands": ["sleep 600"]}}))
    worker.wait_for_state(two, "RUNNING")
    figures = sample_cluster(worker.cluster, worker.controller.backend)
    row = TaskUtilization.objects.get(job_id=two.pk)
    assert sorted(row.task_attempt.device_indices) == [0, 1]  # the first job on an empty node
    assert (row.source, row.percent) == ("nvidia-smi", (87.0 + 41.0) / 2)
    assert list(figures) == [row.pk]

    # A task on a device nvidia-smi has no figure for: its CPU use stands in.
    row.task_attempt.device_indices = [1, 2]
    row.task_attempt.save(update_fields=["device_indices"])
    sample_cluster(worker.cluster, worker.controller.backend)
    row.refresh_from_db()
    assert (row.source, row.samples) == ("cpu", 2) and row.percent < 50
