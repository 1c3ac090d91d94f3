"""A job submit, the API's busiest write, runs a fixed, small set of queries: the
benchmark's submissions per second (`benchmarks/bench_api.py`) rest on it."""

import yaml
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.jobs.conftest import job_document


def _submit(client, name, **changes):
    return client.post("/api/v2/jobs", yaml.safe_dump(job_document(name=name, **changes)), content_type="text/yaml")


def _main_table(sql):
    """The table an INSERT writes or a SELECT reads first, outside its subqueries."""
    if sql.startswith("INSERT"):
        return sql.split('"')[1]
    depth = 0
    for i, char in enumerate(sql):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and sql.startswith(" FROM ", i):
            return sql[i + 6:].split('"')[1]
    raise AssertionError(f"no FROM in {sql}")


def _tables(queries):
    """What each query reads or writes, in order (savepoints as such)."""
    return [
        q["sql"].split(" ")[0] if q["sql"].startswith(("SAVEPOINT", "RELEASE")) else _main_table(q["sql"])
        for q in queries.captured_queries
    ]


def test_a_submit_with_a_bearer_token_runs_seven_queries(world, client_for):
    client = client_for(world.a_member)
    assert _submit(client, "first").status_code == 202  # fills the cached SKUs and leaf cells of team_a
    with CaptureQueriesContext(connection) as queries:
        assert _submit(client, "second").status_code == 202
    assert _tables(queries) == [
        "accounts_apitoken",  # the token, its user, and whether the user is a platform admin
        "virtualclusters_virtualcluster",  # the VC by name, and whether the user may submit to it
        "storage_storagegrant",  # the user's default storages
        "SAVEPOINT",
        "jobs_job",
        "audit_auditentry",
        "RELEASE",
    ]


def test_a_platform_admin_token_needs_no_extra_role_query(world, client_for):
    client = client_for(world.root)
    assert _submit(client, "first").status_code == 202
    with CaptureQueriesContext(connection) as queries:
        assert _submit(client, "second").status_code == 202
    assert len(queries.captured_queries) == 7


def test_the_first_submit_to_a_vc_reads_its_cells_once(world, client_for):
    client = client_for(world.a_member)
    with CaptureQueriesContext(connection) as first:
        assert _submit(client, "first").status_code == 202
    with CaptureQueriesContext(connection) as second:
        assert _submit(client, "second").status_code == 202
    read_cells = [t for t in _tables(first) if t.startswith(("clusters_", "virtualclusters_virtualclustercell"))]
    assert read_cells == ["clusters_celltype", "virtualclusters_virtualclustercell"]
    assert not [t for t in _tables(second) if t.startswith(("clusters_", "virtualclusters_virtualclustercell"))]
