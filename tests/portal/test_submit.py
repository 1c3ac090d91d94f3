"""The submit page through Django's test client: the form writes the YAML, Check says what
POST /api/v2/jobs would say (at the field's line), Submit goes through the API's service
(throttles, quotas, size limit, audit), import, export, templates and clone."""

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from apps.audit.models import AuditEntry
from apps.jobs.models import Job, JobSecret
from apps.portal import submission
from tests.jobs.factories import submitted_job

SUBMIT = "/submit/"
GOOD = """protocolVersion: 2
name: portal-job
type: job
prerequisites:
  - name: image
    type: dockerimage
    uri: ubuntu:22.04
defaults:
  virtualCluster: team_a
taskRoles:
  worker:
    instances: 1
    dockerImage: image
    resourcePerInstance: {gpu: 1, cpu: 4, memoryMB: 8192}
    commands:
      - echo hi
"""
BAD_GPU = GOOD.replace("gpu: 1,", "gpu: -1,")


@pytest.fixture
def member(world):
    client = Client()
    client.force_login(world.a_member)
    return client


@pytest.fixture
def api_post():
    def post(user, text):
        client = APIClient()
        client.force_authenticate(user)
        return client.post("/api/v2/jobs", text, content_type="text/yaml")

    return post


def _form(**changes):
    data = {
        "action": "form", "name": "from-form", "virtual_cluster": "team_a", "image": "ubuntu:22.04", "retries": "2",
        "parameters": "epochs=3\nlr=0.1", "secrets": "token=s3cret",
        "roles-TOTAL_FORMS": "2", "roles-INITIAL_FORMS": "0", "roles-MIN_NUM_FORMS": "0", "roles-MAX_NUM_FORMS": "8",
        "roles-0-role": "trainer", "roles-0-instances": "2", "roles-0-gpu": "1", "roles-0-cpu": "4",
        "roles-0-memory_mb": "8192", "roles-0-sku": "A100", "roles-0-commands": "echo <% $parameters.epochs %>\nsleep 1",
        "roles-1-role": "", "roles-1-instances": "1", "roles-1-gpu": "1", "roles-1-cpu": "4",
        "roles-1-memory_mb": "8192", "roles-1-sku": "", "roles-1-commands": "",
    }
    data.update(changes)
    return data


def test_the_page_needs_a_sign_in_and_offers_only_usable_vcs(world, member):
    assert Client().get(SUBMIT).status_code == 302
    page = member.get(SUBMIT)
    assert page.status_code == 200
    choices = page.context["form"].fields["virtual_cluster"].choices
    assert choices == [("team_a", "team_a")]
    assert b'href="/submit/"' in page.content  # the navigation links here
    for template in submission.job_templates():
        assert template.title.encode() in page.content


def test_the_form_writes_the_yaml_the_api_accepts(world, member, api_post):
    page = member.post(SUBMIT, _form())
    assert page.status_code == 200, page.context["errors"]
    document = yaml.safe_load(page.context["text"])
    assert document == {
        "protocolVersion": 2, "name": "from-form", "type": "job", "jobRetryCount": 2,
        "prerequisites": [{"name": "image", "type": "dockerimage", "uri": "ubuntu:22.04"}],
        "parameters": {"epochs": "3", "lr": "0.1"}, "secrets": {"token": "s3cret"},
        "defaults": {"virtualCluster": "team_a"},
        "taskRoles": {"trainer": {
            "instances": 2, "dockerImage": "image", "resourcePerInstance": {"gpu": 1, "cpu": 4, "memoryMB": 8192},
            "commands": ["echo <% $parameters.epochs %>", "sleep 1"],
        }},
        "extras": {"hivedScheduler": {"taskRoles": {"trainer": {"skuType": "A100"}}}},
    }
    assert page.context["errors"] == [] and b"No errors" in page.content
    assert not Job.objects.exists()  # writing the YAML submits nothing
    assert api_post(world.a_member, page.context["text"]).status_code == 202


def test_the_form_names_its_bad_fields_and_refuses_other_teams_vcs(world, member):
    page = member.post(SUBMIT, _form(virtual_cluster="team_b", **{"roles-0-gpu": "-1", "roles-0-commands": ""}))
    assert page.status_code == 400
    assert page.context["form"].errors["virtual_cluster"]
    row = page.context["roles"].forms[0]
    assert set(row.errors) == {"gpu", "commands"}
    assert b"Virtual cluster: Select a valid choice" in page.content
    no_roles = member.post(SUBMIT, _form(**{"roles-0-role": ""}))
    assert no_roles.status_code == 400 and b"give at least one task role" in no_roles.content


def test_check_says_what_the_api_says_at_the_fields_line(world, member, api_post):
    page = member.post(SUBMIT, {"action": "check", "yaml": BAD_GPU})
    assert page.status_code == 400
    [problem] = page.context["errors"]
    assert problem.path == "taskRoles.worker.resourcePerInstance.gpu"
    assert problem.line == BAD_GPU.splitlines().index("    resourcePerInstance: {gpu: -1, cpu: 4, memoryMB: 8192}") + 1
    api = api_post(world.a_member, BAD_GPU)
    assert api.status_code == 400 and api.json()["message"] == problem.text
    assert b'id="where-%d" class="bad"' % problem.line in page.content
    assert not Job.objects.exists()


def test_check_of_a_good_job_shows_the_apis_warnings_and_writes_nothing(world, member, api_post):
    text = GOOD + "extras:\n  somethingNew: 1\n"
    page = member.post(SUBMIT, {"action": "check", "yaml": text})
    assert page.status_code == 200 and page.context["errors"] == []
    warnings = [p.text for p in page.context["warnings"]]
    assert warnings == ["extras.somethingNew: kept; pai does not act on it"]
    assert page.context["warnings"][0].line == text.splitlines().index("  somethingNew: 1") + 1
    assert not Job.objects.exists() and not AuditEntry.objects.filter(action="job.submit").exists()
    assert api_post(world.a_member, text).json()["warnings"] == warnings


def test_check_endpoint_answers_json_for_as_you_type(world, member):
    bad = member.post(reverse("portal:submit-check"), {"yaml": "name: [unclosed"})
    assert bad.status_code == 400
    [error] = bad.json()["errors"]
    assert error["path"] == "body" and error["line"] == 2 and "not valid YAML at line 2" in error["message"]
    good = member.post(reverse("portal:submit-check"), {"yaml": GOOD})
    assert good.status_code == 200 and good.json() == {"ok": True, "errors": [], "warnings": []}
    assert member.get(reverse("portal:submit-check")).status_code == 405


def test_submit_lands_on_the_job_page_through_the_apis_service(world, member):
    answer = member.post(SUBMIT, {"action": "submit", "yaml": GOOD})
    assert answer.status_code == 303
    assert answer["Location"] == reverse("portal:job-detail", kwargs={"username": "a_member", "name": "portal-job"})
    job = Job.objects.get(owner=world.a_member, name="portal-job")
    assert job.virtual_cluster == world.vc_a
    assert AuditEntry.objects.filter(action="job.submit", actor=world.a_member).count() == 1


def test_a_refused_submit_names_the_field_and_writes_nothing(world, member):
    other = member.post(SUBMIT, {"action": "submit", "yaml": GOOD.replace("virtualCluster: team_a",
                                                                            "virtualCluster: team_b")})
    assert other.status_code == 404
    assert [p.path for p in other.context["errors"]] == ["defaults.virtualCluster"]
    too_big = member.post(SUBMIT, {"action": "submit", "yaml": GOOD.replace("gpu: 1,", "gpu: 64,")})
    assert too_big.status_code == 400 and too_big.context["errors"][0].path.startswith("taskRoles")
    assert member.post(SUBMIT, {"action": "submit", "yaml": GOOD}).status_code == 303
    again = member.post(SUBMIT, {"action": "submit", "yaml": GOOD})
    assert again.status_code == 409 and again.context["errors"][0].path == "name"
    assert Job.objects.count() == 1 and AuditEntry.objects.filter(action="job.submit").count() == 1


def test_submit_obeys_the_size_limit_and_the_apis_throttle(world, member, settings):
    settings.PAI_JOB_PROTOCOL_MAX_BYTES = 2048
    # Two a minute: a refused submission counts, as it does in the API.
    settings.PAI_THROTTLE_JOB_SUBMIT = "2/minute"
    huge = member.post(SUBMIT, {"action": "submit", "yaml": GOOD + "#" * 2048})
    assert huge.status_code == 413 and huge.context["errors"][0].path == "body"
    assert member.post(SUBMIT, {"action": "submit", "yaml": GOOD}).status_code == 303
    second = member.post(SUBMIT, {"action": "submit", "yaml": GOOD.replace("portal-job", "second")})
    assert second.status_code == 429 and int(second["Retry-After"]) >= 1
    assert not Job.objects.filter(name="second").exists()


def test_secrets_submitted_from_the_page_are_kept_apart_and_masked(world, member):
    text = GOOD.replace("defaults:", "secrets:\n  token: s3cret\ndefaults:")
    assert member.post(SUBMIT, {"action": "submit", "yaml": text}).status_code == 303
    job = Job.objects.get(name="portal-job")
    assert JobSecret.objects.get(job=job).values == {"token": "s3cret"}
    assert "s3cret" not in job.protocol_text


def test_import_reads_a_bounded_utf8_file_and_export_downloads_it(world, member, settings):
    upload = SimpleUploadedFile("mine.yaml", BAD_GPU.encode(), content_type="text/yaml")
    page = member.post(SUBMIT, {"action": "import", "file": upload})
    assert page.status_code == 400 and page.context["text"] == BAD_GPU
    assert page.context["errors"][0].path == "taskRoles.worker.resourcePerInstance.gpu"
    assert b"Imported mine.yaml" in page.content
    binary = member.post(SUBMIT, {"action": "import", "file": SimpleUploadedFile("x.yaml", b"\xff\xfe name")})
    assert binary.status_code == 400 and binary.context["errors"][0].path == "file"
    assert member.post(SUBMIT, {"action": "import"}).status_code == 400
    settings.PAI_JOB_PROTOCOL_MAX_BYTES = 1024
    large = member.post(SUBMIT, {"action": "import", "file": SimpleUploadedFile("big.yaml", b"#" * 1025)})
    assert large.status_code == 413 and large.context["text"] == ""

    settings.PAI_JOB_PROTOCOL_MAX_BYTES = 256 * 1024
    download = member.post(SUBMIT, {"action": "export", "yaml": GOOD})
    assert download.status_code == 200 and download.content.decode() == GOOD
    assert download["Content-Disposition"] == 'attachment; filename="portal-job.yaml"'
    odd = member.post(SUBMIT, {"action": "export", "yaml": 'name: "../x"\n'})
    assert odd["Content-Disposition"] == 'attachment; filename="job.yaml"'
    assert member.post(SUBMIT, {"action": "nonsense"}).status_code == 400


def test_every_template_checks_clean_for_a_member(world, member):
    templates = submission.job_templates()
    assert len(templates) >= 3
    for template in templates:
        page = member.get(SUBMIT, {"template": template.slug})
        assert page.status_code == 200 and page.context["text"] == template.text
        checked = member.post(SUBMIT, {"action": "check", "yaml": template.text})
        assert checked.status_code == 200, (template.slug, [p.text for p in checked.context["errors"]])
        # The simple form was filled from the template.
        assert page.context["form"].initial["name"] == yaml.safe_load(template.text)["name"]
    assert member.get(SUBMIT, {"template": "../settings"}).status_code == 404


def test_clone_opens_the_page_with_the_jobs_yaml_under_a_new_name(world, member):
    job = submitted_job(world.a_member, name="original")
    job.protocol_text = job.protocol_text.replace("taskRoles:", "secrets:\n  token: '******'\ntaskRoles:", 1)
    job.save()
    page = member.get(reverse("portal:job-clone", kwargs={"username": "a_member", "name": "original"}))
    assert page.status_code == 200
    document = yaml.safe_load(page.context["text"])
    assert document["name"] == "original-clone" and document["secrets"] == {"token": ""}
    assert document["taskRoles"] == yaml.safe_load(job.protocol_text)["taskRoles"]
    assert b"fill in secrets.token" in page.content
    submitted_job(world.a_member, name="original-clone")
    again = member.get(reverse("portal:job-clone", kwargs={"username": "a_member", "name": "original"}))
    assert yaml.safe_load(again.context["text"])["name"] == "original-clone-2"
    # The team's admin may read the job, and so clone it (as their own).
    admin = Client()
    admin.force_login(world.a_admin)
    assert admin.get(reverse("portal:job-clone", kwargs={"username": "a_member", "name": "original"})).status_code == 200


def test_another_tenants_job_cannot_be_cloned(world):
    submitted_job(world.a_member, name="original")
    other = Client()
    other.force_login(world.b_member)
    hidden = other.get(reverse("portal:job-clone", kwargs={"username": "a_member", "name": "original"}))
    missing = other.get(reverse("portal:job-clone", kwargs={"username": "a_member", "name": "nothing"}))
    assert hidden.status_code == missing.status_code == 404
    assert hidden.content == missing.content


def test_checks_count_against_the_apis_request_rate(world, member, monkeypatch):
    from rest_framework.throttling import UserRateThrottle

    monkeypatch.setattr(UserRateThrottle, "THROTTLE_RATES", {**UserRateThrottle.THROTTLE_RATES, "user": "2/minute"})
    check = reverse("portal:submit-check")
    assert member.post(check, {"yaml": GOOD}).status_code == 200
    assert member.post(SUBMIT, {"action": "check", "yaml": GOOD}).status_code == 200
    late = member.post(check, {"yaml": GOOD})
    assert late.status_code == 429 and late.json()["ok"] is False and int(late["Retry-After"]) >= 1
    assert member.post(SUBMIT, {"action": "submit", "yaml": GOOD}).status_code == 429
    assert not Job.objects.exists()


def test_the_checks_errors_of_the_forms_yaml_show_at_the_form_fields(world, member):
    page = member.post(SUBMIT, _form(**{"roles-0-gpu": "64", "roles-0-sku": "CPU", "name": "ok-name"}))
    assert page.status_code == 400
    [problem] = page.context["errors"]
    assert problem.path == "extras.hivedScheduler.taskRoles.trainer.skuType"
    assert page.context["roles"].forms[0].errors["sku"] == [problem.message]
    quota = member.post(SUBMIT, _form(**{"roles-0-gpu": "64"}))
    assert quota.status_code == 400 and quota.context["errors"][0].path == "taskRoles.trainer"
    assert quota.context["roles"].forms[0].errors["role"] == [quota.context["errors"][0].message]
    assert not Job.objects.exists()


def test_a_path_finds_its_line_through_dotted_keys_and_lists():
    text = ("name: x\nextras:\n  com.microsoft.pai.runtimeplugin:\n    - plugin: ssh\n    - plugin: tensorboard\n"
            "taskRoles:\n  a:\n    commands:\n      - one\n      - two\n")
    problems = submission.locate(text, [
        "extras.com.microsoft.pai.runtimeplugin[1]: kept", "taskRoles.a.commands[1]: bad",
        "taskRoles.a.resourcePerInstance: is required", "taskRoles.b: nowhere", "no path at all",
    ])
    assert [(p.path, p.line) for p in problems] == [
        ("extras.com.microsoft.pai.runtimeplugin[1]", 5), ("taskRoles.a.commands[1]", 10),
        ("taskRoles.a.resourcePerInstance", 7), ("taskRoles.b", 6), ("", None),
    ]


def test_the_form_starts_on_the_users_default_vc(world, member):
    from apps.accounts.models import UserProfile
    from tests import factories as f

    other = f.VirtualClusterFactory(name="a_second", tenant=world.tenant_a, cluster=world.cluster)
    f.VirtualClusterGrantFactory(virtual_cluster=other, group=world.group_a)
    assert member.get(SUBMIT).context["form"].initial["virtual_cluster"] == "a_second"  # first by name
    UserProfile.objects.update_or_create(user=world.a_member, defaults={"default_virtual_cluster": world.vc_a})
    page = member.get(SUBMIT)
    assert page.context["form"].initial["virtual_cluster"] == "team_a"
    assert page.context["form"].fields["virtual_cluster"].choices == [("a_second", "a_second"), ("team_a", "team_a")]
    # A template names no VC: the job goes to the default one, which the form shows.
    assert member.get(SUBMIT, {"template": "1-single-gpu"}).context["form"].initial["virtual_cluster"] == "team_a"


def test_unstorable_text_gets_a_4xx_naming_the_field_from_every_action(world, member):
    # Browsers send no lone surrogates in a form (they become U+FFFD); a file may hold their bytes.
    bad = "\x00"
    for action in ("check", "submit"):
        answer = member.post(SUBMIT, {"action": action, "yaml": GOOD.replace("echo hi", f"echo {bad}")})
        assert answer.status_code == 400 and answer.context["errors"][0].path == "body", action
    assert member.post(SUBMIT, {"action": "export", "yaml": GOOD + bad}).status_code == 200
    form = member.post(SUBMIT, _form(name=f"x{bad}", image=f"ubuntu{bad}", **{"roles-0-commands": f"echo {bad}"}))
    assert form.status_code == 400
    assert {"name", "image"} <= set(form.context["form"].errors)
    assert "commands" in form.context["roles"].forms[0].errors
    for content in (b"name: \x00", "name: \ud800".encode("utf-8", "surrogatepass")):
        imported = member.post(SUBMIT, {"action": "import", "file": SimpleUploadedFile("x.yaml", content)})
        assert imported.status_code == 400 and imported.context["errors"][0].path == "file"
    assert member.post(reverse("portal:submit-check"), {"yaml": f"name: {bad}"}).status_code == 400
    assert not Job.objects.exists()


def test_a_task_role_is_added_without_a_script(world, member):
    first = member.get(SUBMIT).context["roles"]
    assert [row.initial.get("role") for row in first.forms] == ["worker", ""]
    written = member.post(SUBMIT, _form())
    rows = written.context["roles"].forms
    assert [row.initial.get("role") for row in rows] == ["trainer", ""]
    assert rows[0].initial["sku"] == "A100" and rows[0].initial["instances"] == 2
    two = member.post(SUBMIT, _form(**{"roles-1-role": "evaluator", "roles-1-gpu": "0", "roles-1-cpu": "2",
                                       "roles-1-commands": "echo eval"}))
    assert two.status_code == 200, [p.text for p in two.context["errors"]]
    assert list(yaml.safe_load(two.context["text"])["taskRoles"]) == ["trainer", "evaluator"]
    assert [row.initial.get("role") for row in two.context["roles"].forms] == ["trainer", "evaluator", ""]
