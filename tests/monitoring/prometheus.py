"""A real Prometheus (Debian's `prometheus`) for the tests, and a DCGM-like exporter for it to scrape.

Prometheus starts once per session with two scrape jobs whose targets come from files
(`file_sd_configs`), so a test points a job at its own server by writing a file:
`pai` (bearer token from a file; every 3 seconds) and `dcgm` (every second). After each
test that uses it, the targets are dropped (`stop_scraping`, see conftest).
"""

import json
import os
import socket
import subprocess
import time
import urllib.parse
import urllib.request

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily

PROMETHEUS = "/usr/bin/prometheus"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout=90.0, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


class Prometheus:
    def __init__(self, directory):
        assert os.access(PROMETHEUS, os.X_OK), f"{PROMETHEUS} is missing: run `make system-deps`"
        self.directory = directory
        self.token_file = directory / "pai-token"
        self.token_file.write_text("none")
        for job in ("pai", "dcgm"):
            self._write_targets(job, [])
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
            "scrape_configs": [
                {
                    "job_name": "pai",
                    # A scrape of pai queries the database: on a loaded machine it may take
                    # more than a second, and a timed-out scrape is a missing sample.
                    "scrape_interval": "3s",
                    "scrape_timeout": "3s",
                    "authorization": {"type": "Bearer", "credentials_file": str(self.token_file)},
                    "file_sd_configs": [{"files": [str(directory / "pai.json")]}],
                },
                # honor_labels: the exporter's own `pod`/`namespace` labels name the GPU's pod,
                # as a ServiceMonitor with honorLabels does for the real DCGM exporter.
                {"job_name": "dcgm", "honor_labels": True, "file_sd_configs": [{"files": [str(directory / "dcgm.json")]}]},
            ],
        }
        (directory / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log = open(directory / "prometheus.log", "wb")
        self.process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={directory / 'prometheus.yml'}", f"--storage.tsdb.path={directory / 'data'}",
             f"--web.listen-address={self.url.removeprefix('http://')}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT,
        )
        wait_for(self._ready, what="Prometheus to start")

    def _ready(self):
        assert self.process.poll() is None, (self.directory / "prometheus.log").read_text()
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def _write_targets(self, job, targets):
        # Written aside then renamed: Prometheus must never read half a file.
        path = self.directory / f"{job}.json"
        partial = path.with_suffix(".tmp")
        partial.write_text(json.dumps([{"targets": targets}] if targets else []))
        partial.replace(path)

    def scrape(self, job, url, token=None):
        """Point the job at `url` (scheme and host:port); the pai job sends `token`."""
        if token is not None:
            self.token_file.write_text(token)
        self._write_targets(job, [urllib.parse.urlsplit(url).netloc])
        wait_for(lambda: self.target_health(job) == "up", what=f"Prometheus to scrape {url}")

    def stop_scraping(self):
        """Forget every target, and wait until Prometheus has: a server that outlives its
        test must not be scraped (and query the database) during the next ones."""
        for job in ("pai", "dcgm"):
            self._write_targets(job, [])
        wait_for(lambda: not self._get("/api/v1/targets", {"state": "active"})["activeTargets"], timeout=30,
                 what="Prometheus to drop its targets")

    def target_health(self, job):
        data = self._get("/api/v1/targets", {"state": "active"})
        for target in data["activeTargets"]:
            if target["labels"].get("job") == job:
                return target["health"]
        return None

    def query(self, expression):
        """The instant vector of `expression`, as {frozenset(labels): value}."""
        data = self._get("/api/v1/query", {"query": expression})
        assert data["resultType"] == "vector", data
        return {
            frozenset((k, v) for k, v in item["metric"].items() if k not in ("job", "instance")): float(item["value"][1])
            for item in data["result"]
        }

    def value(self, expression):
        result = self.query(expression)
        assert len(result) <= 1, result
        return next(iter(result.values()), None)

    def _get(self, path, params):
        with urllib.request.urlopen(f"{self.url}{path}?{urllib.parse.urlencode(params)}", timeout=5) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


class DcgmExporter:
    """Serves `DCGM_FI_DEV_GPU_UTIL` as NVIDIA's DCGM exporter does with pod attribution:
    one series per GPU, labelled with the GPU and the pod (namespace, pod, container)
    that holds it. Tests set the utilisation of each pod's GPUs."""

    def __init__(self):
        self.gpus = {}  # (namespace, pod) → [utilisation per GPU]
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        self.server, self.thread = start_http_server(0, addr="127.0.0.1", registry=registry)
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def set(self, namespace, pod, *utilisation):
        self.gpus[(namespace, pod)] = list(utilisation)

    def clear(self):
        self.gpus.clear()

    def collect(self):
        family = GaugeMetricFamily(
            "DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).",
            labels=["gpu", "UUID", "device", "modelName", "Hostname", "container", "namespace", "pod"],
        )
        index = 0
        for (namespace, pod), values in sorted(self.gpus.items()):
            for value in values:
                family.add_metric(
                    [str(index), f"GPU-{index:08d}", f"nvidia{index}", "NVIDIA A100-SXM4-80GB", "gpu-node",
                     "main", namespace, pod],
                    value,
                )
                index += 1
        yield family

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
