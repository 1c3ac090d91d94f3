"""The worker's end-to-end scenarios with the Kubernetes backend, against the API test server.

The Cluster row points at the server through a kubeconfig file; the worker runs cycle by
cycle and the tests play the kubelet and the node controller between cycles.
"""

import base64
import json
import time

import pytest
import yaml
from rest_framework.test import APIClient

from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.clusters.models import Node
from apps.jobs.models import Job, JobEvent, TaskAttempt, TaskLog
from apps.jobs.worker.launch import job_key
from tests.worker.conftest import Worker, job_yaml, submit  # noqa: F401 (submit is a fixture)
from tests.worker.test_shared_hosts import shared_hosts, sku_job  # noqa: F401 (shared_hosts is a fixture)



class Driver:
    def __init__(self, worker, kubelet):
        self.worker, self.kubelet = worker, kubelet

    @property
    def backend(self):
        return self.worker.controller.backend

    def run_until(self, predicate, act=None, timeout=20.0):
        deadline = time.monotonic() + timeout
        while True:
            self.worker.cycle()
            (act or self.kubelet.step)()
            if predicate():
                return
            if time.monotonic() > deadline:
                raise AssertionError("the condition did not hold in time")
            time.sleep(0.03)

    def wait_for_state(self, job, *states, act=None, timeout=20.0):
        self.run_until(lambda: Job.objects.get(pk=job.pk).state in states, act=act, timeout=timeout)
        return Job.objects.get(pk=job.pk)


@pytest.fixture
def drive(kube_cluster, kubelet):
    driver = Driver(Worker(kube_cluster), kubelet)
    yield driver
    driver.worker.close()  # the one driving at the end (a test may swap in a new leader)


def task_codes(job):
    return sorted(
        (ta.task.job_attempt.index, ta.task.task_role, ta.task.index, ta.exit_code)
        for ta in TaskAttempt.objects.filter(task__job_attempt__job=job).select_related("task__job_attempt")
    )


def test_a_two_role_job_succeeds_with_pods_shaped_for_its_placement(world, drive, kubelet, kube_server, submit):
    text = job_yaml("distributed", roles={
        "ps": {"gpu": 1, "commands": ["echo ps"]},
        "worker": {"instances": 2, "gpu": 2, "commands": ["echo worker"]},
    })
    job = submit(world.a_member, text)
    job = drive.wait_for_state(job, "RUNNING")
    pods = kubelet.pods(**{"pai.job": job_key(job)})
    assert len(pods) == 3
    worker0 = kubelet.pod(job, "worker", 0)
    ta = TaskAttempt.objects.get(pod_name=worker0["metadata"]["name"])
    spec, container = worker0["spec"], worker0["spec"]["containers"][0]
    assert worker0["metadata"]["namespace"] == "pai-team-a"
    assert spec["nodeName"] == ta.node_name
    assert json.loads(worker0["metadata"]["annotations"]["pai.placement"])["devices"] == ta.device_indices
    assert worker0["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "pai"
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert container["resources"]["requests"] == container["resources"]["limits"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["PAI_CURRENT_TASK_ROLE_NAME"] == "worker" and env["PAI_TASK_ROLE_COUNT"] == "2"
    assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]
    assert spec["priorityClassName"] == "pai-test"
    assert kube_server.get_object("priorityclasses", "pai-test")["value"] == 10
    assert spec["volumes"][0]["emptyDir"]["medium"] == "Memory"
    assert any((v.get("persistentVolumeClaim") or {}).get("claimName") == "team-a-data" for v in spec["volumes"])
    assert ta.pod_uid == worker0["metadata"]["uid"]
    for pod in pods:
        kube_server.set_pod_log(pod["metadata"]["namespace"], pod["metadata"]["name"], f"hello from {pod['metadata']['name']}\n")
        kubelet.finish(pod, 0)
    job = drive.wait_for_state(job, "SUCCEEDED", "FAILED")
    assert job.state == "SUCCEEDED", job.attempts.first().exit_diagnostics
    assert job.app_exit_code == 0
    # Every finished pod was deleted once its log was kept: the log API serves it still.
    drive.run_until(lambda: not kubelet.pods(**{"pai.job": job_key(job)}))
    client = APIClient()
    client.force_authenticate(world.a_member)
    base = "/api/v2/jobs/a_member~distributed/attempts/0/taskRoles/worker/taskIndex/0/attempts/0"
    [location] = client.get(f"{base}/logs").json()["locations"]
    assert location["uri"].endswith(f"{base}/logs/all")
    response = client.get(f"{base}/logs/all")
    assert response.content.decode() == f"hello from {worker0['metadata']['name']}\n"
    assert {"Started", "Pulled"} <= set(JobEvent.objects.filter(task_attempt=ta).values_list("reason", flat=True))
    # Events came from the events watch: no request asked for one pod's events.
    event_requests = [query for method, path, query, _status in list(kube_server.requests) if path.endswith("/events")]
    assert event_requests and not [q for q in event_requests if "involvedObject.name" in q.get("fieldSelector", "")]


def test_a_failing_task_fails_the_job_and_stops_the_others(world, drive, kubelet, kube_server, submit):
    job = submit(world.a_member, job_yaml("fails", roles={
        "bad": {"gpu": 1, "commands": ["exit 1"], "completion": {"minFailedInstances": 1}},
        "slow": {"instances": 2, "gpu": 1, "commands": ["sleep 60"]},
    }))
    job = drive.wait_for_state(job, "RUNNING")
    bad = kubelet.pod(job, "bad")
    kube_server.set_pod_log(bad["metadata"]["namespace"], bad["metadata"]["name"], "loading\nTraceback: boom\n")
    kubelet.finish(bad, 1)
    job = drive.wait_for_state(job, "FAILED", "SUCCEEDED", "STOPPED")
    assert job.state == "FAILED" and job.app_exit_code == 1
    assert job.attempts.get().trigger_task_role == "bad"
    assert task_codes(job) == [(0, "bad", 0, 1), (0, "slow", 0, -220), (0, "slow", 1, -220)]
    # Every pod is gone, the failed one too: its log was kept first and explains the failure.
    assert kubelet.pods(**{"pai.job": job_key(job)}) == []
    assert "Traceback: boom" in job.attempts.get().exit_diagnostics
    assert TaskLog.objects.get(task_attempt__pod_name=bad["metadata"]["name"]).text == "loading\nTraceback: boom\n"


@pytest.mark.parametrize(("reason", "code"), [("Evicted", -1000), ("NodeLost", -1001)])
def test_an_evicted_or_lost_pod_is_retried_without_using_up_retries(world, drive, kubelet, submit, reason, code):
    job = submit(world.a_member, job_yaml(f"retried-{reason.lower()}", retry=0))
    job = drive.wait_for_state(job, "RUNNING")
    kubelet.finish(kubelet.pod(job, "main"), 137, reason=reason)
    drive.run_until(lambda: job.attempts.count() == 2 and kubelet.pods(**{"pai.job": job_key(job), "pai.attempt": "1"}))
    kubelet.start_pending()
    kubelet.finish(kubelet.pod(job, "main", attempt=1), 0)
    job = drive.wait_for_state(job, "SUCCEEDED", "FAILED")
    assert job.state == "SUCCEEDED"
    assert job.retries == 1 and job.retry_details["platform"] + job.retry_details["resource"] == 1
    assert job.attempts.order_by("index").first().exit_code == code


def test_an_oom_kill_fails_permanently_without_retry(world, drive, kubelet, submit):
    job = submit(world.a_member, job_yaml("oom", retry=3))
    job = drive.wait_for_state(job, "RUNNING")
    kubelet.finish(kubelet.pod(job, "main"), 137, reason="OOMKilled")
    job = drive.wait_for_state(job, "FAILED", "SUCCEEDED")
    assert job.state == "FAILED"
    assert job.retries == 0 and job.attempts.count() == 1
    assert job.attempts.get().exit_code == -1200
    assert "OOMKilled" in job.attempts.get().exit_diagnostics


def test_user_stop_deletes_the_pods_and_ends_stopped(world, drive, kubelet, kube_server, submit):
    job = submit(world.a_member, job_yaml("long", roles={"main": {"instances": 2, "gpu": 1, "commands": ["sleep 120"]}}))
    job = drive.wait_for_state(job, "RUNNING")
    client = APIClient()
    client.force_authenticate(world.a_member)
    response = client.put("/api/v2/jobs/a_member~long/executionType", {"value": "STOP"}, format="json")
    assert response.status_code in (200, 202), response.content
    job = drive.wait_for_state(job, "STOPPED")
    assert job.app_exit_code == -210
    assert {code for *_, code in task_codes(job)} == {-210}
    assert kubelet.pods(**{"pai.job": job_key(job)}) == []
    # Deleted gracefully (the kubelet sent SIGTERM), with the pods' UIDs as preconditions.
    assert kube_server.count_requests("DELETE", r"/pods/") >= 2


def test_a_jobs_secrets_reach_its_pod_even_after_a_creation_cut_short_and_go_with_it(world, drive, kubelet, kube_server, submit):
    document = yaml.safe_load(job_yaml("secrets", roles={"main": {"gpu": 1, "commands": ["sleep 120"]}}))
    document["secrets"] = {"api_key": "sk-live-0123456789", "port": 8080}
    # Every write of the Secret fails, and so does the delete that would undo its pod: the
    # pod is left waiting for its files, as a worker dying between the two calls leaves it.
    kube_server.inject_fault("POST", r"/namespaces/pai-team-a/secrets$", status=500, count=10_000)
    kube_server.inject_fault("DELETE", r"/namespaces/pai-team-a/pods/", status=500, count=10_000)
    job = submit(world.a_member, yaml.safe_dump(document))
    drive.run_until(lambda: kubelet.pods(**{"pai.job": job_key(job)}))
    kube_server.clear_faults()
    [waiting] = kubelet.pods(**{"pai.job": job_key(job)})
    name = waiting["metadata"]["name"]
    assert kube_server.get_object("secrets", f"{name}-secrets", "pai-team-a") is None

    job = drive.wait_for_state(job, "RUNNING")
    pod = kubelet.pod(job, "main")
    assert pod["metadata"]["uid"] == waiting["metadata"]["uid"] == TaskAttempt.objects.get(pod_name=name).pod_uid
    secret = kube_server.get_object("secrets", f"{name}-secrets", "pai-team-a")
    assert {k: base64.b64decode(v).decode() for k, v in secret["data"].items()} == {
        "api_key": "sk-live-0123456789", "port": "8080",
    }
    container = pod["spec"]["containers"][0]
    assert {"name": "PAI_SECRETS_DIR", "value": "/usr/local/pai/secrets"} in container["env"]
    assert {"name": "pai-secrets", "mountPath": "/usr/local/pai/secrets", "readOnly": True} in container["volumeMounts"]
    # Shown nowhere else: not in the pod, the stored job, its diagnostics or events. An API
    # that failed through the client's retries paused the cluster: no creation failure was
    # counted against the task.
    ta = TaskAttempt.objects.get(pod_name=name)
    assert "creation failed" not in ta.diagnostics
    stored = Job.objects.get(pk=job.pk)
    shown = [json.dumps(pod), json.dumps(stored.spec), json.dumps(stored.launch), stored.protocol_text, ta.diagnostics,
             json.dumps(list(JobEvent.objects.filter(task_attempt=ta).values_list("message", flat=True)))]
    assert not [text for text in shown if "sk-live" in text or "c2stbGl2ZS" in text]

    client = APIClient()
    client.force_authenticate(world.a_member)
    assert client.put("/api/v2/jobs/a_member~secrets/executionType", {"value": "STOP"}, format="json").status_code in (200, 202)
    drive.wait_for_state(job, "STOPPED")
    assert kubelet.pods(**{"pai.job": job_key(job)}) == []
    assert kube_server.list_objects("secrets", "pai-team-a") == []


def test_a_guaranteed_job_preempts_an_opportunistic_one_which_is_retried(world, drive, kubelet, submit):
    filler = submit(world.b_member, job_yaml("filler", vc="team_b", priority="oppo", roles={"main": {"instances": 2, "gpu": 8, "commands": ["sleep 30"]}}))
    other = submit(world.b_member, job_yaml("filler2", vc="team_b", priority="oppo", roles={"main": {"instances": 2, "gpu": 8, "commands": ["sleep 30"]}}))
    drive.wait_for_state(filler, "RUNNING")
    drive.wait_for_state(other, "RUNNING")
    urgent = submit(world.a_member, job_yaml("urgent", priority="prod", roles={"main": {"gpu": 8, "commands": ["sleep 1"]}}))
    drive.run_until(lambda: TaskAttempt.objects.filter(task__job_attempt__job=urgent, started_at__isnull=False).exists())
    kubelet.finish(kubelet.pod(urgent, "main"), 0)
    urgent = drive.wait_for_state(urgent, "SUCCEEDED", "FAILED")
    assert urgent.state == "SUCCEEDED"
    victims = [j for j in Job.objects.filter(pk__in=[filler.pk, other.pk]) if j.retries]
    assert len(victims) == 1
    victim = victims[0]
    first = victim.attempts.order_by("index").first()
    assert first.exit_code == -1003 and "preempted by job" in first.exit_diagnostics
    assert victim.state in ("WAITING", "RUNNING")


def test_a_node_going_not_ready_is_seen_and_its_lost_pod_retried_elsewhere(world, drive, kubelet, kube_server, submit):
    job = submit(world.a_member, job_yaml("on-bad-node", roles={"main": {"gpu": 8, "commands": ["sleep 60"]}}))
    job = drive.wait_for_state(job, "RUNNING")
    pod = kubelet.pod(job, "main")
    node = pod["spec"]["nodeName"]
    kube_server.set_node_ready(node, False)
    drive.run_until(lambda: not Node.objects.get(cluster=world.cluster, name=node).ready)
    # The node controller gives up on the node's pods.
    kubelet.finish(pod, 137, reason="NodeLost")
    drive.run_until(lambda: kubelet.pods(**{"pai.job": job_key(job), "pai.attempt": "1"}))
    assert kubelet.pod(job, "main", attempt=1)["spec"]["nodeName"] != node
    assert job.attempts.order_by("index").first().exit_code == -1001
    kube_server.set_node_ready(node, True)
    drive.run_until(lambda: Node.objects.get(cluster=world.cluster, name=node).ready)


def test_a_dropped_watch_and_a_410_lose_no_transition(world, drive, kubelet, kube_server, submit):
    job = submit(world.a_member, job_yaml("watched", roles={"main": {"instances": 3, "gpu": 1, "commands": ["true"]}}))
    job = drive.wait_for_state(job, "RUNNING")
    # The connection is cut just as a pod ends: the watch resumes from its last version.
    kube_server.drop_watches(abrupt=True)
    kubelet.finish(kubelet.pod(job, "main", 0), 0)
    drive.run_until(lambda: TaskAttempt.objects.filter(task__job_attempt__job=job, completed_at__isnull=False).count() == 1)
    # Now the pod watch cannot reconnect while a pod ends and the history is compacted:
    # the watch relists after 410, the worker's cursor expires and it relists too.
    kube_server.inject_fault("GET", r"^/api/v1/pods$", status=503, count=10_000)
    kube_server.drop_watches()
    kubelet.finish(kubelet.pod(job, "main", 1), 0)
    kubelet.finish(kubelet.pod(job, "main", 2), 0)
    kube_server.compact()
    kube_server.clear_faults()
    relists = drive.backend.watch_stats["pod_relists"]
    job = drive.wait_for_state(job, "SUCCEEDED", "FAILED")
    assert job.state == "SUCCEEDED"
    assert {code for *_, code in task_codes(job)} == {0}
    assert drive.backend.watch_stats["pod_relists"] > relists


@pytest.mark.parametrize("status", [500, 429])
def test_api_errors_during_creation_leave_no_duplicate_and_no_lost_job(world, drive, kubelet, kube_server, submit, status):
    # The first create is carried out but its reply lost; then the API fails for longer
    # than one call's retries.
    kube_server.inject_fault("POST", r"/namespaces/pai-team-a/pods$", status=status, count=1, commit=True, retry_after=0)
    kube_server.inject_fault("POST", r"/namespaces/pai-team-a/pods$", status=status, count=6, retry_after=0)
    job = submit(world.a_member, job_yaml(f"flaky-{status}", roles={"main": {"instances": 2, "gpu": 1, "commands": ["true"]}}))
    job = drive.wait_for_state(job, "RUNNING")
    pods = kubelet.pods(**{"pai.job": job_key(job)})
    assert sorted(p["metadata"]["name"] for p in pods) == sorted(
        TaskAttempt.objects.filter(task__job_attempt__job=job).values_list("pod_name", flat=True)
    )
    assert {p["metadata"]["uid"] for p in pods} == set(
        TaskAttempt.objects.filter(task__job_attempt__job=job).values_list("pod_uid", flat=True)
    )
    for pod in pods:
        kubelet.finish(pod, 0)
    job = drive.wait_for_state(job, "SUCCEEDED", "FAILED")
    assert job.state == "SUCCEEDED" and job.attempts.count() == 1


def test_a_pod_deleted_by_someone_else_is_a_transient_failure(world, drive, kubelet, kube_server, submit):
    from kubernetes import client

    job = submit(world.a_member, job_yaml("deleted", retry=0))
    job = drive.wait_for_state(job, "RUNNING")
    pod = kubelet.pod(job, "main")
    client.CoreV1Api(kube_server.api_client()).delete_namespaced_pod(
        pod["metadata"]["name"], pod["metadata"]["namespace"], grace_period_seconds=0
    )
    drive.run_until(lambda: job.attempts.count() == 2)
    first = job.attempts.order_by("index").first()
    assert first.exit_code == -101
    assert Job.objects.get(pk=job.pk).retries == 1


def test_orphaned_pods_are_deleted_and_foreign_pods_left_alone(world, kube_cluster, kubelet, kube_server):
    def pod(name, labels):
        return {"metadata": {"name": name, "labels": labels}, "spec": {"nodeName": "gpu-node-1", "containers": [{"name": "main", "image": "busybox"}]}}

    kube_server.create_object("pods", pod("orphan", {"pai.job": "pai-999-1", "app.kubernetes.io/managed-by": "pai"}), namespace="pai-team-a")
    kube_server.create_object("pods", pod("someone-elses", {"app": "web"}), namespace="pai-team-a")
    worker = Worker(kube_cluster)
    try:
        worker.cycle()
    finally:
        worker.close()
    deleting = {p["metadata"]["name"]: bool(p["metadata"].get("deletionTimestamp")) for p in kubelet.pods()}
    assert deleting == {"orphan": True, "someone-elses": False}
    kubelet.step()
    assert [p["metadata"]["name"] for p in kubelet.pods()] == ["someone-elses"]


def test_an_image_that_cannot_be_pulled_fails_the_job_permanently(world, drive, kubelet, kube_server, submit):
    job = submit(world.a_member, job_yaml("bad-image", retry=3))

    def pull_fails():
        # The kubelet cannot pull the image: the pod stays Pending in ImagePullBackOff.
        for pod in kubelet.pods():
            meta = pod["metadata"]
            if pod.get("status", {}).get("phase") == "Pending" and not meta.get("deletionTimestamp"):
                kube_server.wait_image_pull(meta["namespace"], meta["name"], reason="ImagePullBackOff")
        kube_server.finalize_deletions()

    job = drive.wait_for_state(job, "FAILED", "SUCCEEDED", act=pull_fails)
    assert job.state == "FAILED"
    assert job.app_exit_code == 254
    assert job.retries == 0
    assert "ImagePullBackOff" in job.attempts.get().exit_diagnostics
    assert kubelet.pods(**{"pai.job": job_key(job)}) == []


def test_the_preemptor_gets_pods_only_once_its_victims_pods_are_deleted(world, drive, kubelet, kube_server, submit):
    victim = submit(world.a_member, job_yaml("victim", roles={"main": {"instances": 2, "gpu": 8, "commands": ["sleep 600"]}}))
    drive.wait_for_state(victim, "RUNNING")
    urgent = submit(world.a_member, job_yaml("urgent", priority="prod", roles={"main": {"gpu": 8, "commands": ["sleep 600"]}}))

    def victim_pods():
        return kubelet.pods(**{"pai.job": job_key(victim)})

    # Planned, then carried out: the victim's pods are being deleted, gracefully.
    drive.run_until(lambda: victim_pods() and all(p["metadata"].get("deletionTimestamp") for p in victim_pods()),
                    act=kubelet.start_pending)
    assert Job.objects.get(pk=urgent.pk).wait_reason.startswith("preempting: holds its cells on ")
    # Their containers end, but the pods are not deleted yet: no pod for the preemptor.
    for pod in victim_pods():
        kubelet.finish(pod, 143)
    for _ in range(3):
        drive.worker.cycle()
        kubelet.start_pending()
    assert len(victim_pods()) == 2 and kubelet.pods(**{"pai.job": job_key(urgent)}) == []
    # A new leader rebuilds the preemption in progress from the database.
    drive.worker.close()
    drive.worker = Worker(world.cluster)
    drive.worker.cycle()
    engine = drive.worker.controller.engine
    assert (engine.state_of(str(victim.pk)), engine.state_of(str(urgent.pk))) == ("terminating", "preempting")
    assert kubelet.pods(**{"pai.job": job_key(urgent)}) == []

    kube_server.finalize_deletions()
    drive.wait_for_state(urgent, "RUNNING", act=kubelet.start_pending)
    assert victim_pods() == []
    first = Job.objects.get(pk=victim.pk).attempts.order_by("index").first()
    assert first.exit_code == -1003


def test_cancelling_a_planned_preemption_leaves_the_victim_running(world, drive, kubelet, submit):
    victim = submit(world.a_member, job_yaml("victim", roles={"main": {"instances": 2, "gpu": 8, "commands": ["sleep 600"]}}))
    drive.wait_for_state(victim, "RUNNING")
    urgent = submit(world.a_member, job_yaml("urgent", priority="prod", roles={"main": {"gpu": 8, "commands": ["sleep 600"]}}))
    drive.worker.cycle()
    assert Job.objects.get(pk=urgent.pk).wait_reason.startswith("preempting job")

    client = APIClient()
    client.force_authenticate(world.a_member)
    assert client.put("/api/v2/jobs/a_member~urgent/executionType", {"value": "STOP"}, format="json").status_code in (200, 202)
    for _ in range(3):
        drive.worker.cycle()
        kubelet.step()

    victim = Job.objects.get(pk=victim.pk)
    assert victim.state == "RUNNING" and victim.attempts.count() == 1
    pods = kubelet.pods(**{"pai.job": job_key(victim)})
    assert len(pods) == 2 and not any(p["metadata"].get("deletionTimestamp") for p in pods)
    assert Job.objects.get(pk=urgent.pk).state == "STOPPED"


def test_what_the_feed_says_of_an_ended_pod_costs_no_lookup(world, drive, kubelet, kube_server, submit):
    # Once a task attempt's end is stored, its pod's deletion changes nothing: the worker
    # does not look the pod up again (at 10,000 pods those lookups were a third of a cycle).
    job = submit(world.a_member, job_yaml("short", roles={"main": {"instances": 2, "gpu": 1, "commands": ["true"]}}))
    drive.wait_for_state(job, "RUNNING")
    for pod in kubelet.pods(**{"pai.job": job_key(job)}):
        kubelet.finish(pod, 0)
    assert drive.wait_for_state(job, "SUCCEEDED").state == "SUCCEEDED"
    names = set(TaskAttempt.objects.filter(task__job_attempt__job=job).values_list("pod_name", flat=True))
    with CaptureQueriesContext(connection) as queries:
        drive.run_until(lambda: not kubelet.pods(**{"pai.job": job_key(job)}))
        drive.worker.cycle()  # the deletions are in the feed now
    lookups = [q["sql"] for q in queries if "jobs_taskattempt" in q["sql"] and any(name in q["sql"] for name in names)]
    assert lookups == []
    assert Job.objects.get(pk=job.pk).state == "SUCCEEDED"


def test_a_pods_stored_events_are_remembered_not_read_back(world, drive, kubelet, submit):
    # The worker remembers which events of a live pod it stored: a pod's later changes do
    # not read its events back from the database (at 10,000 pods, 30,000 rows a phase),
    # and no event is stored twice.
    job = submit(world.a_member, job_yaml("evented", roles={"main": {"instances": 2, "gpu": 1, "commands": ["true"]}}))
    drive.wait_for_state(job, "RUNNING")
    started = JobEvent.objects.filter(job=job, reason="Started").count()
    assert started == 2
    with CaptureQueriesContext(connection) as queries:
        for pod in kubelet.pods(**{"pai.job": job_key(job)}):
            kubelet.finish(pod, 0)
        assert drive.wait_for_state(job, "SUCCEEDED").state == "SUCCEEDED"
    reads = [q["sql"] for q in queries if q["sql"].lstrip().upper().startswith("SELECT") and '"jobs_jobevent"' in q["sql"]]
    assert reads == []
    stored = list(JobEvent.objects.filter(job=job).values_list("task_attempt_id", "reason", "first_seen"))
    assert len(stored) == len(set(stored)) and JobEvent.objects.filter(job=job, reason="Started").count() == 2


def test_a_created_pod_that_still_waits_costs_no_lookup_and_its_start_is_seen(world, drive, kubelet, kube_server, submit):
    job = submit(world.a_member, job_yaml("waits", roles={"main": {"instances": 2, "gpu": 1, "commands": ["true"]}}))
    drive.worker.cycle()  # placed and created
    pods = kubelet.pods(**{"pai.job": job_key(job)})
    assert len(pods) == 2 and {p["status"]["phase"] for p in pods} == {"Pending"}
    names = {p["metadata"]["name"] for p in pods}
    with CaptureQueriesContext(connection) as queries:
        drive.worker.cycle()  # the feed reports them, waiting: nothing new
    lookups = [q["sql"] for q in queries if "jobs_taskattempt" in q["sql"] and any(name in q["sql"] for name in names)]
    assert lookups == []
    # Their start is news: it is looked up and applied.
    assert drive.wait_for_state(job, "RUNNING").state == "RUNNING"
    assert set(TaskAttempt.objects.filter(pod_name__in=names).values_list("state", flat=True)) == {"RUNNING"}


def test_on_a_host_of_two_skus_each_pod_gets_its_skus_devices_by_index(shared_hosts, drive, kubelet, submit):
    # gpu-node-4 carries 8 A100 and 4 T4 (its devices 8-11), all counted as nvidia.com/gpu:
    # a device plugin could hand a T4 pod an A100, so its pods name their devices.
    world = shared_hosts
    t4 = submit(world.a_member, sku_job("t4", sku="T4", command="sleep 600"))
    whole = submit(world.a_member, sku_job("whole", gpu=8, sku="A100", command="sleep 600"))
    for job in (t4, whole):
        drive.wait_for_state(job, "RUNNING")
    t4_pod, whole_pod = kubelet.pod(t4, "main"), kubelet.pod(whole, "main")
    assert t4_pod["spec"]["nodeName"] == "gpu-node-4"
    container = t4_pod["spec"]["containers"][0]
    assert {e["name"]: e["value"] for e in container["env"]}["NVIDIA_VISIBLE_DEVICES"] == "8,9"
    assert "nvidia.com/gpu" not in container["resources"]["limits"]
    # A pod on a host of one SKU is counted by the device plugin as before.
    assert whole_pod["spec"]["nodeName"] == "gpu-node-1"
    whole_container = whole_pod["spec"]["containers"][0]
    assert whole_container["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert "NVIDIA_VISIBLE_DEVICES" not in {e["name"] for e in whole_container["env"]}
