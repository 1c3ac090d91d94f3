"""What the submit page does besides rendering: the simple form and the YAML it writes, the
job templates shipped with the package, and where in the YAML text each error points.

The page checks and submits through `apps.jobs.services` (`check_job`, `submit_job`), the
very code behind `POST /api/v2/jobs`, so it says the same errors and warnings.
"""

import re
from dataclasses import dataclass
from pathlib import Path

import yaml
from django import forms
from django.conf import settings
from django.forms import formset_factory

from apps.clusters.models import CellType
from apps.jobs.protocol import MASK
from apps.jobs.protocol.schema import NAME_PATTERN, TASK_ROLE_PATTERN
from apps.jobs.protocol.structure import YAML_DUMPER, storable_text
from apps.virtualclusters.models import VirtualCluster
from pai.documents import YAML_LOADER

TEMPLATES_DIR = Path(__file__).parent / "job_templates"
MAX_TASK_ROLES = 8  # the form's rows; the YAML editor takes any number
MAX_ENTRIES = 100  # parameters or secrets the form takes
_PATH_FIRST = re.compile(r"^([A-Za-z_][^\s:]*): (.*)$", re.S)
_YAML_LINE = re.compile(r"at line (\d+), column \d+")


# --- Templates -------------------------------------------------------------------------

@dataclass(frozen=True)
class JobTemplate:
    slug: str
    title: str
    text: str


def job_templates():
    """The job files under `job_templates/`, titled by their first comment line."""
    found = []
    for path in sorted(TEMPLATES_DIR.glob("*.yaml")):
        text = path.read_text()
        first = text.splitlines()[0] if text else ""
        title = first.lstrip("# ").strip() if first.startswith("#") else path.stem
        found.append(JobTemplate(slug=path.stem, title=title, text=text))
    return found


def job_template(slug):
    return next((t for t in job_templates() if t.slug == slug), None)


# --- Errors at their place in the text --------------------------------------------------

@dataclass(frozen=True)
class Problem:
    path: str  # "taskRoles.worker.resourcePerInstance.gpu", or "" for the document itself
    message: str
    line: int | None  # 1-based line of the YAML text the path points at

    @property
    def text(self):
        return f"{self.path}: {self.message}" if self.path else self.message

    def as_json(self):
        return {"path": self.path, "message": self.message, "line": self.line}


def split_error(error):
    """("path", "rule") from the service's "path: rule" lines; ("", line) when there is no path."""
    match = _PATH_FIRST.match(error)
    return (match.group(1), match.group(2)) if match else ("", error)


def _compose(text):
    try:
        return yaml.compose(text, Loader=YAML_LOADER)
    except (yaml.YAMLError, RecursionError, ValueError):
        return None


def _line_of(root, path):
    """The line of the deepest node of `root` along `path` (1-based), or None. A map's keys may
    hold dots (`extras.com.microsoft.pai.runtimeplugin`): the longest key that fits wins."""
    node, rest, line = root, path, None
    for _ in range(256):
        if not rest or node is None:
            break
        if isinstance(node, yaml.MappingNode):
            best = None
            for key, value in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else None
                if not isinstance(name, str) or not name:
                    continue
                if rest == name or rest.startswith(name + ".") or rest.startswith(name + "["):
                    if best is None or len(name) > len(best[0].value):
                        best = (key, value)
            if best is None:
                break
            key, node = best
            line = key.start_mark.line + 1
            rest = rest[len(key.value):].lstrip(".")
        elif isinstance(node, yaml.SequenceNode):
            match = re.match(r"\[(\d+)\]\.?", rest)
            if not match or int(match.group(1)) >= len(node.value):
                break
            node = node.value[int(match.group(1))]
            line = node.start_mark.line + 1
            rest = rest[match.end():]
        else:
            break
    return line


def locate(text, errors):
    """[Problem] for the service's error lines, each with the line of `text` it is about."""
    root = _compose(text) if isinstance(text, str) and errors else None
    problems = []
    for error in errors:
        path, message = split_error(error)
        line = None
        syntax = _YAML_LINE.search(message) if path == "body" else None
        if syntax:
            line = int(syntax.group(1))
        elif root is not None and path and path != "body":
            line = _line_of(root, path)
        problems.append(Problem(path=path, message=message, line=line))
    return problems


def annotated_lines(text, problems):
    """[(number, line, [Problem])] of the YAML text, for the page that shows errors in place."""
    at = {}
    for problem in problems:
        if problem.line is not None:
            at.setdefault(problem.line, []).append(problem)
    return [(i, line, at.get(i, [])) for i, line in enumerate(text.splitlines(), start=1)]


# --- The simple form ---------------------------------------------------------------------

def _pairs(text):
    """{key: value} from "key=value" lines; a ValidationError naming the bad line."""
    pairs = {}
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > MAX_ENTRIES:
        raise forms.ValidationError(f"at most {MAX_ENTRIES} entries")
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key:
            raise forms.ValidationError(f"line {number}: write key=value")
        if key in pairs:
            raise forms.ValidationError(f"line {number}: {key} is given twice")
        pairs[key] = value.strip()
    return pairs


def _text_field(**kwargs):
    return forms.CharField(strip=True, **kwargs)


def _check_storable(value):
    if value and not storable_text(value):
        raise forms.ValidationError("must be text without NUL characters")
    return value


class JobForm(forms.Form):
    name = forms.RegexField(regex=NAME_PATTERN, max_length=255, label="Job name",
                            error_messages={"invalid": "1 to 255 letters, digits, '_' or '-'"})
    virtual_cluster = forms.ChoiceField(label="Virtual cluster", choices=())
    image = _text_field(max_length=1024, label="Docker image", help_text="e.g. ubuntu:22.04")
    retries = forms.IntegerField(min_value=0, max_value=100, initial=0, label="Job retries")
    parameters = _text_field(required=False, max_length=64 * 1024, widget=forms.Textarea(attrs={"rows": 3}),
                             help_text="key=value, one a line; commands use them as <% $parameters.key %>")
    secrets = _text_field(required=False, max_length=64 * 1024, widget=forms.Textarea(attrs={"rows": 3}),
                          help_text="key=value, one a line; commands use them as <% $secrets.key %>")

    def __init__(self, *args, vcs, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["virtual_cluster"].choices = [(name, name) for name, _ in vcs]

    def clean_image(self):
        return _check_storable(self.cleaned_data["image"])

    def clean_parameters(self):
        return _pairs(_check_storable(self.cleaned_data["parameters"]))

    def clean_secrets(self):
        return _pairs(_check_storable(self.cleaned_data["secrets"]))


def usable_vcs(user):
    """[(name, cluster id)] of the VCs the user may submit to, by name."""
    return list(VirtualCluster.objects.usable_by(user).order_by("name").values_list("name", "cluster_id"))


def sku_choices(vcs):
    """The leaf cell types (SKUs) of the clusters of `vcs` ([(name, cluster id)])."""
    clusters = {cluster for _, cluster in vcs}
    names = set(
        CellType.objects.filter(cluster_id__in=clusters, child__isnull=True).values_list("name", flat=True)
    ) if clusters else set()
    return [("", "(automatic)")] + [(name, name) for name in sorted(names)]


class TaskRoleForm(forms.Form):
    role = forms.RegexField(regex=TASK_ROLE_PATTERN, max_length=255, label="Task role", required=False,
                            error_messages={"invalid": "a letter or '_', then letters, digits or '_'"})
    instances = forms.IntegerField(min_value=1, max_value=10000, initial=1)
    gpu = forms.IntegerField(min_value=0, max_value=1024, initial=1, label="GPUs")
    cpu = forms.IntegerField(min_value=1, max_value=4096, initial=4, label="CPUs")
    memory_mb = forms.IntegerField(min_value=1, max_value=64 * 1024 * 1024, initial=8192, label="Memory (MB)")
    sku = forms.ChoiceField(required=False, label="SKU", choices=())
    commands = _text_field(required=False, max_length=64 * 1024, widget=forms.Textarea(attrs={"rows": 3}),
                           help_text="one command a line")

    def __init__(self, *args, skus=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["sku"].choices = list(skus)

    def clean_commands(self):
        return [line for line in _check_storable(self.cleaned_data["commands"]).splitlines() if line.strip()]

    def clean(self):
        data = super().clean()
        if data.get("role") and not data.get("commands"):
            self.add_error("commands", "give at least one command")
        return data


class _TaskRoleFormSet(forms.BaseFormSet):
    def clean(self):
        if any(self.errors):
            return
        roles = [f.cleaned_data.get("role") for f in self.forms if f.cleaned_data.get("role")]
        if not roles:
            raise forms.ValidationError("give at least one task role (a name and its commands)")
        duplicate = next((r for r in roles if roles.count(r) > 1), None)
        if duplicate:
            raise forms.ValidationError(f"task role {duplicate} is given twice")


TaskRoleFormSet = formset_factory(TaskRoleForm, formset=_TaskRoleFormSet, extra=0, max_num=MAX_TASK_ROLES,
                                  absolute_max=MAX_TASK_ROLES, validate_max=True)


def role_formset(vcs, data=None, initial=None):
    skus = sku_choices(vcs)
    initial = list(initial or [])
    row = {"role": "", "instances": 1, "gpu": 1, "cpu": 4, "memory_mb": 8192}
    if not initial:
        initial.append({**row, "role": "worker"})
    # One empty row after the given ones, for another task role (no script needed), up to the bound.
    if len(initial) < MAX_TASK_ROLES:
        initial.append(row)
    return TaskRoleFormSet(data, initial=initial if data is None else None, prefix="roles",
                           form_kwargs={"skus": skus})


def document_from_form(form, formset):
    """The protocol v2 document the simple form describes, in the order OpenPAI's files use."""
    data = form.cleaned_data
    document = {
        "protocolVersion": 2,
        "name": data["name"],
        "type": "job",
        "jobRetryCount": data["retries"],
        "prerequisites": [{"name": "image", "type": "dockerimage", "uri": data["image"]}],
    }
    if data["parameters"]:
        document["parameters"] = data["parameters"]
    if data["secrets"]:
        document["secrets"] = data["secrets"]
    document["defaults"] = {"virtualCluster": data["virtual_cluster"]}
    roles, skus = {}, {}
    for row in formset.forms:
        role = row.cleaned_data.get("role")
        if not role:
            continue
        roles[role] = {
            "instances": row.cleaned_data["instances"],
            "dockerImage": "image",
            "resourcePerInstance": {
                "gpu": row.cleaned_data["gpu"], "cpu": row.cleaned_data["cpu"],
                "memoryMB": row.cleaned_data["memory_mb"],
            },
            "commands": row.cleaned_data["commands"],
        }
        if row.cleaned_data.get("sku"):
            skus[role] = {"skuType": row.cleaned_data["sku"]}
    document["taskRoles"] = roles
    if skus:
        document["extras"] = {"hivedScheduler": {"taskRoles": skus}}
    return document


def dump(document):
    return yaml.dump(document, Dumper=YAML_DUMPER, sort_keys=False, allow_unicode=True, width=120)


def _safe_load(text):
    from pai.documents import DocumentError, load_yaml

    try:
        document = load_yaml(text)
    except (DocumentError, yaml.YAMLError, RecursionError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def form_initial(text):
    """(job form initial, task role rows) read from a YAML text the simple form can describe
    (one docker image per role at most); ({}, []) for anything else."""
    document = _safe_load(text)
    if document is None or not isinstance(document.get("taskRoles"), dict):
        return {}, []
    images = {p.get("name"): p.get("uri") for p in document.get("prerequisites") or []
              if isinstance(p, dict) and p.get("type") == "dockerimage"}
    initial = {
        "name": document.get("name") if isinstance(document.get("name"), str) else "",
        "retries": document.get("jobRetryCount") if isinstance(document.get("jobRetryCount"), int) else 0,
        "virtual_cluster": (document.get("defaults") or {}).get("virtualCluster") or "",
    }

    def lines(value):
        if not isinstance(value, dict):
            return ""
        return "\n".join(f"{k}={'' if v == MASK else v}" for k, v in value.items() if isinstance(v, (str, int, float)))

    initial["parameters"] = lines(document.get("parameters"))
    initial["secrets"] = lines(document.get("secrets"))
    hived = ((document.get("extras") or {}).get("hivedScheduler") or {}).get("taskRoles") or {}
    rows = []
    for role, spec in list(document["taskRoles"].items())[:MAX_TASK_ROLES]:
        if not isinstance(spec, dict):
            continue
        resources = spec.get("resourcePerInstance") if isinstance(spec.get("resourcePerInstance"), dict) else {}
        if "image" not in initial and spec.get("dockerImage") in images:
            initial["image"] = images[spec["dockerImage"]]
        commands = spec.get("commands") if isinstance(spec.get("commands"), list) else []
        rows.append({
            "role": role, "instances": spec.get("instances", 1), "gpu": resources.get("gpu", 0),
            "cpu": resources.get("cpu", 1), "memory_mb": resources.get("memoryMB", 1024),
            "sku": (hived.get(role) or {}).get("skuType", "") if isinstance(hived.get(role), dict) else "",
            "commands": "\n".join(str(c) for c in commands),
        })
    return initial, rows


# --- Cloning ---------------------------------------------------------------------------

def clone_text(job, new_name):
    """The job's stored YAML with a new name. Secret values and registry passwords are stored
    masked, so they are emptied: the page asks for them again. Returns (text, [emptied paths])."""
    document = _safe_load(job.protocol_text) or dict(job.spec)
    document["name"] = new_name
    emptied = []
    if isinstance(document.get("secrets"), dict):
        for key in document["secrets"]:
            document["secrets"][key] = ""
            emptied.append(f"secrets.{key}")
    for i, item in enumerate(document.get("prerequisites") or []):
        auth = item.get("auth") if isinstance(item, dict) else None
        if isinstance(auth, dict) and auth.get("password") == MASK:
            auth["password"] = ""
            emptied.append(f"prerequisites[{i}].auth.password")
    return dump(document), emptied


def clone_name(job, taken):
    """`<name>-clone`, or `<name>-clone-2`, … : the first the owner has not used, within 255."""
    base = f"{job.name[:255 - len('-clone-999')]}-clone"
    if base not in taken:
        return base
    for n in range(2, 1000):
        if f"{base}-{n}" not in taken:
            return f"{base}-{n}"
    return base


def upload_limit():
    return settings.PAI_JOB_PROTOCOL_MAX_BYTES


_ROLE_FIELDS = {
    "instances": "instances", "resourcePerInstance.gpu": "gpu", "resourcePerInstance.cpu": "cpu",
    "resourcePerInstance.memoryMB": "memory_mb", "resourcePerInstance": "gpu", "commands": "commands",
    "": "role",
}


def _form_field(path):
    """(task role or None, form field) a checked path of the form's YAML belongs to, or None."""
    if path == "name":
        return None, "name"
    if path == "defaults.virtualCluster":
        return None, "virtual_cluster"
    if path.startswith("prerequisites[0]"):
        return None, "image"
    if path == "jobRetryCount":
        return None, "retries"
    for key in ("parameters", "secrets"):
        if path == key or path.startswith(key + "."):
            return None, key
    match = re.fullmatch(r"extras\.hivedScheduler\.taskRoles\.([A-Za-z0-9_]+)\.skuType", path)
    if match:
        return match.group(1), "sku"
    match = re.fullmatch(r"taskRoles\.([A-Za-z0-9_]+)(?:\.(.*))?", path)
    if match:
        rest = re.sub(r"\[\d+\]$", "", match.group(2) or "")
        field = _ROLE_FIELDS.get(rest)
        return (match.group(1), field) if field else None
    return None


def attach_to_form(form, roles, problems):
    """Show each checked error of the YAML the form wrote beside the form field it came from."""
    rows = {row.cleaned_data.get("role"): row for row in roles.forms if getattr(row, "cleaned_data", None)}
    for problem in problems:
        found = _form_field(problem.path)
        if found is None:
            continue
        role, field = found
        target = form if role is None else rows.get(role)
        if target is not None and field in target.fields:
            target.add_error(field, problem.message)
