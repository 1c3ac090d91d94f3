"""Tenant actions: onboarding members (one, or many from a CSV), roles, policies.

Each action checks that the actor may manage the tenant, runs in one transaction,
writes audit rows, and sends e-mail only once the transaction has committed.
"""

import csv
import io
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.tokens import default_token_generator
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.mail import EmailMessage
from django.core.validators import validate_email
from django.db import transaction
from django.template import Context, Template
from django.template.loader import get_template
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from apps.accounts.models import Group
from apps.accounts.roles import DEFAULT_GROUP, forget
from apps.audit.services import record
from apps.virtualclusters.models import VirtualCluster

from .models import Membership, Tenant

MAX_CSV_ROWS = 5000


def ensure_can_manage(actor, tenant):
    if not Tenant.objects.manageable_by(actor).filter(pk=tenant.pk).exists():
        raise PermissionDenied(f"{actor} may not manage tenant {tenant}.")


def onboardable_groups(tenant):
    """Groups a tenant admin may put new members in: the tenant's own groups."""
    return Group.objects.filter(tenant=tenant).order_by("name")


@dataclass
class OnboardingRow:
    line: int
    username: str
    email: str
    groups: list = field(default_factory=list)
    role: str = Membership.Role.MEMBER
    first_name: str = ""
    last_name: str = ""


class OnboardingError(ValidationError):
    """Rows that cannot be onboarded; `errors` lists `line N: field: message` strings."""

    def __init__(self, errors):
        self.errors = errors
        super().__init__(errors)


def _check_row(row, tenant, groups_by_name, taken):
    """Problems with one row, each naming the line and the field."""
    problems = []
    where = f"line {row.line}"
    try:
        if not row.username:
            raise ValidationError("is required")
        if len(row.username) > 150:
            raise ValidationError("must be at most 150 characters")
        UnicodeUsernameValidator()(row.username)
    except ValidationError as exc:
        problems.append(f"{where}: username: {' '.join(exc.messages)}")
    else:
        if row.username.lower() in taken:
            problems.append(f"{where}: username: '{row.username}' {taken[row.username.lower()]}")
    try:
        if not row.email:
            raise ValidationError("is required")
        validate_email(row.email)
    except ValidationError as exc:
        problems.append(f"{where}: email: {' '.join(exc.messages)}")
    for name in row.groups:
        if name not in groups_by_name:
            problems.append(f"{where}: groups: '{name}' is not a group of {tenant.name}")
    if row.role not in Membership.Role.values:
        problems.append(f"{where}: role: must be one of {', '.join(Membership.Role.values)}")
    return problems


def _taken_usernames(usernames):
    User = get_user_model()
    existing = User.objects.filter(username__in=usernames).values_list("username", flat=True)
    return {name.lower(): "already exists" for name in existing}


def _create_member(actor, tenant, row, groups_by_name):
    User = get_user_model()
    user = User(username=row.username, email=row.email, first_name=row.first_name, last_name=row.last_name)
    user.set_unusable_password()
    user.save()
    Membership.objects.create(tenant=tenant, user=user, role=row.role)
    chosen = [groups_by_name[name] for name in row.groups]
    user.groups.add(*chosen)
    forget(user)
    record(
        actor,
        "tenant.onboard",
        user,
        tenant=tenant,
        changes={"email": row.email, "groups": sorted(row.groups), "role": row.role},
    )
    return user


@transaction.atomic
def onboard_user(actor, tenant, *, username, email, groups=(), role=Membership.Role.MEMBER, first_name="", last_name=""):
    """Create one member of `tenant`, put them in `groups` (names or Group objects), e-mail them."""
    ensure_can_manage(actor, tenant)
    groups_by_name = {g.name: g for g in onboardable_groups(tenant)}
    row = OnboardingRow(
        line=1,
        username=username.strip(),
        email=email.strip(),
        groups=[g if isinstance(g, str) else g.name for g in groups],
        role=role,
        first_name=first_name,
        last_name=last_name,
    )
    problems = _check_row(row, tenant, groups_by_name, _taken_usernames([row.username]))
    if problems:
        # One user: the messages need no line number.
        raise OnboardingError([p.removeprefix("line 1: ") for p in problems])
    user = _create_member(actor, tenant, row, groups_by_name)
    transaction.on_commit(lambda: send_onboarding_email(user, tenant))
    return user


def parse_onboarding_csv(text):
    """Rows of `username,email,groups[,role[,first_name[,last_name]]]`; groups separated by ';'.

    A first row naming the columns is optional. Returns (rows, problems).
    """
    rows, problems = [], []
    reader = csv.reader(io.StringIO(text))
    columns = ["username", "email", "groups", "role", "first_name", "last_name"]
    for line, cells in enumerate(reader, start=1):
        cells = [c.strip() for c in cells]
        if not any(cells) or cells[0].startswith("#"):
            continue
        if line == 1 and cells[0].lower() == "username":
            unknown = [c for c in cells if c.lower() not in columns]
            if unknown:
                problems.append(f"line 1: header: unknown column(s) {', '.join(unknown)}")
            columns = [c.lower() for c in cells]
            continue
        if len(cells) < 2:
            problems.append(f"line {line}: expected at least username and email, got {len(cells)} value(s)")
            continue
        if len(cells) > len(columns):
            problems.append(f"line {line}: {len(cells)} values but only {len(columns)} columns")
            continue
        values = dict(zip(columns, cells))
        rows.append(
            OnboardingRow(
                line=line,
                username=values.get("username", ""),
                email=values.get("email", ""),
                groups=[g.strip() for g in values.get("groups", "").replace("|", ";").split(";") if g.strip()],
                role=values.get("role") or Membership.Role.MEMBER,
                first_name=values.get("first_name", ""),
                last_name=values.get("last_name", ""),
            )
        )
        if len(rows) > MAX_CSV_ROWS:
            problems.append(f"line {line}: more than {MAX_CSV_ROWS} rows; split the file")
            break
    return rows, problems


@transaction.atomic
def bulk_onboard(actor, tenant, csv_text):
    """Onboard every row of a CSV, or none: any bad row refuses the whole file, line by line."""
    ensure_can_manage(actor, tenant)
    rows, problems = parse_onboarding_csv(csv_text)
    if not rows and not problems:
        problems.append("the file has no rows")
    groups_by_name = {g.name: g for g in onboardable_groups(tenant)}
    taken = _taken_usernames([r.username for r in rows])
    for row in rows:
        row_problems = _check_row(row, tenant, groups_by_name, taken)
        problems += row_problems
        if row.username and row.username.lower() not in taken:
            taken[row.username.lower()] = f"repeats line {row.line}"
    if problems:
        raise OnboardingError(problems)
    users = [_create_member(actor, tenant, row, groups_by_name) for row in rows]
    record(actor, "tenant.bulk_onboard", tenant, changes={"users": [u.username for u in users]})
    transaction.on_commit(lambda: [send_onboarding_email(u, tenant) for u in users])
    return users



def onboarding_context(user, tenant):
    from apps.oncall.services import current_dris

    context = {
        "user": user,
        "tenant": tenant,
        "public_url": settings.PAI_PUBLIC_URL.rstrip("/"),
        "manual_url": settings.PAI_USER_MANUAL_URL,
        "team_admins": [
            m.user
            for m in Membership.objects.filter(tenant=tenant, role=Membership.Role.ADMIN)
            .exclude(user=user)
            .select_related("user")
        ],
        "dris": current_dris(),
        "virtual_clusters": list(VirtualCluster.objects.usable_by(user).order_by("name").values_list("name", flat=True)),
        "password_reset_days": max(1, settings.PASSWORD_RESET_TIMEOUT // 86400),
        "set_password_url": "",
    }
    if settings.PAI_AUTH_MODE == "basic":
        path = reverse(
            "password_reset_confirm",
            kwargs={"uidb64": urlsafe_base64_encode(force_bytes(user.pk)), "token": default_token_generator.make_token(user)},
        )
        context["set_password_url"] = context["public_url"] + path
    return context


def render_onboarding_email(user, tenant):
    """(subject, body) of the tenant's onboarding e-mail for `user`."""
    context = onboarding_context(user, tenant)
    subject = tenant.onboarding_email_subject or f"Welcome to {tenant.name} on pai"
    if tenant.onboarding_email_template.strip():
        body = Template("{% autoescape off %}" + tenant.onboarding_email_template + "{% endautoescape %}").render(
            Context(context)
        )
    else:
        body = get_template("tenants/onboarding_email.txt").render(context)
    return subject, body


def send_onboarding_email(user, tenant):
    subject, body = render_onboarding_email(user, tenant)
    reply_to = [tenant.contact_email] if tenant.contact_email else None
    EmailMessage(subject, body, to=[user.email], reply_to=reply_to).send()


@transaction.atomic
def update_policies(actor, tenant, **values):
    """Change a tenant's policies (retention, idle-GPU, onboarding text); validated and audited."""
    ensure_can_manage(actor, tenant)
    allowed = {
        "description", "contact_email", "job_retention_days", "idle_gpu_threshold_percent",
        "idle_gpu_hours", "idle_gpu_action", "onboarding_email_subject", "onboarding_email_template",
    }
    unknown = sorted(set(values) - allowed)
    if unknown:
        raise ValidationError({name: "cannot be changed here" for name in unknown})
    before = {k: getattr(tenant, k) for k in values}
    for key, value in values.items():
        setattr(tenant, key, value)
    tenant.full_clean()
    tenant.save(update_fields=sorted(values))
    record(actor, "tenant.policies", tenant, changes={k: [before[k], values[k]] for k in values if before[k] != values[k]})
    return tenant
