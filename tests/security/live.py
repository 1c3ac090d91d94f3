"""A live pai server process for the attack suite: gunicorn (as the Helm chart runs it) or
runserver, on a database of its own copied from the test database's migrated schema.

`copy_test_database` makes that database (SQLite: a backup of the in-memory test database to a
file; PostgreSQL: a copy of the test database as a template), `seed` (run inside the server's
environment) adds a team with an admin and a member, and `Server` starts and stops the process
and reads its memory from /proc.
"""

import http.client
import http.cookiejar
import json
import os
import re
import resource
import select
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ADMIN, MEMBER, PASSWORD = "live_admin", "live_member", "Live-attack-Passw0rd"
WEBHOOK_TOKEN = "live-webhook-token"
# A safety net, not the bound under test: a regression must fail the test, not the machine.
ADDRESS_SPACE_LIMIT = 3 * 1024**3


def copy_test_database(connection, tmp):
    """A DATABASE_URL for a copy of the (migrated, empty) test database, and a cleanup function."""
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        path = tmp / "live.sqlite3"
        connection.ensure_connection()
        target = sqlite3.connect(path)
        connection.connection.backup(target)
        target.close()
        return f"sqlite:///{path}", lambda: None
    import psycopg

    name = f"{settings['NAME']}_live"
    params = {"host": settings["HOST"] or None, "port": settings["PORT"] or None, "user": settings["USER"],
              "password": settings["PASSWORD"] or None, "dbname": "postgres", "autocommit": True}
    connection.close()  # a template may have no other session

    def drop():
        with psycopg.connect(**params) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    drop()
    with psycopg.connect(**params) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{settings["NAME"]}"')
    user = settings["USER"] + (f":{settings['PASSWORD']}" if settings["PASSWORD"] else "")
    host = f"{settings['HOST'] or '127.0.0.1'}:{settings['PORT'] or 5432}"
    return f"postgres://{user}@{host}/{name}", drop


def environment(tmp, database_url, **extra):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "PAI_ENV", "DEBUG")}
    return {**env, "DATABASE_URL": database_url, "PAI_DATA_DIR": str(tmp / "data"), "DJANGO_SETTINGS_MODULE":
            "pai.settings", "PAI_ALERTMANAGER_TOKEN": WEBHOOK_TOKEN, **extra}


def seed_database(env):
    """Run `seed` in the server's environment; returns what it printed (the member's token, ids)."""
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", "from tests.security.live import seed; seed()"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def seed():
    """A team `live` with its admin (a password) and a member (an application token)."""
    from django.contrib.auth import get_user_model

    from apps.accounts.models import Group
    from apps.accounts.services import issue_application_token
    from apps.tenants.models import Membership, Tenant

    User = get_user_model()
    tenant = Tenant.objects.create(slug="live", name="Live team")
    group = Group.objects.create(name="live", tenant=tenant)
    admin = User.objects.create_user(ADMIN, "admin@live.example", PASSWORD, is_staff=True)
    member = User.objects.create_user(MEMBER, "member@live.example", PASSWORD)
    for user, role in ((admin, Membership.Role.ADMIN), (member, Membership.Role.MEMBER)):
        Membership.objects.create(tenant=tenant, user=user, role=role)
        user.groups.add(group)
    _, token = issue_application_token(member)
    print(json.dumps({"token": token, "tenant": tenant.pk}))


def _limit_address_space():
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))


def free_port():
    """A port the OS chose: bound to 0 and released for runserver, which cannot report its own."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """A pai web server process; `port` once it listens."""

    def __init__(self, env, log, kind="gunicorn"):
        self.log = log
        if kind == "gunicorn":
            command = [sys.executable, "-m", "gunicorn", "pai.wsgi:application", "--bind", "127.0.0.1:0",
                       "--workers", "1", "--timeout", "60"]
            self.port = None
        else:
            self.port = free_port()
            command = [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{self.port}"]
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=_limit_address_space,
        )
        self._wait_until_listening()

    def _wait_until_listening(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log.read_text(errors="replace")
            if self.port is None:
                found = re.search(r"Listening at: http://127\.0\.0\.1:(\d+)", self.log.read_text(errors="replace"))
                if found:
                    self.port = int(found.group(1))
            if self.port is not None:
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                    return
                except OSError:
                    pass
            time.sleep(0.1)
        raise AssertionError("the server did not start:\n" + self.log.read_text(errors="replace"))

    def request(self, method, path, body=None, headers=None, timeout=60):
        """(status, parsed JSON or text) of one request on a fresh connection."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            content = response.read()
        finally:
            connection.close()
        try:
            return response.status, json.loads(content)
        except ValueError:
            return response.status, content.decode(errors="replace")

    def worker_pids(self):
        """The processes serving requests: gunicorn's workers, or runserver itself."""
        if "gunicorn" not in " ".join(self.process.args):
            return [self.process.pid]
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
        return [int(pid) for pid in children]

    def peak_memory_mb(self):
        """The largest peak resident set (VmHWM) of the serving processes, in MB."""
        peaks = []
        for pid in self.worker_pids():
            status = Path(f"/proc/{pid}/status").read_text()
            peaks.append(int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024)
        return max(peaks)

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def post_streamed(port, path, headers, size, chunk=b"x" * 65536):
    """(status, body) of a POST announcing `size` bytes, sent until the server answers: a server
    that refuses the body unread answers after the headers and closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {size}\r\n"
        head += "".join(f"{name}: {value}\r\n" for name, value in headers.items()) + "\r\n"
        sock.sendall(head.encode())
        sent = 0
        while sent < size and not select.select([sock], [], [], 0)[0]:
            part = chunk[: size - sent]
            try:
                sock.sendall(part)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(part)
        answer = b""
        try:
            while part := sock.recv(65536):
                answer += part
        except ConnectionResetError:
            pass
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head else 0
    return status, body.decode(errors="replace")


class AdminSession:
    """A browser's session in the admin: signed in through the login form, CSRF token and all."""

    def __init__(self, server, username, password):
        self.server = server
        cookies = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(cookies))
        token = self._csrf("/admin/login/")
        self.post("/admin/login/?next=/admin/", urllib.parse.urlencode({
            "username": username, "password": password, "csrfmiddlewaretoken": token, "next": "/admin/",
        }).encode(), "application/x-www-form-urlencoded")
        assert any(cookie.name == "sessionid" for cookie in cookies), "the admin login failed"

    def _url(self, path):
        return f"http://127.0.0.1:{self.server.port}{path}"

    def _csrf(self, path):
        with self.opener.open(self._url(path), timeout=60) as response:
            page = response.read().decode()
        return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)

    def post(self, path, body, content_type):
        request = urllib.request.Request(self._url(path), data=body, headers={"Content-Type": content_type})
        try:
            with self.opener.open(request, timeout=60) as response:
                return response.status, response.read().decode(errors="replace")
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode(errors="replace")

    def upload(self, path, field, filename, content):
        """POST a form with one file, as the browser does."""
        boundary = "----pai-live-" + os.urandom(8).hex()
        token = self._csrf(path)
        body = (
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"csrfmiddlewaretoken\"\r\n\r\n{token}\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; filename=\"{filename}\"\r\n"
            "Content-Type: text/csv\r\n\r\n"
        ).encode() + content + f"\r\n--{boundary}--\r\n".encode()
        return self.post(path, body, f"multipart/form-data; boundary={boundary}")
