"""OpenPAI's own CLI and JS SDK (`@microsoft/openpai-js-sdk` from npm, its `pai` command)
against a live pai: a server process (gunicorn) and a worker process (`run_scheduler`) on
their own SQLite database with the demo data, reached over HTTP exactly as the CLI and SDK
reach OpenPAI, with no change to either.

The npm package is installed by `make test` (`npm ci` on this directory's pinned lock
file); the fixture installs it when it is missing.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.jobs.openpai_swagger import JOB_ATTEMPT, JOB_DETAIL, JOB_EVENTS, assert_valid

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PAI = HERE / "node_modules" / ".bin" / "pai"
DEMO_JOB = ROOT / "fixtures" / "demo-job.yaml"
USER, PASSWORD = "carol", "pai-carol"  # the demo's member of Team A


def _install_cli():
    if not PAI.exists():
        npm = shutil.which("npm")
        assert npm, "npm is needed (make system-deps installs nodejs and npm)"
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--silent"], cwd=HERE, check=True, timeout=600)


def _env(tmp, **extra):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "PAI_ENV")}
    return {**env, "DATABASE_URL": f"sqlite:///{tmp / 'pai.sqlite3'}", "PAI_DATA_DIR": str(tmp / "data"),
            "HOME": str(tmp / "home"), "PAI_SCHEDULER_LEASE_SECONDS": "3", **extra}


def _manage(env, *args):
    subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True,
                   timeout=300)


def _start(env, log, *command):
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def _stop(process):
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _listening_port(process, log, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(r"Listening at: http://127\.0\.0\.1:(\d+)", log.read_text(errors="replace"))
        if found:
            return int(found.group(1))
        assert process.poll() is None, log.read_text(errors="replace")
        time.sleep(0.1)
    raise AssertionError("gunicorn did not start:\n" + log.read_text(errors="replace"))


@pytest.fixture(scope="module")
def live_pai(tmp_path_factory):
    """A pai server and worker, as deployed, on the demo data; yields the server's plain URL."""
    _install_cli()
    tmp = tmp_path_factory.mktemp("live-pai")
    (tmp / "home").mkdir()
    env = _env(tmp)
    # One process for both (Django starts once): the schema, then the demo teams, cluster and users.
    _manage(env, "shell", "-c", "from django.core.management import call_command as c; "
                                "c('migrate', interactive=False, verbosity=0); c('seed_demo', verbosity=0)")
    server_log, worker_log = tmp / "gunicorn.log", tmp / "worker.log"
    server = _start(env, server_log, sys.executable, "-m", "gunicorn", "pai.wsgi:application",
                    "--bind", "127.0.0.1:0", "--workers", "1", "--threads", "4")
    worker = _start(env, worker_log, sys.executable, "manage.py", "run_scheduler", "--tick", "0.2")
    try:
        port = _listening_port(server, server_log)
        yield {"url": f"http://127.0.0.1:{port}", "env": env, "tmp": tmp, "logs": (server_log, worker_log)}
    finally:
        _stop(server)
        _stop(worker)


def _login(url):
    body = urllib.parse.urlencode({"username": USER, "password": PASSWORD}).encode()
    with urllib.request.urlopen(f"{url}/api/v2/authn/basic/login", data=body, timeout=30) as response:
        return json.load(response)["token"]


@pytest.fixture(scope="module")
def cli(live_pai):
    """Runs OpenPAI's `pai` command and the SDK script (`sdk.js`) as the demo user would."""

    def run(*args, program=None, warning=""):
        command = [str(PAI), *args] if program is None else ["node", str(HERE / program), "pai", *args]
        done = subprocess.run(command, cwd=live_pai["tmp"], env=live_pai["env"], capture_output=True, text=True,
                              timeout=120)
        # OpenPAI's CLI prints errors and still exits 0: anything on stderr fails the step,
        # but for the warning the step is known to print.
        assert done.returncode == 0 and warning in done.stderr, (args, done.stdout, done.stderr)
        assert not done.stderr.replace(warning, "").strip(), (args, done.stdout, done.stderr)
        return done.stdout

    def sdk(*steps):
        return json.loads(run(*steps, program="sdk.js"))

    token = _login(live_pai["url"])
    # The CLI's first run warns that it has no cluster file yet, then writes one.
    clusters = live_pai["tmp"] / "home" / ".openpai" / "clusters.json"
    run("addc", live_pai["url"], USER, token, "--alias", "pai",
        warning=f"ENOENT: no such file or directory, open '{clusters}'")
    run.sdk = sdk
    return run


def test_the_cli_adds_the_cluster_with_its_plain_url(live_pai, cli):
    stored = json.loads((live_pai["tmp"] / "home" / ".openpai" / "clusters.json").read_text())
    cluster = stored[0]["cluster"]
    # The CLI derives the REST base itself, OpenPAI's way: <host>/rest-server. pai serves it.
    assert cluster["pai_uri"] == live_pai["url"]
    assert cluster["rest_server_uri"] == live_pai["url"].removeprefix("http://") + "/rest-server"
    assert "pai" in cli("listc")


def test_the_sdk_lists_vcs_and_their_sku_types(cli):
    answer = cli.sdk("vcs")["vcs"]
    assert set(answer["vcs"]) == {"team_a"}
    assert answer["vcs"]["team_a"]["resourcesGuaranteed"]["gpu"] > 0
    sku_types = answer["skuTypes"]["team_a"]
    assert sku_types and all(set(unit) == {"cpu", "memory", "gpu"} for unit in sku_types.values())
    assert any(unit["gpu"] > 0 for unit in sku_types.values())


def test_the_cli_lists_the_storages_the_user_may_mount(cli):
    # Team A's two storages, which its jobs mount by default; nothing of Team B's. (The
    # CLI's `getinfo` calls a function its own SDK lacks, so it fails whatever the server.)
    listed = json.loads(cli("lists", "pai"))["storages"]
    assert {(s["name"], s["mountPath"], s["default"]) for s in listed} == {
        ("team-a-data", "/mnt/data", True), ("team-a-home", "/mnt/home", True)}


def test_a_job_file_submitted_listed_followed_logged_and_tagged(cli):
    submitted = cli("subj", "pai", str(DEMO_JOB))
    assert "hello-pai" in submitted
    listed = cli("listj", "pai")
    assert "hello-pai" in listed and USER in listed
    detail = json.loads(cli("getj", "pai", "hello-pai"))
    assert_valid(JOB_DETAIL, detail)

    # One SDK session: follow the job to its end, read its log, everything else, tag it.
    answer = cli.sdk("follow:hello-pai:90", "logs:hello-pai", "details:hello-pai", "tag:hello-pai:baseline")
    followed = answer["follow"]
    assert followed["detail"]["jobStatus"]["state"] == "SUCCEEDED", followed
    assert followed["seen"][-1] == "SUCCEEDED"
    assert_valid(JOB_DETAIL, followed["detail"])

    logs = answer["logs"]
    assert [location["name"] for location in logs["locations"]["locations"]] == ["all"]
    assert "hello from pai" in logs["texts"]["all"]
    assert logs["attempts"]["attempts"][0]["attemptState"] == "SUCCEEDED"

    details = answer["details"]
    assert_valid(JOB_DETAIL, details["firstAttempt"])
    assert details["config"]["name"] == "hello-pai" and details["config"]["parameters"]["greeting"]
    assert_valid(JOB_EVENTS, details["events"])
    for attempt in details["attempts"]:
        assert_valid(JOB_ATTEMPT, attempt)

    tagged = answer["tag"]
    assert tagged["tagged"] == tagged["listed"] == ["baseline"] and tagged["after"] == []


def test_a_running_job_is_stopped_through_the_sdk(cli):
    cli("subj", "pai", str(HERE / "long_job.yaml"))
    answer = cli.sdk("waitRunning:long-training:90", "stop:long-training")
    running, stopped = answer["waitRunning"], answer["stop"]
    assert running["detail"]["jobStatus"]["state"] == "RUNNING", running
    assert stopped["detail"]["jobStatus"]["state"] == "STOPPED"
    assert stopped["detail"]["jobStatus"]["appExitSpec"]["phrase"] == "StopFrameworkRequested"
    assert_valid(JOB_DETAIL, stopped["detail"])
