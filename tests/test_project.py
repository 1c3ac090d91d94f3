import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import urllib.request
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.conftest import deployment_env

ROOT = Path(__file__).resolve().parent.parent


def test_migrations_match_the_models(db):
    out = StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


def test_production_settings_pass_the_deployment_checks(tmp_path):
    env = {
        **deployment_env(os.environ),
        "PAI_ENV": "production",
        "PAI_BACKEND": "kubernetes",  # as the Helm chart deploys it
        "SECRET_KEY": "x" * 30 + "-a-long-random-production-key-0123456789",
        "ALLOWED_HOSTS": "pai.example.com",
        "PAI_PUBLIC_URL": "https://pai.example.com",
        "PAI_SECRETS_KEY": "uJ0o0Gd3Qm8m1Qb3yq7cT8PzG1d3nE6vV2wX9yZ0aB4=",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "PAI_METRICS_TOKEN": "a-long-random-metrics-token",
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


def test_production_refuses_to_start_without_its_public_address(tmp_path):
    """E-mails and chat pages link pai's pages: in production they must not fall back to a
    development address (issue 15), so the settings refuse to load without PAI_PUBLIC_URL."""
    env = {k: v for k, v in deployment_env(os.environ).items() if k != "PAI_PUBLIC_URL"}
    env.update({
        "PAI_ENV": "production", "SECRET_KEY": "x" * 50, "ALLOWED_HOSTS": "pai.example.com",
        "PAI_SECRETS_KEY": "uJ0o0Gd3Qm8m1Qb3yq7cT8PzG1d3nE6vV2wX9yZ0aB4=",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
    })
    show = "import pai.settings as s; print(s.PAI_PUBLIC_URL)"
    refused = subprocess.run([sys.executable, "-c", show], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0
    assert "PAI_PUBLIC_URL must be set when PAI_ENV=production" in refused.stderr
    env["PAI_PUBLIC_URL"] = "https://pai.example.com/"
    started = subprocess.run([sys.executable, "-c", show], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert (started.returncode, started.stdout.strip()) == (0, "https://pai.example.com"), started.stderr


def test_a_development_box_makes_its_own_secret_key_once(tmp_path):
    # Never a published default: a random key per data directory, private, the same on
    # every start, and the one key of processes starting together (web and worker).
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "PAI_SECRETS_KEY", "PAI_ENV", "DATABASE_URL")}
    show = "import pai.settings as s; print(s.SECRET_KEY, s.PAI_SECRETS_KEYS[0])"

    def start(data_dir):
        return subprocess.Popen(
            [sys.executable, "-c", show], cwd=ROOT, env={**env, "PAI_DATA_DIR": str(data_dir)},
            stdout=subprocess.PIPE, text=True,
        )

    data_dir = tmp_path / "box" / "var"
    together = [start(data_dir) for _ in range(3)]
    keys = {tuple(p.communicate(timeout=60)[0].split()) for p in together}
    assert len(keys) == 1
    [(secret_key, fernet_key)] = keys
    assert tuple(start(data_dir).communicate(timeout=60)[0].split()) == (secret_key, fernet_key)
    other = tuple(start(tmp_path / "other").communicate(timeout=60)[0].split())
    assert other[0] != secret_key and other[1] != fernet_key
    assert len(secret_key) >= 50 and secret_key != "dev-only-insecure-key-never-use-in-production-0123456789abcdef"
    key_file = data_dir / "secret_key"
    assert key_file.read_text().strip() == secret_key
    assert (stat.S_IMODE(key_file.stat().st_mode), stat.S_IMODE(data_dir.stat().st_mode)) == (0o600, 0o700)
    assert sorted(p.name for p in data_dir.iterdir()) == ["secret_key"]  # no temporary file left


@pytest.fixture(scope="module")
def fresh_data_dir(tmp_path_factory):
    """What `make run` does first on a fresh checkout, where `var/` does not exist: migrate."""
    data_dir = tmp_path_factory.mktemp("fresh") / "var"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "PAI_ENV")}
    env["PAI_DATA_DIR"] = str(data_dir)
    result = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return env, data_dir


def test_the_embedded_default_migrates_into_a_data_dir_that_does_not_exist_yet(fresh_data_dir):
    _, data_dir = fresh_data_dir
    assert (data_dir / "pai.sqlite3").stat().st_size > 0


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Serve:
    """`make serve` on a fresh data dir, its output read line by line as it comes."""

    def __init__(self, env):
        self.port = _free_port()
        self.env = env
        self.process = subprocess.Popen(
            ["make", "--no-print-directory", "serve", f"PORT={self.port}", f"PY={sys.executable}"], cwd=ROOT, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
            # A terminal's Ctrl-C, whatever started the tests: pytest run in the background of a
            # non-interactive shell (`make test &`) inherits SIGINT ignored, its children with it,
            # and a shell cannot trap a signal ignored on entry, so `make serve` never stopped.
            preexec_fn=_default_sigint,
        )
        self.lines = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.process.stdout), daemon=True)
        self.reader.start()

    @property
    def output(self):
        return "".join(self.lines)

    def wait_for(self, ready, what, timeout=120):
        deadline = time.monotonic() + timeout
        while not ready():
            assert self.process.poll() is None, f"make serve ended before {what}:\n{self.output}"
            assert time.monotonic() < deadline, f"{what} did not happen in {timeout} s:\n{self.output}"
            time.sleep(0.05)

    def web_answers(self):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=1)
        except OSError:
            return False
        return True

    def ctrl_c(self):
        os.killpg(self.process.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
        try:
            self.process.wait(timeout=60)
        finally:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
                # The web server and the worker run in sessions of their own: a test that
                # fails here leaves neither running for the rest of the day.
                for pid in self.leftovers():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        self.reader.join(10)
        return self.output

    def leftovers(self):
        """Processes still running with this data dir (the web server, the worker, its children)."""
        marker = f"PAI_DATA_DIR={self.env['PAI_DATA_DIR']}".encode()
        found = []
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
        return found


def _stopped_cleanly(serve, output):
    assert "Segmentation fault" not in output and "***" not in output and "Traceback" not in output, output
    assert output.rstrip().endswith("pai stopped."), output
    assert serve.leftovers() == [], output


def test_ctrl_c_stops_make_run_once_and_cleanly(fresh_data_dir):
    """Ctrl-C reaches the whole foreground process group of `make run` (make and its shell):
    the web server and the worker stop, each saying so once, and nothing crashes."""
    env, _ = fresh_data_dir
    serve = Serve(env)
    serve.wait_for(serve.web_answers, "the web server answering")
    serve.wait_for(lambda: "running." in serve.output, "the worker reporting it runs")
    output = serve.ctrl_c()
    _stopped_cleanly(serve, output)
    assert output.count("stopping.") == 1 and output.count("has stopped.") == 1, output


def test_an_early_ctrl_c_stops_make_run_cleanly_too(fresh_data_dir):
    """A Ctrl-C while the web server and the worker are still starting: both stop, the
    worker either before it starts or once it has (then saying so once), nothing crashes."""
    env, _ = fresh_data_dir
    serve = Serve(env)
    # The shell prints this once its trap is set, before it starts either server.
    serve.wait_for(lambda: "pai is starting at" in serve.output, "the start banner")
    output = serve.ctrl_c()
    _stopped_cleanly(serve, output)
    assert "running." not in output or (output.count("stopping.") == 1 and output.count("has stopped.") == 1), output


def _catches(pid, signum):
    """Whether the process has a handler for `signum` (its SigCgt mask in /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


def test_the_worker_keeps_a_stop_that_arrives_while_it_starts(fresh_data_dir):
    """SIGTERM as soon as the worker listens for it (long before Django and the cluster are
    up): it exits 0 without a traceback, either before starting or once started."""
    env, _ = fresh_data_dir
    worker = subprocess.Popen(
        [sys.executable, "-m", "pai.worker"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not _catches(worker.pid, signal.SIGTERM):
            assert worker.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        worker.send_signal(signal.SIGTERM)
        worker.send_signal(signal.SIGINT)  # a second Ctrl-C changes nothing
        output, _ = worker.communicate(timeout=120)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
    assert worker.returncode == 0 and "Traceback" not in output, output
    assert "stopped before it started" in output or (
        output.count("stopping.") == 1 and output.count("has stopped.") == 1
    ), output


def test_health_endpoints(client, db):
    assert client.get("/healthz").json() == {"status": "ok"}
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["checks"]["database"] == "ok"


def test_deployment_checks_warn_when_metrics_have_no_token(tmp_path):
    env = {
        **deployment_env(os.environ),
        "PAI_ENV": "production",
        "SECRET_KEY": "x" * 30 + "-a-long-random-production-key-0123456789",
        "ALLOWED_HOSTS": "pai.example.com",
        "PAI_PUBLIC_URL": "https://pai.example.com",
        "PAI_SECRETS_KEY": "uJ0o0Gd3Qm8m1Qb3yq7cT8PzG1d3nE6vV2wX9yZ0aB4=",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
    }
    env.pop("PAI_METRICS_TOKEN", None)
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode != 0
    assert "pai.W101" in result.stderr + result.stdout
