import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings

from tests.conftest import is_postgres

from .prometheus import DcgmExporter, Prometheus, free_port, wait_for

ROOT = Path(__file__).resolve().parents[2]
METRICS_TOKEN = "metrics-test-token"


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory):
    server = Prometheus(tmp_path_factory.mktemp("prometheus"))
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _no_scrapes_after_the_test(request):
    # The live server and Prometheus outlive the test: a scrape during a later test would
    # query a database that test does not allow (or holds locked).
    yield
    if "prometheus" in request.fixturenames:
        request.getfixturevalue("prometheus").stop_scraping()


@pytest.fixture(scope="session")
def dcgm_exporter():
    exporter = DcgmExporter()
    yield exporter
    exporter.stop()


@pytest.fixture(scope="session")
def pai_server(request, django_db_setup, tmp_path_factory):
    """The URL of a pai web server in a process of its own, as deployed: gunicorn with two
    workers in prometheus-client's multiprocess mode. Other processes can reach the test
    database only on PostgreSQL; on SQLite the tests use the live server thread instead."""
    if not is_postgres():
        yield request.getfixturevalue("live_server").url
        return
    db = settings.DATABASES["default"]
    multiproc = tmp_path_factory.mktemp("multiproc")
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
        "PROMETHEUS_MULTIPROC_DIR": str(multiproc),
        "PAI_DATA_DIR": str(tmp_path_factory.mktemp("pai-data")),
        "DB_CONN_MAX_AGE": "0",
        "PAI_METRICS_TOKEN": METRICS_TOKEN,
    }
    log = open(multiproc.parent / "gunicorn.log", "wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "python:pai.gunicorn", "pai.wsgi", f"--bind=127.0.0.1:{port}",
         "--workers=2"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"

    def up():
        assert process.poll() is None, (multiproc.parent / "gunicorn.log").read_text()
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    try:
        wait_for(up, what="gunicorn to start")
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


@pytest.fixture
def metrics_token(settings):
    # The live server thread reads the settings; the gunicorn server got the token at start.
    settings.PAI_METRICS_TOKEN = METRICS_TOKEN
    return METRICS_TOKEN


@pytest.fixture(autouse=True)
def _fresh_recorder(monkeypatch):
    # Other tests of this process drove backends and loops: their unpublished counts are not ours.
    from apps.monitoring import figures

    monkeypatch.setattr(figures, "recorder", figures.Recorder())
