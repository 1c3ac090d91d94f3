"""Real-world-shaped OpenPAI job files, submitted through the API and read back."""

import pytest
import yaml

from apps.audit.models import AuditEntry
from apps.jobs.models import Job, JobSecret

from .conftest import job_document, jobfile, submit


def test_single_gpu_job_is_queued_with_its_sku_and_priority(world, api):
    client = api(world.a_member)
    response = submit(client, jobfile("single_gpu.yaml"))

    assert response.status_code == 202, response.json()
    body = response.json()
    assert body["name"] == "mnist_single_gpu"
    assert body["virtualCluster"] == "team_a"
    assert body["warnings"] == [
        "extras.com.microsoft.pai.runtimeplugin[0]: runtime plugin 'ssh' is kept; pai does not run runtime plugins yet"
    ]
    job = Job.objects.get(name="mnist_single_gpu")
    assert (job.state, job.sub_state, job.execution_type) == ("WAITING", "AttemptCreationPending", "START")
    assert not job.attempts.exists()
    assert (job.priority_class, job.priority, job.gang_allocation) == ("prod", 100, True)
    assert job.tenant == world.tenant_a
    assert job.leaf_cells == {"A100": 1}
    assert (job.cell_gpu, job.cell_cpu, job.cell_memory_mb) == (1, 8, 65536)
    assert AuditEntry.objects.filter(action="job.submit", object_id=str(job.pk), actor=world.a_member).exists()

    summary = client.get("/api/v2/jobs").json()
    assert [j["name"] for j in summary] == ["mnist_single_gpu"]
    row = summary[0]
    assert row["username"] == "a_member"
    assert row["state"] == "WAITING" and row["subState"] == "AttemptCreationPending"
    assert row["totalGpuNumber"] == 1 and row["totalTaskNumber"] == 1 and row["totalTaskRoleNumber"] == 1
    assert row["jobPriority"] == "prod" and row["virtualCluster"] == "team_a"
    assert row["retryDetails"] == {"user": 0, "platform": 0, "resource": 0}
    assert isinstance(row["submissionTime"], int) and row["createdTime"] == row["submissionTime"]
    assert row["completedTime"] is None and row["appExitCode"] is None

    detail = client.get("/api/v2/jobs/a_member~mnist_single_gpu").json()
    assert detail["jobStatus"]["state"] == "WAITING"
    assert detail["taskRoles"] == {"taskrole": {"taskRoleStatus": {"name": "taskrole"}, "taskStatuses": []}}


def test_distributed_job_renders_parameters_deployments_and_prerequisites(world, api):
    client = api(world.a_member)
    response = submit(client, jobfile("distributed_tf.yaml"))

    assert response.status_code == 202, response.json()
    job = Job.objects.get(name="tf_distributed_cifar10")
    worker = job.launch["taskRoles"]["worker"]
    assert worker["commands"] == [
        "pip install -r requirements.txt",
        "wget https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz -O /tmp/cifar10.tar.gz",
        "python benchmarks/tf_cnn_benchmarks.py --job_name=worker --batch_size=64 --num_batches=1000 "
        "--train_dir=/mnt/output/cifar10",
        "cp -r /tmp/train /mnt/models/cifar10",
    ]
    assert job.launch["taskRoles"]["ps"]["commands"][:2] == [
        "echo starting parameter server",
        "git clone https://github.com/tensorflow/benchmarks benchmarks",
    ]
    # A CPU-only parameter server takes a CPU leaf cell; each worker 2 A100 cells.
    assert job.launch["taskRoles"]["ps"]["sku"] == "CPU"
    assert job.leaf_cells == {"A100": 4, "CPU": 1}
    assert (job.total_gpu, job.total_tasks, job.total_task_roles, job.job_retry_count) == (4, 3, 2, 2)

    config = yaml.safe_load(client.get("/api/v2/jobs/a_member~tf_distributed_cifar10/config").content)
    # The stored document keeps the placeholders as written, with defaults filled in.
    assert config["taskRoles"]["worker"]["commands"][0] == "wget <% $data.uri[0] %> -O /tmp/cifar10.tar.gz"
    assert config["taskRoles"]["worker"]["completion"] == {"minSucceededInstances": 2, "minFailedInstances": 1}
    assert config["taskRoles"]["ps"]["completion"] == {"minFailedInstances": 1, "minSucceededInstances": -1}
    assert config["taskRoles"]["ps"]["extraContainerOptions"] == {"shmMB": 512}
    assert config["deployments"][0]["name"] == "prod"


def test_secrets_are_masked_everywhere_and_kept_apart_for_the_worker(world, api):
    client = api(world.a_member)
    response = submit(client, jobfile("private_image_secrets.yaml"))

    assert response.status_code == 202, response.json()
    job = Job.objects.get(name="private_registry_job")
    for text in (job.protocol_text, str(job.spec), str(job.launch),
                 client.get("/api/v2/jobs/a_member~private_registry_job/config").content.decode(),
                 str(client.get("/api/v2/jobs/a_member~private_registry_job/config",
                                HTTP_ACCEPT="application/json").json()),
                 str(list(AuditEntry.objects.values_list("changes", flat=True)))):
        assert "s3cr3t-Pa55w0rd" not in text
        assert "sk-live-0123456789" not in text
    assert job.spec["secrets"] == {"registry_password": "******", "api_key": "******"}
    assert job.spec["prerequisites"][0]["auth"]["password"] == "<% $secrets.registry_password %>"
    secret = JobSecret.objects.get(job=job)
    assert secret.values == {"registry_password": "s3cr3t-Pa55w0rd", "api_key": "sk-live-0123456789"}
    assert secret.image_auth == {
        "private_image": {
            "username": "team-a-puller", "password": "s3cr3t-Pa55w0rd", "registryuri": "myregistry.azurecr.io",
        }
    }
    # Secrets are not substituted into commands.
    assert job.launch["taskRoles"]["trainer"]["commands"] == ["python train.py --api-key-file /run/secrets/api_key"]


def test_a_literal_registry_password_is_masked_too(world, api):
    document = job_document("private_image_secrets.yaml", secrets=None)
    document["prerequisites"][0]["auth"]["password"] = "literal-pass"
    response = submit(api(world.a_member), document)

    assert response.status_code == 202, response.json()
    job = Job.objects.get(name="private_registry_job")
    assert "literal-pass" not in job.protocol_text
    assert job.spec["prerequisites"][0]["auth"]["password"] == "******"
    assert job.secret.image_auth["private_image"]["password"] == "literal-pass"


def test_storages_and_plugins_are_kept_and_reported_as_warnings(world, api):
    client = api(world.a_member)
    response = submit(client, jobfile("storage_plugins.yaml"))

    assert response.status_code == 202, response.json()
    warnings = response.json()["warnings"]
    assert any("runtime plugin 'tensorboard'" in w for w in warnings)
    # pai sends job status e-mails: the field is acted on, so nothing to warn about.
    assert not [w for w in warnings if "jobStatusChangeNotification" in w]
    assert "prerequisites[1].callbacks: kept; pai does not run prerequisite plugins yet" in warnings
    job = Job.objects.get(name="cpu_preprocess_with_storage")
    assert job.warnings == warnings
    assert job.launch["storages"] == [{"name": "team-a-data", "mountPath": "/mnt/data"}]
    assert job.leaf_cells == {"CPU": 2}
    assert job.total_gpu == 0
    config = client.get("/api/v2/jobs/a_member~cpu_preprocess_with_storage/config", HTTP_ACCEPT="application/json")
    assert config["Content-Type"].startswith("application/json")
    plugins = config.json()["extras"]["com.microsoft.pai.runtimeplugin"]
    assert [p["plugin"] for p in plugins] == ["ssh", "tensorboard"]


def test_a_job_without_storages_mounts_the_users_default_storages(world, api):
    document = job_document()
    response = submit(api(world.a_member), document)

    assert response.status_code == 202
    job = Job.objects.get(name=document["name"])
    assert job.launch["storages"] == [{"name": "team-a-data", "mountPath": world.storage_a.mount_path}]


@pytest.mark.parametrize("content_type", ["text/yaml", "application/json"])
def test_yaml_and_json_bodies_are_both_accepted(world, api, content_type):
    response = submit(api(world.a_member), job_document(), content_type=content_type)

    assert response.status_code == 202, response.json()
    assert Job.objects.filter(name="mnist_single_gpu").count() == 1


def test_the_default_vc_is_the_first_granted_one_by_name(world, api):
    response = submit(api(world.b_member), job_document(defaults=None))

    assert response.status_code == 202, response.json()
    assert response.json()["virtualCluster"] == "team_b"
    assert Job.objects.get().tenant == world.tenant_b


def test_an_openpai_client_logs_in_and_submits_with_its_bearer_token(world):
    from rest_framework.test import APIClient

    client = APIClient()
    login = client.post("/api/v2/authn/basic/login", {"username": "a_member", "password": world.password})
    assert login.status_code == 200, login.content
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {login.json()['token']}")

    response = client.post("/api/v2/jobs", jobfile("distributed_tf.yaml"), content_type="text/yaml")
    assert response.status_code == 202, response.json()
    assert [job["name"] for job in client.get("/api/v2/jobs").json()] == ["tf_distributed_cifar10"]
    config = client.get("/api/v2/jobs/a_member~tf_distributed_cifar10/config")
    assert yaml.safe_load(config.content)["name"] == "tf_distributed_cifar10"
