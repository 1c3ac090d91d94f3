import os

import pytest
from django.conf import settings

from scheduler.backends.local.sandbox import probe


def pytest_report_header(config):
    found = probe()
    sandbox = f"no ({found})" if isinstance(found, str) else "yes"
    return [f"database: {settings.DATABASES['default']['ENGINE']}", f"local backend sandbox: {sandbox}"]


@pytest.fixture(autouse=True)
def _test_settings(settings):
    from django.core.cache import cache

    # Throttle counters and login lockouts live in the cache; ids repeat across tests.
    cache.clear()
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    # Password hashing is deliberately slow; tests create many users.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Where no sandbox can be had (not root), the local backend would run one tenant only,
    # and most tests run two: they run unisolated there. The sandbox's own tests say so
    # (tests/backends/conftest.py: require_sandbox); CI runs as root, with the sandbox.
    if isinstance(probe(), str):
        settings.PAI_LOCAL_SANDBOX = "off"


@pytest.fixture
def tasks_inline(monkeypatch):
    """django-q2 runs the tasks queued with `async_task` at once, in this process (its sync mode)."""
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", True)


def is_postgres():
    return settings.DATABASES["default"]["ENGINE"].endswith("postgresql")


requires_postgres = pytest.mark.skipif(not is_postgres(), reason="needs PostgreSQL (set DATABASE_URL)")


def redis_url_for_tests():
    """The Redis database this test process may flush: REDIS_URL_FOR_TESTS (db 15 by default)
    for a run in one process; under pytest-xdist each worker counts down from it (gw0 the
    given db, gw1 the one below, ...), so that one worker's flush never empties another's
    keys. Counting down stays within Redis's 16 databases from the default 15."""
    from urllib.parse import urlsplit, urlunsplit

    url = os.environ.get("REDIS_URL_FOR_TESTS", "redis://127.0.0.1:6379/15")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker.removeprefix("gw") or 0)
    if index == 0:
        return url
    parts = urlsplit(url)
    db = int(parts.path.strip("/") or 0) - index
    assert db >= 0, f"REDIS_URL_FOR_TESTS={url}: no Redis database left for xdist worker {worker}"
    return urlunsplit(parts._replace(path=f"/{db}"))


class World:
    """Two teams on one cluster, the shape of the demo: what most tests start from.

    cluster `local`: rack-1 with gpu-node-1..4 (8 × A100 each, 2 GPUs per switch),
    cpu-node-1..2 (8 × CPU cells of 4 cpu). Team A: VC `team_a` (2 × A100-NODE,
    1 × CPU-NODE), group `team_a`, storage `team-a-data`. Team B: VC `team_b`
    (1 × A100-NODE, 4 × A100-SWITCH, 1 × CPU-NODE), group `team_b`, storage `team-b-data`.
    Users: `root` (platform admin), `a_admin`/`a_member`, `b_admin`/`b_member`.
    """

    def __init__(self):
        from apps.accounts.models import Group
        from apps.accounts.roles import ADMIN_GROUP
        from apps.tenants.models import Membership
        from tests import factories as f

        self.password = f.PASSWORD
        # A transactional test before this one may have flushed the migration's rows.
        for name in ("default", "admingroup"):
            Group.objects.get_or_create(name=name, defaults={"is_builtin": True})
        self.cluster = f.ClusterFactory(name="local")
        c = self.cluster
        self.a100 = f.CellTypeFactory(cluster=c, name="A100", gpu=1, cpu=8, memory_mb=65536)
        self.switch = f.CellTypeFactory(cluster=c, name="A100-SWITCH", child=self.a100, child_count=2)
        self.gpu_node = f.CellTypeFactory(cluster=c, name="A100-NODE", child=self.switch, child_count=4, is_node_level=True)
        self.rack = f.CellTypeFactory(cluster=c, name="A100-RACK", child=self.gpu_node, child_count=4)
        self.cpu = f.CellTypeFactory(cluster=c, name="CPU", gpu=0, cpu=4, memory_mb=16384, device_resource="")
        self.cpu_node = f.CellTypeFactory(cluster=c, name="CPU-NODE", child=self.cpu, child_count=8, is_node_level=True)
        rack = f.PhysicalCellFactory(cluster=c, cell_type=self.rack, address="rack-1")
        for i in range(1, 5):
            f.PhysicalCellFactory(cluster=c, cell_type=self.gpu_node, address=f"gpu-node-{i}", parent=rack)
            f.NodeFactory(cluster=c, name=f"gpu-node-{i}", gpu_capacity=8, cpu_capacity=64, memory_mb_capacity=524288)
        for i in range(1, 3):
            f.PhysicalCellFactory(cluster=c, cell_type=self.cpu_node, address=f"cpu-node-{i}")
            f.NodeFactory(cluster=c, name=f"cpu-node-{i}", cpu_capacity=32, memory_mb_capacity=131072)

        self.root = f.UserFactory(username="root")
        self.root.groups.add(Group.objects.get(name=ADMIN_GROUP))
        self.root.is_staff = True
        self.root.save()
        self.tenant_a = f.TenantFactory(slug="team-a", name="Team A")
        self.tenant_b = f.TenantFactory(slug="team-b", name="Team B")
        for key, tenant in (("a", self.tenant_a), ("b", self.tenant_b)):
            admin = f.UserFactory(username=f"{key}_admin", is_staff=True)
            member = f.UserFactory(username=f"{key}_member")
            f.MembershipFactory(tenant=tenant, user=admin, role=Membership.Role.ADMIN)
            f.MembershipFactory(tenant=tenant, user=member, role=Membership.Role.MEMBER)
            group = f.GroupFactory(name=f"team_{key}", tenant=tenant)
            for user in (admin, member):
                user.groups.add(group)
            vc = f.VirtualClusterFactory(name=f"team_{key}", tenant=tenant, cluster=c)
            f.VirtualClusterGrantFactory(virtual_cluster=vc, group=group)
            storage = f.StorageConfigFactory(tenant=tenant, name=f"team-{key}-data")
            f.StorageGrantFactory(storage=storage, group=group, is_default=True)
            setattr(self, f"{key}_admin", admin)
            setattr(self, f"{key}_member", member)
            setattr(self, f"group_{key}", group)
            setattr(self, f"vc_{key}", vc)
            setattr(self, f"storage_{key}", storage)
        f.VirtualClusterCellFactory(virtual_cluster=self.vc_a, cell_type=self.gpu_node, count=2)
        f.VirtualClusterCellFactory(virtual_cluster=self.vc_a, cell_type=self.cpu_node, count=1)
        f.VirtualClusterCellFactory(virtual_cluster=self.vc_b, cell_type=self.gpu_node, count=1)
        f.VirtualClusterCellFactory(virtual_cluster=self.vc_b, cell_type=self.switch, count=4)
        f.VirtualClusterCellFactory(virtual_cluster=self.vc_b, cell_type=self.cpu_node, count=1)

    def users(self):
        return {
            "root": self.root,
            "a_admin": self.a_admin,
            "a_member": self.a_member,
            "b_admin": self.b_admin,
            "b_member": self.b_member,
        }


@pytest.fixture
def world(db):
    return World()


def pytest_collection_modifyitems(items):
    """Every transactional test restores the migrated rows (built-in groups, SLA policies,
    schedules) after it: a flush that re-ran post_migrate before a serialized-rollback test
    would otherwise leave duplicates for it to collide with."""
    for item in items:
        marker = item.get_closest_marker("django_db")
        if marker is not None and marker.kwargs.get("transaction") and "serialized_rollback" not in marker.kwargs:
            # In front: the closest marker is the first of the item's own, a decorator's included.
            item.add_marker(pytest.mark.django_db(*marker.args, **{**marker.kwargs, "serialized_rollback": True}), append=False)


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


@pytest.fixture(scope="session")
def chromium():
    """Debian's headless Chromium driven by Playwright, one for the rest of the run once a test
    asks for it (two sync Playwrights cannot run in one thread: every browser test that runs
    after the first user of this fixture must use it too; tests/oncall's, which run before,
    start their own and need the database set up outside the event loop). While Playwright's sync API
    is active its event loop runs in the test thread, so Django would refuse database calls
    from it ("SynchronousOnlyOperation"): DJANGO_ALLOW_ASYNC_UNSAFE allows them from then on;
    subprocesses that run deployment checks drop it (`deployment_env`)."""
    assert os.access(CHROMIUM, os.X_OK), f"{CHROMIUM} is missing: run `make system-deps`"
    from playwright.sync_api import expect, sync_playwright

    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    expect.set_options(timeout=20_000)
    manager = sync_playwright().start()
    browser = manager.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    try:
        yield browser
    finally:
        browser.close()
        manager.stop()
        if before is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


def close_contexts(browser):
    """Close what a test opened in the shared browser, leaving the browser for the next."""
    for context in list(browser.contexts):
        context.close()


def deployment_env(env):
    """`env` without what the test run itself sets and a deployment must not have."""
    return {k: v for k, v in env.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
