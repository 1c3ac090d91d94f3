"""The job routes in the OpenAPI schema: every route, the YAML submit body, examples."""

from drf_spectacular.generators import SchemaGenerator

JOB_PATHS = {
    "/api/v2/jobs": {"get", "post"},
    "/api/v2/jobs/{username}~{name}": {"get"},
    "/api/v2/jobs/{username}~{name}/config": {"get"},
    "/api/v2/jobs/{username}~{name}/executionType": {"put"},
    "/api/v2/jobs/{username}~{name}/tag": {"put", "delete"},
    "/api/v2/jobs/{username}~{name}/events": {"get"},
    "/api/v2/jobs/{username}~{name}/job-attempts": {"get"},
    "/api/v2/jobs/{username}~{name}/job-attempts/{attempt_index}": {"get"},
    "/api/v2/jobs/{username}~{name}/attempts/{attempt_index}": {"get"},
    "/api/v2/jobs/{username}~{name}/ssh": {"get"},
    "/api/v2/jobs/{username}~{name}/job-attempts/healthz": {"get"},
    "/api/v2/job-attempts/healthz": {"get"},
}


def test_every_job_route_is_described_with_the_yaml_body(db):
    schema = SchemaGenerator().get_schema(request=None, public=True)
    paths = schema["paths"]

    for path, methods in JOB_PATHS.items():
        assert path in paths, path
        assert methods <= set(paths[path]), (path, set(paths[path]))
    assert not [p for p in paths if p.startswith("/api/v2/jobs") and p.endswith("/")]  # slash twins described once
    task = [p for p in paths if p.startswith("/api/v2/jobs/{username}~{name}/attempts/{attempt_index}/")]
    assert len(task) == 3  # task attempts, log locations, log text
    submit = paths["/api/v2/jobs"]["post"]
    assert {"text/yaml", "application/json"} <= set(submit["requestBody"]["content"])
    assert "protocolVersion: 2" in next(iter(submit["requestBody"]["content"]["text/yaml"]["examples"].values()))["value"]
    assert {"202", "400", "403", "404", "409", "429"} <= set(submit["responses"])
    config = paths["/api/v2/jobs/{username}~{name}/config"]["get"]["responses"]["200"]["content"]
    assert {"text/yaml", "application/json"} <= set(config)
