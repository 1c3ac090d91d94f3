"""Job secrets and registry credentials: encrypted at rest, never returned, never logged."""

import logging
import os
import pathlib
import subprocess
import sys

import pytest
import yaml
from cryptography.fernet import Fernet
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from apps.jobs.models import Job, JobSecret
from pai.security import SecretsKeyError
from tests.factories import PASSWORD

from .conftest import as_text, every_row_of_every_table, login

pytestmark = pytest.mark.django_db

ROOT = pathlib.Path(__file__).resolve().parents[2]
JOBFILE = (ROOT / "tests" / "jobs" / "jobfiles" / "private_image_secrets.yaml").read_text()
PLAINTEXTS = ("s3cr3t-Pa55w0rd", "sk-live-0123456789")


def submit_with_secrets(api):
    token = login(api(), "a_member", PASSWORD).json()["token"]
    client = api()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    response = client.post("/api/v2/jobs", JOBFILE, content_type="text/yaml")
    assert response.status_code == 202, response.json()
    return client


def test_a_submitted_jobs_secrets_are_nowhere_in_the_database_but_encrypted(world, api, caplog):
    caplog.set_level(logging.DEBUG)
    client = submit_with_secrets(api)

    job = Job.objects.get(name="private_registry_job")
    rows = list(every_row_of_every_table())
    found = [(table, column) for table, column, value in rows if any(secret in as_text(value) for secret in PLAINTEXTS)]
    assert found == []
    # The scan does read the job's columns: the registry user name, not a secret, is there.
    assert any("team-a-puller" in as_text(value) for table, _, value in rows if table == "jobs_job")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {connection.ops.quote_name('values')}, image_auth FROM jobs_jobsecret")
        stored = cursor.fetchall()
    assert len(stored) == 1
    assert all(as_text(column).startswith("gAAAAA") for column in stored[0])  # Fernet tokens

    # The worker's reading of the row gives the plain values back.
    secret = Job.objects.select_related("secret").get(pk=job.pk).secret
    assert secret.values == {"registry_password": "s3cr3t-Pa55w0rd", "api_key": "sk-live-0123456789"}
    assert secret.image_auth["private_image"]["password"] == "s3cr3t-Pa55w0rd"

    # No route answers them, and nothing logged them.
    key = "a_member~private_registry_job"
    answers = [
        client.get(f"/api/v2/jobs/{key}"),
        client.get(f"/api/v2/jobs/{key}/config"),
        client.get(f"/api/v2/jobs/{key}/config", HTTP_ACCEPT="application/json"),
        client.get("/api/v2/jobs"),
        client.get("/api/v2/jobs?username=a_member"),
    ]
    for answer in answers:
        assert answer.status_code == 200
        assert not any(secret in answer.content.decode() for secret in PLAINTEXTS)
    assert not any(secret in caplog.text for secret in PLAINTEXTS)


def test_an_old_key_still_decrypts_after_rotation_and_a_wrong_key_fails_loudly(world, api, settings):
    submit_with_secrets(api)
    new_key = Fernet.generate_key().decode()

    settings.PAI_SECRETS_KEYS = [new_key, *settings.PAI_SECRETS_KEYS]
    secret = JobSecret.objects.get()
    assert secret.image_auth["private_image"]["password"] == "s3cr3t-Pa55w0rd"
    secret.save()  # re-encrypted with the new key

    settings.PAI_SECRETS_KEYS = [new_key]
    assert JobSecret.objects.get().values["api_key"] == "sk-live-0123456789"

    settings.PAI_SECRETS_KEYS = [Fernet.generate_key().decode()]
    with pytest.raises(SecretsKeyError):
        JobSecret.objects.get()


def test_production_refuses_to_start_without_a_secrets_key(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PAI_SECRETS_KEY"}
    env.update({"PAI_ENV": "production", "SECRET_KEY": "y" * 60, "ALLOWED_HOSTS": "pai.example.com",
                "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"})
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=120)

    assert result.returncode != 0
    assert "PAI_SECRETS_KEY must be set" in result.stderr


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_the_migration_encrypts_the_rows_it_finds_and_decrypts_them_going_back(world):
    from apps.jobs import services as job_services

    job_services.submit_job(world.a_member, yaml.safe_load(JOBFILE))
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes("jobs")
    try:
        executor.migrate([("jobs", "0004_job_shares")])
        assert "s3cr3t-Pa55w0rd" in raw_secret_columns()

        executor = MigrationExecutor(connection)
        executor.migrate(latest)
        columns = raw_secret_columns()
        assert "s3cr3t-Pa55w0rd" not in columns and columns.startswith("gAAAAA")
        assert JobSecret.objects.get().image_auth["private_image"]["password"] == "s3cr3t-Pa55w0rd"
    finally:
        # Back to every app's latest state: going back in jobs also unapplied the migrations of
        # other apps that depend on its later ones (monitoring's), which later tests need.
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())


def raw_secret_columns():
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {connection.ops.quote_name('values')}, image_auth FROM jobs_jobsecret")
        return " ".join(str(as_text(value)) for row in cursor.fetchall() for value in row)


def test_a_malformed_secrets_key_fails_the_system_checks(tmp_path):
    env = {**os.environ, "PAI_SECRETS_KEY": "not-a-fernet-key", "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=120)

    assert result.returncode != 0
    assert "pai.E001" in result.stderr and "PAI_SECRETS_KEY must be a comma-separated list of Fernet keys" in result.stderr
