"""The Helm chart: linted and rendered by the real Helm binary, every manifest validated
offline against the Kubernetes schemas, and the settings it renders checked against pai."""

import base64
import os
import re
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "pai"
PRODUCTION_VALUES = CHART / "values-production.yaml"
# The Kubernetes version Helm v4.1 is built against; kubernetes-validate ships its schemas.
KUBERNETES_VERSION = "1.35.0"
RELEASE = "pai"
NAMESPACE = "pai-system"


def run_helm(helm, *args):
    return subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=120)


def render(helm, *values_args):
    result = run_helm(
        helm, "template", RELEASE, str(CHART), "--namespace", NAMESPACE, "--kube-version", KUBERNETES_VERSION, *values_args
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@pytest.fixture(scope="module")
def default_manifests(helm):
    return render(helm)


@pytest.fixture(scope="module")
def production_manifests(helm):
    return render(helm, "-f", str(PRODUCTION_VALUES))


@pytest.fixture(params=["default", "production"])
def manifests(request, default_manifests, production_manifests):
    return {"default": default_manifests, "production": production_manifests}[request.param]


def find(manifests, kind, name=None):
    found = [m for m in manifests if m["kind"] == kind and (name is None or m["metadata"]["name"] == name)]
    assert found, f"no {kind} {name or ''} rendered"
    return found


def one(manifests, kind, name=None):
    found = find(manifests, kind, name)
    assert len(found) == 1, [m["metadata"]["name"] for m in found]
    return found[0]


def container_of(workload):
    spec = workload["spec"]["template"]["spec"]
    assert len(spec["containers"]) == 1
    return spec["containers"][0]


# --------------------------------------------------------------------------- the tools
@pytest.mark.parametrize("values_args", [[], ["-f", str(PRODUCTION_VALUES)]], ids=["default", "production"])
def test_helm_lint_strict(helm, values_args):
    result = run_helm(helm, "lint", "--strict", str(CHART), *values_args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


def test_every_manifest_validates_strictly_against_the_kubernetes_schemas(manifests):
    kinds = set()
    for manifest in manifests:
        kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)
        kinds.add(manifest["kind"])
    assert kinds >= {
        "Deployment", "Job", "Service", "ConfigMap", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
        "PodDisruptionBudget",
    }


def test_the_validator_rejects_an_unknown_field(default_manifests):
    """The validation above can fail: strict mode refuses what a typo would produce."""
    deployment = dict(one(default_manifests, "Deployment", "pai-web"))
    deployment["spec"] = {**deployment["spec"], "replica": 2}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize(
    "values_args, message",
    [
        (["--set", "web.replicas=-1"], "/web/replicas"),
        (["--set", "webb.replicas=1"], "additional properties 'webb' not allowed"),
        (["--set", "config.authMode=oidc"], "/config/oidc"),
        (["--set", "secrets.databaseUrl=mysql://db/pai"], "/secrets/databaseUrl"),
        (["--set", "ingress.enabled=true"], "/ingress/hosts"),
        (["--set", "web.replicas=1"], "minAvailable must be below web.replicas"),
        (["--set", "apiPriority.queues=0"], "/apiPriority/queues"),
    ],
)
def test_values_schema_rejects_bad_values(helm, values_args, message):
    result = run_helm(helm, "template", RELEASE, str(CHART), *values_args)
    assert result.returncode != 0
    assert message in result.stderr


# --------------------------------------------------------------------------- RBAC
def test_cluster_role_grants_exactly_the_backend_api_calls(manifests):
    expected = yaml.safe_load((CHART / "rbac-verbs.yaml").read_text())["rules"]
    granted = set()
    for rule in one(manifests, "ClusterRole")["rules"]:
        assert set(rule) == {"apiGroups", "resources", "verbs"}, "no resourceNames, no nonResourceURLs"
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    granted.add((group, resource, verb))
    assert granted == {(r["apiGroup"], r["resource"], v) for r in expected for v in r["verbs"]}
    assert not any("*" in item for triple in granted for item in triple)


def test_cluster_role_binding_binds_the_pods_service_account(manifests):
    binding = one(manifests, "ClusterRoleBinding")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": one(manifests, "ClusterRole")["metadata"]["name"]}
    account = one(manifests, "ServiceAccount", "pai")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "pai", "namespace": NAMESPACE}]
    for name in ("pai-web", "pai-worker"):
        pod = one(manifests, "Deployment", name)["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == account["metadata"]["name"]
        assert pod["automountServiceAccountToken"] is True


# --------------------------------------------------------------------------- workloads
def test_flow_schema_gives_the_service_account_its_own_priority_level(helm, manifests):
    level = one(manifests, "PriorityLevelConfiguration", "pai")
    assert level["spec"]["type"] == "Limited" and level["spec"]["limited"]["nominalConcurrencyShares"] > 0
    schema = one(manifests, "FlowSchema", "pai")["spec"]
    assert schema["priorityLevelConfiguration"] == {"name": "pai"}
    assert schema["rules"][0]["subjects"] == [
        {"kind": "ServiceAccount", "serviceAccount": {"name": "pai", "namespace": NAMESPACE}}
    ]
    off = render(helm, "--set", "apiPriority.enabled=false")
    assert not [m for m in off if m["kind"] in ("FlowSchema", "PriorityLevelConfiguration")]


def test_web_runs_gunicorn_with_health_and_readiness_probes(manifests):
    web = one(manifests, "Deployment", "pai-web")
    container = container_of(web)
    assert container["command"][:2] == ["gunicorn", "pai.wsgi"]
    assert "--bind=0.0.0.0:8000" in container["command"]
    assert container["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        headers = {h["name"]: h["value"] for h in container[probe]["httpGet"]["httpHeaders"]}
        assert headers == {"Host": "localhost", "X-Forwarded-Proto": "https"}
    assert container["resources"]["requests"] and container["resources"]["limits"]


def test_worker_runs_the_task_cluster(manifests):
    container = container_of(one(manifests, "Deployment", "pai-worker"))
    assert container["command"] == ["python", "-m", "pai.worker"]
    assert container["resources"]["requests"]


def test_every_pod_is_locked_down(manifests):
    workloads = find(manifests, "Deployment") + find(manifests, "Job")
    assert len(workloads) == 3
    for workload in workloads:
        pod = workload["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        container = container_of(workload)
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"] == {"drop": ["ALL"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert "emptyDir" in volumes["tmp"]
        assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]


def test_migration_job_runs_before_install_and_upgrade_on_hook_copies_of_the_settings(manifests):
    job = one(manifests, "Job", "pai-migrate")
    annotations = job["metadata"]["annotations"]
    assert annotations["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert container_of(job)["command"] == ["python", "manage.py", "migrate", "--noinput"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    job_weight = int(annotations["helm.sh/hook-weight"])
    # Everything the Job reads exists before it, as a hook of a lower weight (or an
    # existing Secret the operator made).
    references = container_of(job)["envFrom"]
    config_name = references[0]["configMapRef"]["name"]
    config = one(manifests, "ConfigMap", config_name)
    assert int(config["metadata"]["annotations"]["helm.sh/hook-weight"]) < job_weight
    assert config["data"] == one(manifests, "ConfigMap", "pai")["data"]
    secret_name = references[1]["secretRef"]["name"]
    secrets = [m for m in manifests if m["kind"] == "Secret" and m["metadata"]["name"] == secret_name]
    if secrets:
        assert int(secrets[0]["metadata"]["annotations"]["helm.sh/hook-weight"]) < job_weight
        assert set(secrets[0]["data"]) == set(one(manifests, "Secret", "pai")["data"])
    else:
        assert secret_name == "pai-secrets"
    account = job["spec"]["template"]["spec"]["serviceAccountName"]
    hook_account = one(manifests, "ServiceAccount", account)
    assert int(hook_account["metadata"]["annotations"]["helm.sh/hook-weight"]) < job_weight


def test_web_and_worker_read_the_rendered_settings(manifests):
    rendered = {(m["kind"], m["metadata"]["name"]) for m in manifests}
    for name in ("pai-web", "pai-worker"):
        references = container_of(one(manifests, "Deployment", name))["envFrom"]
        assert ("ConfigMap", references[0]["configMapRef"]["name"]) in rendered
        secret = references[1]["secretRef"]["name"]
        assert ("Secret", secret) in rendered or secret == "pai-secrets"


def test_service_pdb_and_ingress_select_the_web_pods(production_manifests):
    web_labels = one(production_manifests, "Deployment", "pai-web")["spec"]["template"]["metadata"]["labels"]
    worker_labels = one(production_manifests, "Deployment", "pai-worker")["spec"]["template"]["metadata"]["labels"]
    service = one(production_manifests, "Service", "pai")
    pdb = one(production_manifests, "PodDisruptionBudget", "pai-web")
    for selector in (service["spec"]["selector"], pdb["spec"]["selector"]["matchLabels"]):
        assert selector.items() <= web_labels.items()
        assert not selector.items() <= worker_labels.items()
    assert pdb["spec"]["minAvailable"] == 2
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    ingress = one(production_manifests, "Ingress", "pai")
    assert ingress["spec"]["rules"][0]["host"] == "pai.example.org"
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": "pai", "port": {"name": "http"}}


def test_ingress_is_optional(default_manifests):
    assert not [m for m in default_manifests if m["kind"] == "Ingress"]


# --------------------------------------------------------------------------- settings
def test_config_map_holds_the_production_settings(default_manifests, production_manifests):
    data = one(default_manifests, "ConfigMap", "pai")["data"]
    assert data["PAI_ENV"] == "production" and data["PAI_BACKEND"] == "kubernetes"
    assert data["PAI_AUTH_MODE"] == "basic" and data["ALLOWED_HOSTS"] == "localhost"
    assert not {"SECRET_KEY", "DATABASE_URL", "REDIS_URL", "OIDC_RP_CLIENT_SECRET"} & set(data)
    assert "" not in data.values(), "unset values are left out so that pai's defaults apply"
    production = one(production_manifests, "ConfigMap", "pai")["data"]
    assert production["PAI_AUTH_MODE"] == "oidc"
    assert production["ALLOWED_HOSTS"] == "localhost,pai.example.org"
    assert production["OIDC_OP_TOKEN_ENDPOINT"].startswith("https://sso.example.org/")
    assert production["PAI_USER_MANUAL_URL"] == "https://docs.example.org/pai/"
    assert (production["EMAIL_HOST"], production["EMAIL_PORT"], production["EMAIL_USE_TLS"]) == ("smtp.example.org", "587", "true")
    assert production["PAI_PUBLIC_URL"] == "https://pai.example.org"


def test_secret_comes_from_values_or_an_existing_secret(helm, default_manifests, production_manifests):
    secret = one(default_manifests, "Secret", "pai")
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert data["DATABASE_URL"] == "postgres://pai@pai-postgresql:5432/pai"
    assert len(data["SECRET_KEY"]) == 64
    assert "REDIS_URL" not in data
    assert not [m for m in production_manifests if m["kind"] == "Secret"]
    given = render(helm, "--set", "secrets.secretKey=k", "--set", "secrets.redisUrl=redis://redis:6379/0")
    data = {k: base64.b64decode(v).decode() for k, v in one(given, "Secret", "pai")["data"].items()}
    assert data["SECRET_KEY"] == "k" and data["REDIS_URL"] == "redis://redis:6379/0"


def test_every_rendered_setting_is_one_pai_reads(default_manifests, production_manifests):
    settings_source = (ROOT / "pai" / "settings.py").read_text()
    read = set(re.findall(r'env(?:_bool|_list)?\("([A-Z0-9_]+)"', settings_source))
    keys = set()
    for manifests in (default_manifests, production_manifests):
        keys |= set(one(manifests, "ConfigMap", "pai")["data"])
    keys |= set(one(default_manifests, "Secret", "pai")["data"])
    assert keys - read == set()


def test_rendered_settings_pass_the_production_deployment_check(default_manifests):
    """pai starts and the deployment security checks are clean with exactly the
    environment the chart gives its pods (no database connection is needed)."""
    env = {k: v for k, v in os.environ.items() if k in {"PATH", "HOME", "LANG"}}
    env.update(one(default_manifests, "ConfigMap", "pai")["data"])
    env.update({k: base64.b64decode(v).decode() for k, v in one(default_manifests, "Secret", "pai")["data"].items()})
    env["PAI_DATA_DIR"] = str(ROOT / "var" / "helm-check")
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--tag", "security", "--fail-level", "WARNING"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_web_pods_are_scraped_by_prometheus_with_the_metrics_token(helm, default_manifests):
    web = one(default_manifests, "Deployment", "pai-web")
    annotations = web["spec"]["template"]["metadata"]["annotations"]
    assert (annotations["prometheus.io/scrape"], annotations["prometheus.io/port"], annotations["prometheus.io/path"]) == (
        "true", "8000", "/metrics"
    )
    container = container_of(web)
    assert "--config=python:pai.gunicorn" in container["command"]
    env = {e["name"]: e for e in container["env"]}
    assert env["PROMETHEUS_MULTIPROC_DIR"]["value"].startswith("/tmp/")  # the writable emptyDir
    assert env["PAI_POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert base64.b64decode(one(default_manifests, "Secret", "pai")["data"]["PAI_METRICS_TOKEN"])
    assert not [m for m in default_manifests if m["kind"] == "ServiceMonitor"]

    monitored = render(helm, "--set", "metrics.serviceMonitor.enabled=true",
                       "--set", "metrics.serviceMonitor.labels.release=prometheus")
    monitor = one(monitored, "ServiceMonitor", "pai")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    (endpoint,) = monitor["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("http", "/metrics")
    assert endpoint["authorization"] == {"type": "Bearer", "credentials": {"name": "pai", "key": "PAI_METRICS_TOKEN"}}
    service = one(monitored, "Service", "pai")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
