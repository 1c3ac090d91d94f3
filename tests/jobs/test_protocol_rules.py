"""One failing input per rule of the job protocol, with the message it gets."""

import pytest

from apps.jobs.models import Job

from .conftest import job_document, submit


def _set(path, value):
    """A mutation setting `value` at a dotted path (list indices as ints) of the document."""

    def mutate(document):
        node = document
        for key in path[:-1]:
            node = node[key]
        if value is _DELETE:
            del node[path[-1]]
        else:
            node[path[-1]] = value
        return document

    return mutate


_DELETE = object()
SECRET_NAMES = (
    "secret names are 1 to 253 letters, digits, '-', '_' or '.', neither '.' nor starting with '..' "
    "(each becomes a file name)"
)
TR = ["taskRoles", "taskrole"]
RES = TR + ["resourcePerInstance"]


def _rename_task_role(new):
    def mutate(document):
        document["taskRoles"] = {new: document["taskRoles"]["taskrole"]}
        document["extras"]["hivedScheduler"]["taskRoles"] = {}
        return document

    return mutate


def _add_prerequisite(item):
    def mutate(document):
        document["prerequisites"].append(item)
        return document

    return mutate


def _with_deployments(deployments, default=None):
    def mutate(document):
        document["deployments"] = deployments
        if default:
            document["defaults"]["deployment"] = default
        return document

    return mutate


RULES = [
    ("protocol version", _set(["protocolVersion"], 3), "protocolVersion: must be 2"),
    ("name required", _set(["name"], _DELETE), "name: is required"),
    ("name characters", _set(["name"], "my job!"), "name: must be 1 to 255 letters, digits, '_' or '-'"),
    ("name length", _set(["name"], "x" * 256), "name: must be 1 to 255 letters, digits, '_' or '-'"),
    ("type", _set(["type"], "component"), "type: must be 'job'"),
    ("task roles required", _set(["taskRoles"], _DELETE), "taskRoles: is required"),
    ("at least one task role", _set(["taskRoles"], {}), "taskRoles: must be a map of at least one task role"),
    ("no other top-level keys", _set(["schedule"], "nightly"), "schedule: is not a field of the job protocol"),
    ("jobRetryCount", _set(["jobRetryCount"], -3), "jobRetryCount: must be an integer ≥ -2 (-1: retry failures without limit, -2: retry even after success)"),
    ("parameters map", _set(["parameters"], "x"), "parameters: must be a map"),
    ("secrets map", _set(["secrets"], ["x"]), "secrets: must be a map"),
    ("secret name characters", _set(["secrets"], {"api key": "x"}), f"secrets.api key: {SECRET_NAMES}"),
    ("secret name with a slash", _set(["secrets"], {"../etc": "x"}), f"secrets.../etc: {SECRET_NAMES}"),
    ("secret name dot", _set(["secrets"], {".": "x"}), f"secrets..: {SECRET_NAMES}"),
    ("secret name starting with two dots", _set(["secrets"], {"..data": "x"}), f"secrets...data: {SECRET_NAMES}"),
    ("secret name with a final newline", _set(["secrets"], {"key\n": "x"}), f"secrets.key\n: {SECRET_NAMES}"),
    ("secret name length", _set(["secrets"], {"k" * 254: "x"}), f"secrets.{'k' * 254}: {SECRET_NAMES}"),
    ("secrets size", _set(["secrets"], {"a": "x" * 2**20, "b": 7}),
     "secrets: the values must total at most 1048576 bytes (1 MiB, what one Kubernetes Secret holds), not 1048577"),
    ("prerequisites list", _set(["prerequisites"], {"a": 1}), "prerequisites: must be a list"),
    ("prerequisite type", _set(["prerequisites", 0, "type"], "model"),
     "prerequisites[0].type: must be one of dockerimage, script, output, data"),
    ("prerequisite name", _set(["prerequisites", 0, "name"], _DELETE), "prerequisites[0].name: is required"),
    ("dockerimage uri", _set(["prerequisites", 0, "uri"], _DELETE), "prerequisites[0].uri: is required"),
    ("auth fields", _set(["prerequisites", 0, "auth"], {"token": "x"}),
     "prerequisites[0].auth.token: is not a field of the job protocol"),
    ("prerequisite names unique per type",
     _add_prerequisite({"name": "docker_image_0", "type": "dockerimage", "uri": "busybox"}),
     "prerequisites[1].name: 'docker_image_0' is already the name of dockerimage prerequisite prerequisites[0] "
     "(names are unique per type)"),
    ("task role name", _rename_task_role("1worker"),
     "taskRoles.1worker: task role names start with a letter or '_', then letters, digits or '_'"),
    ("instances", _set(TR + ["instances"], 0), "taskRoles.taskrole.instances: must be an integer ≥ 1"),
    ("taskRetryCount", _set(TR + ["taskRetryCount"], -3),
     "taskRoles.taskrole.taskRetryCount: must be an integer ≥ -2 (-1: retry failures without limit, -2: retry even after success)"),
    ("dockerImage required", _set(TR + ["dockerImage"], _DELETE), "taskRoles.taskrole.dockerImage: is required"),
    ("dockerImage reference", _set(TR + ["dockerImage"], "nope"),
     "taskRoles.taskrole.dockerImage: no dockerimage prerequisite is named 'nope'"),
    ("data reference", _set(TR + ["data"], "dataset"), "taskRoles.taskrole.data: no data prerequisite is named 'dataset'"),
    ("output reference", _set(TR + ["output"], "out"), "taskRoles.taskrole.output: no output prerequisite is named 'out'"),
    ("script reference", _set(TR + ["script"], "code"), "taskRoles.taskrole.script: no script prerequisite is named 'code'"),
    ("unknown task role field", _set(TR + ["gpuType"], "A100"),
     "taskRoles.taskrole.gpuType: is not a field of the job protocol"),
    ("completion type", _set(TR + ["completion", "minFailedInstances"], -2),
     "taskRoles.taskrole.completion.minFailedInstances: must be an integer ≥ -1 or null"),
    ("completion bound", _set(TR + ["completion", "minSucceededInstances"], 3),
     "taskRoles.taskrole.completion.minSucceededInstances: must be -1, null, or between 1 and instances (1)"),
    ("shmMB", _set(TR + ["extraContainerOptions"], {"shmMB": -1}),
     "taskRoles.taskrole.extraContainerOptions.shmMB: must be an integer ≥ 0"),
    ("resources required", _set(TR + ["resourcePerInstance"], _DELETE),
     "taskRoles.taskrole.resourcePerInstance: is required"),
    ("memoryMB required", _set(RES + ["memoryMB"], _DELETE), "taskRoles.taskrole.resourcePerInstance.memoryMB: is required"),
    ("gpu negative", _set(RES + ["gpu"], -1), "taskRoles.taskrole.resourcePerInstance.gpu: must be an integer ≥ 0"),
    ("gpu not a number", _set(RES + ["gpu"], "two"), "taskRoles.taskrole.resourcePerInstance.gpu: must be an integer ≥ 0"),
    ("gpu fraction", _set(RES + ["gpu"], 0.5), "taskRoles.taskrole.resourcePerInstance.gpu: must be an integer ≥ 0"),
    ("cpu", _set(RES + ["cpu"], 0), "taskRoles.taskrole.resourcePerInstance.cpu: must be an integer ≥ 1"),
    ("memoryMB", _set(RES + ["memoryMB"], True), "taskRoles.taskrole.resourcePerInstance.memoryMB: must be an integer ≥ 1"),
    ("port count", _set(RES + ["ports"], {"http": -1}),
     "taskRoles.taskrole.resourcePerInstance.ports.http: must be an integer ≥ 0 (the number of ports)"),
    ("port label", _set(RES + ["ports"], {"my-port": 1}),
     "taskRoles.taskrole.resourcePerInstance.ports.my-port: port labels start with a letter or '_', then letters, "
     "digits or '_'"),
    ("commands required", _set(TR + ["commands"], _DELETE), "taskRoles.taskrole.commands: is required"),
    ("commands not empty", _set(TR + ["commands"], []),
     "taskRoles.taskrole.commands: must be a list of at least one command line"),
    ("command lines are strings", _set(TR + ["commands"], ["ok", {"run": "x"}]),
     "taskRoles.taskrole.commands[1]: must be a string (one command line)"),
    ("deployment shape", _with_deployments([{"name": "d"}]), "deployments[0].taskRoles: is required"),
    ("deployment task role", _with_deployments([{"name": "d", "taskRoles": {"ps": {"preCommands": ["x"]}}}]),
     "deployments[0].taskRoles.ps: no task role is named 'ps'"),
    ("deployment names unique", _with_deployments([{"name": "d", "taskRoles": {}}, {"name": "d", "taskRoles": {}}]),
     "deployments[1].name: 'd' is already a deployment's name"),
    ("default deployment", _with_deployments([{"name": "d", "taskRoles": {}}], default="prod"),
     "defaults.deployment: no deployment is named 'prod'"),
    ("default deployment", _set(["defaults", "deployment"], 5), "defaults.deployment: must be a string"),
    ("virtual cluster name", _set(["defaults", "virtualCluster"], 5),
     "defaults.virtualCluster: must be a virtual cluster name"),
    ("gangAllocation", _set(["extras", "gangAllocation"], "yes"), "extras.gangAllocation: must be true or false"),
    ("priority class", _set(["extras", "hivedScheduler", "jobPriorityClass"], "urgent"),
     "extras.hivedScheduler.jobPriorityClass: must be one of prod, test, oppo"),
    ("skuNumber", _set(["extras", "hivedScheduler", "taskRoles", "taskrole", "skuNumber"], 0),
     "extras.hivedScheduler.taskRoles.taskrole.skuNumber: must be an integer ≥ 1 or null"),
    ("hived task role", _set(["extras", "hivedScheduler", "taskRoles", "ps"], {"skuType": "A100"}),
     "extras.hivedScheduler.taskRoles.ps: no task role is named 'ps'"),
    ("storage mount path", _set(["extras", "storages"], [{"name": "team-a-data", "mountPath": "data"}]),
     "extras.storages[0].mountPath: must be an absolute path"),
    ("storage listed once", _set(["extras", "storages"], [{"name": "team-a-data"}, {"name": "team-a-data"}]),
     "extras.storages[1].name: 'team-a-data' is listed twice"),
    ("runtime plugins", _set(["extras", "com.microsoft.pai.runtimeplugin"], [{"parameters": {}}]),
     "extras.com.microsoft.pai.runtimeplugin[0].plugin: is required"),
    ("notifications", _set(["extras", "jobStatusChangeNotification"], {"paused": True}),
     "extras.jobStatusChangeNotification.paused: is not a field of the job protocol"),
    ("NUL characters", _set(TR + ["commands"], ["echo \x00"]), "taskRoles.taskrole.commands[0]: must be text without NUL characters or lone surrogates"),
    ("lone surrogates", _set(["description"], "bad \ud800"),
     "description: must be text without NUL characters or lone surrogates"),
    ("storable integers", _set(["jobRetryCount"], 2**40), "jobRetryCount: must be between -2147483647 and 2147483647"),
]


@pytest.mark.parametrize("mutate,message", [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_each_rule_rejects_its_failing_input_naming_the_field(world, api, settings, mutate, message):
    # Each rule holds whatever the size limit (tests/security/test_input_limits.py checks that one):
    # raised here, so that the 1 MiB of secrets can be sent at all.
    settings.PAI_JOB_PROTOCOL_MAX_BYTES = 4 * 2**20
    response = submit(api(world.a_member), mutate(job_document()), content_type="application/json")

    assert response.status_code == 400, response.json()
    body = response.json()
    assert body["code"] == "InvalidProtocolError"
    assert message in body["message"].split("; ")
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    "body,message",
    [
        ("name: [unclosed", "body: is not valid YAML at line "),
        ("- a\n- b\n", "body: must be a map (the job document)"),
        ("", "protocolVersion: is required; name: is required; type: is required; taskRoles: is required"),
        ("protocolVersion: 2\nretry: .nan\n", "body: numbers must be finite (no .nan or .inf)"),
    ],
)
def test_bodies_that_are_not_job_documents_are_rejected(world, api, body, message):
    response = api(world.a_member).post("/api/v2/jobs", body, content_type="text/yaml")

    assert response.status_code == 400
    assert response.json()["code"] == "InvalidProtocolError"
    assert response.json()["message"].startswith(message)


def test_all_broken_rules_are_reported_together(world, api):
    document = job_document(name="bad name", jobRetryCount=-3)
    response = submit(api(world.a_member), document)

    assert response.json()["message"].split("; ") == [
        "jobRetryCount: must be an integer ≥ -2 (-1: retry failures without limit, -2: retry even after success)",
        "name: must be 1 to 255 letters, digits, '_' or '-'",
    ]


def test_secret_names_that_are_file_names_are_accepted(world, api):
    secrets = {"db.password": "x", "API_KEY-2": 3, ".hidden": "y", "k" * 253: "z"}
    response = submit(api(world.a_member), job_document(secrets=secrets))

    assert response.status_code == 202, response.json()
    assert Job.objects.get().secret.values == secrets


def test_unresolved_placeholders_stay_as_written_and_are_reported(world, api):
    document = job_document()
    document["taskRoles"]["taskrole"]["commands"] = ["python main.py --lr <% $parameters.lr %>"]
    response = submit(api(world.a_member), document)

    assert response.status_code == 202
    assert "taskRoles.taskrole.commands: <% $parameters.lr %> does not resolve; kept as written" in (
        response.json()["warnings"]
    )
    job = Job.objects.get()
    assert job.launch["taskRoles"]["taskrole"]["commands"] == ["python main.py --lr <% $parameters.lr %>"]
