"""A small GitHub REST API for the follow-up tests, in a thread of the test process.

It speaks the issues endpoints pai uses (`github_issues_openapi.json`, a subset of GitHub's
published description): every request's path, query and body are checked against that
description and every answer it gives is too; a mismatch is recorded in `violations`
(tests assert there is none) and a bad body is answered 422 as GitHub does. Authentication
is GitHub's: `Authorization: Bearer <token>` (or `token <token>`), 401 "Requires
authentication" without one, 401 "Bad credentials" with a wrong one; a request without a
User-Agent is refused 403. The test may ask for rate-limit answers (`rate_limit`: GitHub's
primary limit, 403 with `x-ratelimit-remaining: 0` and the reset time; `secondary_limit`:
429 with `retry-after`), 5xx answers, or a connection dropped right after an issue is
created (`drop_after_create`: the issue exists, the client never hears of it).
"""

import json
import re
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from jsonschema import Draft202012Validator

SPEC = json.loads((Path(__file__).parent / "github_issues_openapi.json").read_text())
DOCS = "https://docs.github.com/rest"


def _validator(schema):
    if isinstance(schema, str):
        schema = {"$ref": schema}
    return Draft202012Validator({**schema, "components": SPEC["components"]})


def _now():
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeGitHub:
    def __init__(self, *, token="github_pat_test", repository="octo-org/cluster-ops"):
        self.token = token
        self.repository = repository
        self.issues = []
        self.requests = []  # (method, path with query, parsed body)
        self.violations = []
        self.rate_limit = 0  # answer the next N requests with the primary rate limit
        self.rate_limit_reset = int(time.time()) + 3600
        self.secondary_limit = 0
        self.server_errors = 0
        self.drop_after_create = 0
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def api_url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def posts(self):
        return [r for r in self.requests if r[0] == "POST"]

    def close_issue(self, number, closed_at="2027-01-20T09:30:00Z"):
        with self.lock:
            issue = self.issues[number - 1]
            issue.update(state="closed", state_reason="completed", closed_at=closed_at, updated_at=closed_at)

    def _check_answer(self, operation, status, payload, headers):
        """Record where an answer of the fake strays from the description: a status neither the
        operation nor `x-unlisted-responses` knows, a body not of the status's schema, a
        rate-limit header that is not the integer the description's headers say."""
        where = f"answer {status} of {operation['operationId']}"
        if str(status) in operation["responses"]:
            schema = operation["responses"][str(status)]
        elif str(status) in SPEC["x-unlisted-responses"]:
            schema = SPEC["x-unlisted-responses"][str(status)]
        else:
            self.violations.append(f"{where}: no such answer in the description")
            return
        if schema is None:
            if payload is not None:
                self.violations.append(f"{where}: the description gives this answer no body")
        else:
            errors = [e.message for e in _validator(schema).iter_errors(payload)]
            if errors:
                self.violations.append(f"{where}: {errors}")
        for name in ("limit", "remaining", "reset"):
            value = headers.get(f"x-ratelimit-{name}")
            integer = SPEC["components"]["headers"][f"x-rate-limit-{name}"]
            if value is not None and (integer != {"type": "integer"} or not str(value).isdigit()):
                self.violations.append(f"{where}: x-ratelimit-{name} {value!r} is not an integer")

    # --- The server ---------------------------------------------------------------------
    def _issue(self, number, body):
        base = f"{self.api_url}/repos/{self.repository}"
        labels = [{"id": i + 1, "node_id": f"LA_{i}", "url": f"{base}/labels/{name}", "name": name,
                   "color": "ededed", "default": False, "description": None}
                  for i, name in enumerate(label if isinstance(label, str) else label.get("name", "")
                                           for label in body.get("labels", []))]
        now = _now()
        return {
            "id": 1000 + number, "node_id": f"I_kw{number}", "url": f"{base}/issues/{number}",
            "repository_url": base, "labels_url": f"{base}/issues/{number}/labels{{/name}}",
            "comments_url": f"{base}/issues/{number}/comments", "events_url": f"{base}/issues/{number}/events",
            "html_url": f"https://github.example/{self.repository}/issues/{number}", "number": number,
            "state": "open", "state_reason": None, "title": str(body["title"]), "body": body.get("body"),
            "user": {"login": "pai-bot", "id": 7, "type": "Bot"}, "labels": labels, "assignee": None,
            "assignees": [], "milestone": None, "locked": False, "comments": 0, "created_at": now,
            "updated_at": now, "closed_at": None, "author_association": "NONE",
        }

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, status, payload, operation=None, headers=None):
                if operation is not None:
                    fake._check_answer(operation, status, payload, headers or {})
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("x-github-api-version-selected", "2022-11-28")
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _error(self, status, message, operation=None, headers=None):
                self._answer(status, {"message": message, "documentation_url": DOCS, "status": str(status)},
                             operation, headers)

            def _route(self):
                parts = urlsplit(self.path)
                owner_repo = fake.repository.replace("/", r"/")
                match = re.fullmatch(r"/repos/([^/]+)/([^/]+)/issues(?:/(\d+))?", parts.path)
                if match is None:
                    return None, None, None, parts
                path = "/repos/{owner}/{repo}/issues" + ("/{issue_number}" if match.group(3) else "")
                operation = SPEC["paths"][path].get(self.command.lower())
                same_repo = f"{match.group(1)}/{match.group(2)}".lower() == owner_repo.lower()
                return operation, same_repo, match.group(3), parts

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                operation, same_repo, number, parts = self._route()
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw
                with fake.lock:
                    fake.requests.append((self.command, self.path, body))
                if operation is None:
                    fake.violations.append(f"{self.command} {self.path}: no such operation in the description")
                    return self._error(404, "Not Found")
                if not self.headers.get("User-Agent"):
                    return self._error(403, "Request forbidden by administrative rules. Please make sure your "
                                            "request has a User-Agent header.")
                accept = self.headers.get("Accept", "")
                if "application/vnd.github" not in accept and "application/json" not in accept:
                    fake.violations.append(f"{self.command} {self.path}: Accept is {accept!r}")
                version = self.headers.get("X-GitHub-Api-Version")
                if version not in (None, "2022-11-28"):
                    return self._error(400, f"API version {version} is not supported.", operation)
                auth = self.headers.get("Authorization", "")
                scheme, _, token = auth.partition(" ")
                if not auth:
                    return self._error(401, "Requires authentication", operation)
                if scheme.lower() not in ("bearer", "token") or token != fake.token:
                    return self._error(401, "Bad credentials", operation)
                if fake.rate_limit:
                    fake.rate_limit -= 1
                    return self._error(403, "API rate limit exceeded for user ID 7.", operation, {
                        "x-ratelimit-limit": "5000", "x-ratelimit-remaining": "0", "x-ratelimit-used": "5000",
                        "x-ratelimit-reset": str(fake.rate_limit_reset), "x-ratelimit-resource": "core"})
                if fake.secondary_limit:
                    fake.secondary_limit -= 1
                    return self._error(429, "You have exceeded a secondary rate limit.", operation, {"retry-after": "60"})
                if fake.server_errors:
                    fake.server_errors -= 1
                    return self._error(503, "Service unavailable", operation)
                if not same_repo:
                    return self._error(404, "Not Found", operation)
                if self.command == "POST":
                    return self._create(operation, body)
                if number is not None:
                    return self._get(operation, int(number))
                return self._list(operation, parts)

            def _create(self, operation, body):
                if not isinstance(body, dict):
                    fake.violations.append(f"POST {self.path}: the body is not a JSON object")
                    return self._error(400, "Problems parsing JSON", operation)
                if self.headers.get("Content-Type", "").split(";")[0] != "application/json":
                    fake.violations.append(f"POST {self.path}: Content-Type {self.headers.get('Content-Type')!r}")
                errors = [e.message for e in _validator(operation["requestBody"]).iter_errors(body)]
                if errors:
                    fake.violations.append(f"POST {self.path}: {errors}")
                    return self._answer(422, {
                        "message": "Invalid request.\n\n" + "\n".join(errors), "documentation_url": DOCS,
                        "errors": [{"resource": "Issue", "code": "invalid", "message": e} for e in errors],
                        "status": "422"}, operation)
                with fake.lock:
                    issue = fake._issue(len(fake.issues) + 1, body)
                    fake.issues.append(issue)
                if fake.drop_after_create:
                    fake.drop_after_create -= 1
                    self.close_connection = True
                    return None  # the issue exists; the client gets no answer
                return self._answer(201, issue, operation, {"Location": issue["url"]})

            def _get(self, operation, number):
                if not 1 <= number <= len(fake.issues):
                    return self._error(404, "Not Found", operation)
                return self._answer(200, fake.issues[number - 1], operation)

            def _list(self, operation, parts):
                query = dict(parse_qsl(parts.query))
                errors = [e.message for e in _validator(operation["parameters"]).iter_errors(query)]
                if errors:
                    fake.violations.append(f"GET {self.path}: {errors}")
                    return self._error(422, "Validation Failed", operation)
                issues = list(fake.issues)
                state = query.get("state", "open")
                if state != "all":
                    issues = [i for i in issues if i["state"] == state]
                if "since" in query:
                    issues = [i for i in issues if i["updated_at"] >= query["since"]]
                if query.get("direction", "desc") == "desc":
                    issues.reverse()
                return self._answer(200, issues[: int(query.get("per_page", 30))], operation)

            def do_GET(self):
                self._handle()

            def do_POST(self):
                self._handle()

        return Handler
