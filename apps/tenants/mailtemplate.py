"""The text of a team's onboarding e-mail: data a team admin writes, never code.

The text is parsed by a template engine that knows only `{{ placeholder }}` (with the
`default` filter) and `{% if placeholder %} … {% elif … %} … {% else %} … {% endif %}`,
and rendered with a context of plain strings: the names in PLACEHOLDERS and nothing else.
Tags that loop, load libraries, include files or print the context do not exist in that
engine; a dotted lookup (`user.groups`) or an unknown name is refused when the text is
saved and again when it is rendered. A rendered e-mail longer than MAX_RENDERED_CHARS is
refused too.
"""

import re

from django.core.exceptions import ValidationError
from django.template import Context, Engine, Library, TemplateSyntaxError, defaultfilters, defaulttags
from django.template.base import FilterExpression, TextNode, Variable, VariableNode
from django.template.defaulttags import CommentNode, IfNode
from django.template.defaulttags import TemplateLiteral
from django.template.smartif import TokenBase

MAX_TEMPLATE_CHARS = 20_000
MAX_RENDERED_CHARS = 100_000

# Every name a text may use, with what it holds; all are plain strings (empty when unknown).
PLACEHOLDERS = {
    "username": "the new member's user name",
    "first_name": "their first name (may be empty)",
    "full_name": "their full name, or the user name",
    "email": "their e-mail address",
    "team_name": "the team's name",
    "team_address": "the team's e-mail address (may be empty)",
    "team_admins": "the team admins, as `Name <address>, …` (may be empty)",
    "dris": "this week's DRIs (the on-call engineers), as `Name <address>, …` (may be empty)",
    "virtual_clusters": "the virtual clusters the member may submit to, comma-separated",
    "storage": "the storage the member's jobs may mount, as `name at /mount/path, …`",
    "retention_days": "how many days completed jobs are kept",
    "idle_gpu_threshold_percent": "the idle-GPU rule's utilisation threshold, in percent",
    "idle_gpu_hours": "how many hours below the threshold make a job idle",
    "idle_gpu_action": "what happens to an idle job, in words",
    "idle_gpu_grace_hours": "hours between the owner's warning and the action",
    "idle_gpu_rule": "the whole idle-GPU rule as one sentence",
    "set_password_url": "the link to choose a password (basic sign-in only; empty otherwise)",
    "password_link_days": "how many days the password link works",
    "sign_in_url": "pai's sign-in page",
    "public_url": "pai's address",
    "manual_url": "the user manual",
    "api_docs_url": "the REST API's description",
    "jobs_url": "the member's jobs in the web portal (each job's page: tasks, logs, why it waits or failed)",
    "submit_url": "the web portal's page to submit a job",
    "status_url": "the status page of open incidents",
    "report_url": "the page to report a problem to the DRIs",
    "oncall_url": "who is on call, and when",
}

library = Library()
library.tag("if", defaulttags.do_if)
library.tag("comment", defaulttags.comment)
library.filter("default", defaultfilters.default)


class _PlaceholderEngine(Engine):
    # Django's default tags and filters (for, load, include, debug, …) are not loaded.
    default_builtins = []


_engine = _PlaceholderEngine(builtins=[], libraries={}, loaders=[], autoescape=False, debug=False)
_engine.template_builtins = [library]


def _check_expression(expression, problems):
    var = expression.var
    if isinstance(var, Variable):
        if var.lookups is not None:
            name = ".".join(var.lookups)
            if len(var.lookups) != 1 or name not in PLACEHOLDERS:
                problems.append(f"unknown placeholder '{name}'")
    for _func, args in expression.filters:
        for _lookup, arg in args:
            if isinstance(arg, Variable) and arg.lookups is not None:
                name = ".".join(arg.lookups)
                if len(arg.lookups) != 1 or name not in PLACEHOLDERS:
                    problems.append(f"unknown placeholder '{name}'")


def _check_condition(condition, problems):
    if condition is None:
        return
    if isinstance(condition, TemplateLiteral):
        _check_expression(condition.value, problems)
    elif isinstance(condition, TokenBase):  # not, and, or, comparisons: check both sides
        _check_condition(condition.first, problems)
        _check_condition(condition.second, problems)


def _check_nodes(nodelist, problems):
    for node in nodelist:
        if isinstance(node, (TextNode, CommentNode)):
            continue
        if isinstance(node, VariableNode) and isinstance(node.filter_expression, FilterExpression):
            _check_expression(node.filter_expression, problems)
        elif isinstance(node, IfNode):
            for condition, branch in node.conditions_nodelists:
                _check_condition(condition, problems)
                _check_nodes(branch, problems)
        else:
            problems.append(f"'{type(node).__name__}' is not allowed")


def compile_text(text):
    """The template of a team's text, or ValidationError listing what it may not contain."""
    if len(text) > MAX_TEMPLATE_CHARS:
        raise ValidationError(f"The text is longer than {MAX_TEMPLATE_CHARS} characters.")
    try:
        template = _engine.from_string(text)
    except TemplateSyntaxError as exc:
        # Django's hint about registering tags does not apply to this text.
        message = re.sub(r"Invalid block tag on line (\d+): '([^']+)'.*", r"line \1: the {% \2 %} tag is not allowed", str(exc))
        raise ValidationError(
            f"{message.rstrip('.')}. Only {{{{ placeholder }}}}, {{{{ placeholder|default:\"text\" }}}} and "
            "{% if placeholder %}…{% endif %} may be used."
        ) from None
    problems = []
    _check_nodes(template.nodelist, problems)
    if problems:
        raise ValidationError(
            [f"{p}; the placeholders are: {', '.join(PLACEHOLDERS)}." for p in dict.fromkeys(problems)]
        )
    return template


def validate_text(text):
    """Model and form validator of a team's onboarding text."""
    if text.strip():
        compile_text(text)


def render_text(text, values):
    """Render a team's text with `values` (each placeholder's string), size-capped."""
    missing = set(PLACEHOLDERS) - set(values)
    if missing:
        raise ValueError(f"values for every placeholder are needed; missing {sorted(missing)}")
    context = {name: str(values[name]) for name in PLACEHOLDERS}
    rendered = compile_text(text).render(Context(context, autoescape=False))
    if len(rendered) > MAX_RENDERED_CHARS:
        raise ValidationError(f"The rendered e-mail is longer than {MAX_RENDERED_CHARS} characters.")
    return rendered
