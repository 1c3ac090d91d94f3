"""The isolation matrix on the local backend: through the real worker, a job of one
tenant tries to read another tenant's secrets, logs and storage and pai's database
file, and fails; its own secrets, storage and logs work. Where no sandbox can be had,
the local backend runs one tenant's jobs only, and the others fail saying why.

Storages are host paths with sub-paths, one of them per user, as the demo has them:
the files land once in the right directory (issue 18: the sub-path was applied twice).
"""

import hashlib

import pytest
import yaml
from django.conf import settings
from django.core import checks
from django.core.cache import cache
from rest_framework.test import APIClient

from apps.jobs.models import TaskAttempt
from apps.storage.models import StorageConfig, StorageGrant, StorageServer
from tests.backends.conftest import require_sandbox
from tests.worker.conftest import Worker, job_yaml

A_SECRET = "team-a-token-5b1e"
B_SECRET = "team-b-token-77c0"
A_DATA = "team a's data 90f2"
A_LOG = "team a's log line 3d4c"
DB_CONTENT = "SQLite format 3 pai's database 1aa7"


@pytest.fixture(autouse=True)
def _data_dir(settings, tmp_path):
    settings.PAI_DATA_DIR = tmp_path / "var"
    settings.PAI_DATA_DIR.mkdir(mode=0o700)
    cache.clear()


@pytest.fixture
def start_worker(world):
    """Starts the worker (after the test chose its isolation), and stops every pod at the end."""
    started = []

    def start():
        started.append(Worker(world.cluster))
        return started[-1]

    yield start
    for w in started:
        for pod in w.controller.backend.list_pods():
            w.controller.backend.delete_pod(pod.name, grace_seconds=0)
        w.close()


def submit(user, name, commands, secret):
    document = yaml.safe_load(job_yaml(name, vc=f"team_{user.username[0]}", roles={"main": {"gpu": 0, "commands": commands}}))
    document["secrets"] = {"token": secret}
    client = APIClient()
    client.force_authenticate(user)
    response = client.post("/api/v2/jobs", data=yaml.safe_dump(document), content_type="text/yaml")
    assert response.status_code == 202, response.content
    return user.jobs.get(name=name)


def host_storage(world, tmp_path):
    """Per team, a host-path server with a team storage (sub-path `data`) and a per-user
    one (sub-path `home`), mounted into the team's jobs by default. Their root directory."""
    roots = {}
    for key, tenant, group in (("a", world.tenant_a, world.group_a), ("b", world.tenant_b, world.group_b)):
        root = tmp_path / "storage" / f"team-{key}"
        root.mkdir(parents=True)
        server = StorageServer.objects.create(tenant=tenant, name=f"team-{key}-local", kind="hostPath", root_path=str(root))
        for name, sub_path, per_user in (("shared", "data", False), ("home", "home", True)):
            config = StorageConfig.objects.create(
                tenant=tenant, server=server, name=f"team-{key}-{name}", sub_path=sub_path, mount_path=f"/mnt/{sub_path}",
                per_user_sub_path=per_user,
            )
            StorageGrant.objects.create(storage=config, group=group, is_default=True)
        roots[key] = root
    return roots


def attempt_of(job):
    return TaskAttempt.objects.get(task__job_attempt__job=job)


def test_a_job_reads_its_own_files_and_nothing_of_another_tenant_or_of_pai(world, start_worker, settings, tmp_path):
    require_sandbox()
    settings.PAI_LOCAL_SANDBOX = "required"
    worker = start_worker()
    roots = host_storage(world, tmp_path)
    database = settings.PAI_DATA_DIR / "pai.sqlite3"  # where the embedded default keeps it
    database.write_text(DB_CONTENT)

    a_job = submit(world.a_member, "a-secrets", [
        f'echo "{A_LOG}"',
        f'echo "{A_DATA}" > /mnt/data/shared.txt',
        f'echo "{A_DATA}" > /mnt/home/notes.txt',
        'echo "own secret: $(cat "$PAI_SECRETS_DIR/token")"',
        "sleep 120",
    ], A_SECRET)
    worker.wait_for_state(a_job, "RUNNING")
    backend = worker.controller.backend
    a_pod = backend.pods_dir / attempt_of(a_job).pod_name
    worker.run_until(lambda: "own secret" in backend.read_log(a_pod.name))
    a_log = backend.read_log(a_pod.name)
    assert f"{A_LOG}\n" in a_log and f"own secret: {A_SECRET}\n" in a_log
    targets = {
        "a secret": a_pod / "secrets" / "token",
        "a log": a_pod / "all.log",
        "a launch": a_pod / "launch.json",
        "a storage": roots["a"] / "data" / "shared.txt",
        "a home": roots["a"] / "home" / world.a_member.username / "notes.txt",
        "database": database,
        "task uids": settings.PAI_DATA_DIR / "local-task-uids.json",
    }
    checkout_key = settings.BASE_DIR / "var" / "secret_key"  # this checkout's development key, if it has one
    if checkout_key.is_file():
        targets["secret key"] = checkout_key
    for label, path in targets.items():
        assert path.is_file(), f"{label}: {path} must exist on the host for the test to mean anything"

    attempts = [f'if cat "{path}" >/dev/null 2>&1; then echo "{label}: read"; else echo "{label}: denied"; fi'
                for label, path in targets.items()]
    b_job = submit(world.b_member, "b-snoops", [
        *attempts,
        f'echo "pods: $(ls "{a_pod.parent}" | tr "\\n" " ")"',
        # Anywhere it can see outside the system directories.
        f'grep -rl "{A_SECRET}" / --exclude-dir={{proc,sys,dev,usr,opt}} 2>/dev/null | head -1 | sed "s/^/found: /"',
        'echo "own secret: $(sha256sum < "$PAI_SECRETS_DIR/token" | cut -c1-64)"',
        "echo mine > /mnt/data/b.txt && cat /mnt/data/b.txt",
        "echo my-notes > /mnt/home/b.txt && cat /mnt/home/b.txt",
        "ls /mnt/data /mnt/home",
    ], B_SECRET)
    b_job = worker.wait_for_state(b_job, "SUCCEEDED", "FAILED", timeout=60)
    assert b_job.state == "SUCCEEDED", b_job.attempts.get().exit_diagnostics
    log = backend.read_log(attempt_of(b_job).pod_name, stream="stdout")
    assert backend.read_log(attempt_of(b_job).pod_name, stream="stderr") == ""

    for label in targets:
        assert f"{label}: denied\n" in log, log
    assert f"pods: {attempt_of(b_job).pod_name} \n" in log  # its own, no other
    assert "found:" not in log
    assert A_SECRET not in log and A_DATA not in log and A_LOG not in log and DB_CONTENT not in log
    # Its own secret, storages and log work; its storages hold its own files only.
    assert f"own secret: {hashlib.sha256(B_SECRET.encode()).hexdigest()}\n" in log
    assert "mine\nmy-notes\n" in log
    assert log.endswith("/mnt/data:\nb.txt\n\n/mnt/home:\nb.txt\n")
    client = APIClient()
    client.force_authenticate(world.b_member)
    response = client.get("/api/v2/jobs/b_member~b-snoops/attempts/0/taskRoles/main/taskIndex/0/attempts/0/logs/all")
    assert response.status_code == 200
    assert "mine\nmy-notes\n" in b"".join(response.streaming_content).decode()
    # Each file landed once, in its storage's sub-path (and the user's directory for home).
    assert sorted(p.relative_to(roots["b"]).as_posix() for p in roots["b"].rglob("*.txt")) == [
        "data/b.txt", f"home/{world.b_member.username}/b.txt",
    ]
    assert sorted(p.relative_to(roots["a"]).as_posix() for p in roots["a"].rglob("*.txt")) == [
        "data/shared.txt", f"home/{world.a_member.username}/notes.txt",
    ]


def test_without_a_sandbox_a_second_tenant_s_job_fails_saying_why(world, start_worker, settings):
    settings.PAI_LOCAL_SANDBOX = "single-tenant"
    worker = start_worker()
    a_job = submit(world.a_member, "a-first", ["echo first"], A_SECRET)
    assert worker.wait_for_state(a_job, "SUCCEEDED", "FAILED").state == "SUCCEEDED"
    b_job = submit(world.b_member, "b-second", ["echo second"], B_SECRET)
    assert worker.wait_for_state(b_job, "SUCCEEDED", "FAILED").state == "FAILED"
    client = APIClient()
    client.force_authenticate(world.b_member)
    detail = client.get("/api/v2/jobs/b_member~b-second").json()
    diagnostics = detail["jobStatus"]["appExitDiagnostics"]
    assert "namespace pai-team-b: tasks cannot run sandboxed (isolation mode single-tenant)" in diagnostics
    assert "only one tenant's tasks run here" in diagnostics and "they are pai-team-a's" in diagnostics
    # Team A's jobs go on running.
    again = submit(world.a_member, "a-again", ["echo again"], A_SECRET)
    assert worker.wait_for_state(again, "SUCCEEDED", "FAILED").state == "SUCCEEDED"


@pytest.mark.parametrize(
    ("mode", "production", "expected"),
    [
        ("single-tenant", False, ("jobs.W001", "runs the jobs of one tenant only")),
        ("off", False, ("jobs.W002", "can read each other's secrets")),
        ("off", True, ("jobs.E002", "can read each other's secrets")),
    ],
)
def test_the_start_says_what_the_local_backend_isolates(settings, mode, production, expected):
    settings.PAI_BACKEND = "local"
    settings.PAI_LOCAL_SANDBOX = mode
    settings.PRODUCTION = production
    found = [(m.id, m.msg) for m in checks.run_checks(tags=[checks.Tags.security]) if m.id.startswith("jobs.")]
    assert len(found) == 1 and found[0][0] == expected[0] and expected[1] in found[0][1]


def test_the_start_is_silent_when_tasks_are_sandboxed(settings):
    require_sandbox()
    settings.PAI_BACKEND = "local"
    for mode in ("auto", "required"):
        settings.PAI_LOCAL_SANDBOX = mode
        assert [m for m in checks.run_checks(tags=[checks.Tags.security]) if m.id.startswith("jobs.")] == []
