"""OpenPAI's own job files, unchanged: what OpenPAI's REST server accepted, pai accepts.

The files under `jobfiles/` follow OpenPAI's documented examples (marketplace v2, the
distributed examples on HiveD clusters, webportal exports, FrameworkController retry
policies). What pai does not act on is kept in the stored config and reported, by path,
in the submit response's warnings.
"""

import pytest
import yaml

from apps.jobs.models import Job

from .conftest import job_document, jobfile, submit


def _submitted(world, api, name):
    client = api(world.a_member)
    response = submit(client, jobfile(name))
    assert response.status_code == 202, response.json()
    return client, response.json(), Job.objects.get(owner=world.a_member, name=yaml.safe_load(jobfile(name))["name"])


def test_a_marketplace_v2_job_with_numeric_versions_and_prerequisite_plugins(world, api):
    client, body, job = _submitted(world, api, "marketplace_v2.yaml")

    assert body["warnings"] == [
        "extras.com.microsoft.pai.runtimeplugin[0]: runtime plugin 'ssh' is kept; pai does not run runtime plugins yet",
        "prerequisites[1].plugin: kept; pai does not run prerequisite plugins yet",
        "prerequisites[1].require: kept; pai does not run prerequisite plugins yet",
        "prerequisites[1].callbacks: kept; pai does not run prerequisite plugins yet",
        "prerequisites[2].plugin: kept; pai does not run prerequisite plugins yet",
        "prerequisites[2].callbacks: kept; pai does not run prerequisite plugins yet",
        "taskRoles.taskrole.prerequisites: kept; pai does not run prerequisite plugins yet",
    ]
    assert job.launch["taskRoles"]["taskrole"]["commands"] == [
        "python mnist.py --epochs 2 --data https://example.com/mnist.tar.gz"
    ]
    assert job.launch["taskRoles"]["taskrole"]["image"] == "openpai/standard:python_3.6-pytorch_1.4.0-gpu"
    config = yaml.safe_load(client.get(f"/api/v2/jobs/a_member~{job.name}/config").content)
    # Kept as written: the numeric versions, the plugin fields, the task role's own keys.
    assert config["version"] == 1.0
    assert config["prerequisites"][0]["version"] == 1.0
    assert config["prerequisites"][1]["require"] == ["pytorch_image"]
    assert config["taskRoles"]["taskrole"]["prerequisites"] == ["mnist_data", "copy_results"]
    assert config["taskRoles"]["taskrole"]["protocolVersion"] == 2


def test_a_hived_distributed_job_with_sku_num_nulls_and_unknown_keys(world, api):
    client, body, job = _submitted(world, api, "hived_distributed.yaml")

    assert body["warnings"] == [
        "extras.hivedScheduler.jobWaitingTimeout: kept; pai does not act on it",
        "extras.hivedScheduler.taskRoles.worker.reservationId: kept; pai does not act on it",
        "defaults.storage: kept; pai does not act on it",
        "deployments[0].description: kept; pai does not act on it",
    ]
    # skuNum is OpenPAI's count of leaf cells per instance; skuType null lets pai choose.
    assert job.launch["taskRoles"]["master"] | {"commands": None} == {
        "image": "openpai/pai.example.horovod.mpi", "commands": None, "sku": "A100", "leafCellsPerInstance": 2,
    }
    assert (job.launch["taskRoles"]["worker"]["sku"], job.launch["taskRoles"]["worker"]["leafCellsPerInstance"]) == (
        "A100", 2,
    )
    assert job.launch["taskRoles"]["master"]["commands"][0] == "echo starting master"
    assert job.leaf_cells == {"A100": 4}
    assert (job.priority_class, job.priority, job.job_retry_count) == ("prod", 100, 1)
    hived = job.spec["extras"]["hivedScheduler"]["taskRoles"]
    assert hived["worker"] == {
        "skuNum": 2, "skuType": None, "pinnedCellId": None, "affinityGroupName": None, "reservationId": None,
    }


def test_a_webportal_export_is_accepted_as_exported(world, api):
    client, body, job = _submitted(world, api, "webportal_export.yaml")

    assert body["warnings"] == [
        "extras.com.microsoft.pai.runtimeplugin[0]: runtime plugin 'ssh' is kept; pai does not run runtime plugins yet",
    ]
    assert job.launch["taskRoles"]["taskrole"]["sku"] == "A100"
    assert job.leaf_cells == {"A100": 1}
    assert job.spec["extras"]["hivedScheduler"]["taskRoles"]["taskrole"] == {"skuNum": 1, "skuType": None}


def test_a_service_with_framework_controller_retry_policies(world, api):
    client, body, job = _submitted(world, api, "service_forever.yaml")

    assert body["warnings"] == []
    assert job.job_retry_count == -2
    assert job.gang_allocation is False
    assert job.spec["taskRoles"]["server"]["taskRetryCount"] == -1
    # Null completion counts take OpenPAI's defaults.
    assert job.spec["taskRoles"]["server"]["completion"] == {"minFailedInstances": 1, "minSucceededInstances": -1}


def _hived(role_settings):
    return {"hivedScheduler": {"jobPriorityClass": "test", "taskRoles": {"taskrole": role_settings}}}


@pytest.mark.parametrize(
    ("changes", "warnings"),
    [
        # Each alone was refused before; OpenPAI's REST server accepted every one.
        ({"version": 1.0}, []),
        ({"prerequisites": [{"name": "docker_image_0", "type": "dockerimage", "uri": "ubuntu", "version": 2}]}, []),
        ({"extras": _hived({"skuType": None})}, []),
        ({"extras": _hived({"skuNum": 1})}, []),
        ({"extras": _hived({"pinnedCellId": None, "affinityGroupName": None})}, []),
        ({"extras": _hived({"gpuType": "K80"})},
         ["extras.hivedScheduler.taskRoles.taskrole.gpuType: kept; pai does not act on it"]),
        ({"defaults": {"virtualCluster": "team_a", "team": "vision"}}, ["defaults.team: kept; pai does not act on it"]),
        ({"jobRetryCount": -1}, []),
        ({"jobRetryCount": -2}, []),
    ],
)
def test_each_form_openpai_accepted_is_accepted(world, api, changes, warnings):
    response = submit(api(world.a_member), job_document(**changes))

    assert response.status_code == 202, response.json()
    # The file's own runtime plugin is reported whatever the change.
    plugin = "extras.com.microsoft.pai.runtimeplugin[0]: runtime plugin 'ssh' is kept; pai does not run runtime plugins yet"
    assert [w for w in response.json()["warnings"] if w != plugin] == warnings


def test_task_retry_count_under_gang_allocation_is_kept_with_a_warning(world, api):
    document = job_document()
    document["taskRoles"]["taskrole"]["taskRetryCount"] = 3
    response = submit(api(world.a_member), document)

    assert response.status_code == 202, response.json()
    assert response.json()["warnings"][-1].startswith(
        "taskRoles.taskrole.taskRetryCount: kept; with gang allocation (the default) a failed task fails its attempt"
    )


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"jobRetryCount": -3},
         "jobRetryCount: must be an integer ≥ -2 (-1: retry failures without limit, -2: retry even after success)"),
        ({"extras": _hived({"skuNum": 0})}, "extras.hivedScheduler.taskRoles.taskrole.skuNum: must be an integer ≥ 1"),
        ({"extras": _hived({"skuNum": 2, "skuNumber": 1})},
         "extras.hivedScheduler.taskRoles.taskrole.skuNum: is 2 but skuNumber is 1; give one, or the same count"),
        ({"extras": _hived({"skuType": 5})}, "extras.hivedScheduler.taskRoles.taskrole.skuType: must be a SKU name"),
        ({"extras": {"hivedScheduler": {"jobPriorityClass": "urgent"}}},
         "extras.hivedScheduler.jobPriorityClass: must be one of prod, test, oppo"),
        ({"surprise": 1}, "surprise: is not a field of the job protocol"),
    ],
)
def test_what_openpai_refused_is_still_refused_naming_the_field(world, api, changes, error):
    response = submit(api(world.a_member), job_document(**changes))

    assert response.status_code == 400
    assert response.json()["code"] == "InvalidProtocolError"
    assert error in response.json()["message"]
