import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

from django.core.management import call_command

ROOT = Path(__file__).resolve().parent.parent


def test_migrations_match_the_models(db):
    out = StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


def test_production_settings_pass_the_deployment_checks(tmp_path):
    env = {
        **os.environ,
        "PAI_ENV": "production",
        "SECRET_KEY": "x" * 30 + "-a-long-random-production-key-0123456789",
        "ALLOWED_HOSTS": "pai.example.com",
        "PAI_SECRETS_KEY": "uJ0o0Gd3Qm8m1Qb3yq7cT8PzG1d3nE6vV2wX9yZ0aB4=",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_refuses_to_start_without_a_secret_key(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    env.update({"PAI_ENV": "production", "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"})
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_the_embedded_default_migrates_into_a_data_dir_that_does_not_exist_yet(tmp_path):
    # What `make run` does first on a fresh checkout, where `var/` does not exist.
    data_dir = tmp_path / "fresh" / "var"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "PAI_ENV")}
    env["PAI_DATA_DIR"] = str(data_dir)
    result = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (data_dir / "pai.sqlite3").stat().st_size > 0


def test_health_endpoints(client, db):
    assert client.get("/healthz").json() == {"status": "ok"}
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["checks"]["database"] == "ok"
