"""Tenant actions: onboarding members (one, or many from a CSV), roles, policies.

Each action checks that the actor may manage the tenant, runs in one transaction and
writes audit rows. Welcome e-mails are rows (`OnboardingEmail`) written in the same
transaction and sent by worker tasks once it commits (`apps.tenants.tasks`): a request
onboarding thousands of users returns without waiting for a mail server.
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
from django.template.loader import get_template
from django.urls import reverse
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from apps.accounts import usernames as usernames_rule
from apps.accounts.models import Group
from apps.accounts.roles import DEFAULT_GROUP, forget
from apps.audit.models import AuditEntry
from apps.audit.services import entry as audit_entry
from apps.audit.services import record
from apps.virtualclusters.models import VirtualCluster, VirtualClusterGrant

from pai.links import public_url

from .choices import IdleGpuAction
from .mailtemplate import render_text
from .models import Membership, OnboardingEmail, Tenant

MAX_CSV_ROWS = 5000


def ensure_can_manage(actor, tenant):
    if not Tenant.objects.manageable_by(actor).filter(pk=tenant.pk).exists():
        raise PermissionDenied(f"{actor} may not manage tenant {tenant}.")


def onboardable_groups(tenant):
    """Groups a tenant admin may put new members in: the tenant's own groups."""
    return Group.objects.filter(tenant=tenant).order_by("name")


def vc_granting_groups(tenant):
    """The tenant's groups that grant at least one virtual cluster, with the VCs' names."""
    granting = {}
    for group_name, vc_name in (
        VirtualClusterGrant.objects.filter(group__tenant=tenant)
        .order_by("group__name", "virtual_cluster__name")
        .values_list("group__name", "virtual_cluster__name")
    ):
        granting.setdefault(group_name, []).append(vc_name)
    return granting


def members_without_vc(users):
    """Those of `users` whose groups grant no virtual cluster: they could submit nowhere."""
    granting = VirtualClusterGrant.objects.values("group_id")
    with_vc = set(
        get_user_model()
        .groups.through.objects.filter(user_id__in=[u.pk for u in users], group_id__in=granting)
        .values_list("user_id", flat=True)
    )
    return [u for u in users if u.pk not in with_vc]


def sample_csv(tenant):
    """A CSV to start from: the header and two rows naming the tenant's own groups."""
    granting = list(vc_granting_groups(tenant)) or [g.name for g in onboardable_groups(tenant)][:1]
    group = granting[0] if granting else ""
    rows = [
        ["username", "email", "groups", "role", "first_name", "last_name"],
        ["ada", "ada@example.com", group, "member", "Ada", "Lovelace"],
        ["grace", "grace@example.com", ";".join(granting[:2]), "admin", "Grace", "Hopper"],
    ]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


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
    return {name: usernames_rule.TAKEN for name in usernames_rule.taken_among(usernames)}


def _create_members(actor, tenant, rows, groups_by_name, base_url):
    """Create the users, memberships, group rows, audit rows and queued e-mails of `rows`, in bulk."""
    User = get_user_model()
    now = timezone.now()
    users = []
    for row in rows:
        user = User(username=row.username, email=row.email, first_name=row.first_name, last_name=row.last_name)
        user.set_unusable_password()
        users.append(user)
    # bulk_create sends no post_save: the `default` group is added here, as for every user.
    User.objects.bulk_create(users, batch_size=500)
    default_group = Group.objects.filter(name=DEFAULT_GROUP).first()
    in_groups = User.groups.through
    memberships = [Membership(tenant=tenant, user=user, role=row.role) for user, row in zip(users, rows)]
    Membership.objects.bulk_create(memberships, batch_size=500)
    in_groups.objects.bulk_create(
        [
            in_groups(user_id=user.pk, group_id=group.pk)
            for user, row in zip(users, rows)
            for group in ([default_group] if default_group else []) + [groups_by_name[name] for name in dict.fromkeys(row.groups)]
        ],
        batch_size=1000,
        ignore_conflicts=True,
    )
    emails = OnboardingEmail.objects.bulk_create(
        [OnboardingEmail(membership=m, queued_at=now, base_url=base_url) for m in memberships], batch_size=500
    )
    AuditEntry.objects.bulk_create(
        [
            audit_entry(
                actor, "tenant.onboard", user, tenant=tenant,
                changes={"email": row.email, "groups": sorted(row.groups), "role": row.role},
            )
            for user, row in zip(users, rows)
        ],
        batch_size=500,
    )
    for user in users:
        forget(user)
    ids = [e.pk for e in emails]
    transaction.on_commit(lambda: queue_onboarding_emails(ids))
    return users


@transaction.atomic
def onboard_user(
    actor, tenant, *, username, email, groups=(), role=Membership.Role.MEMBER, first_name="", last_name="", base_url=None
):
    """Create one member of `tenant`, put them in `groups` (names or Group objects), and queue
    their welcome e-mail (sent by a task once this commits). `base_url` is pai's address for
    the e-mail's links (default: `pai.links.public_url()`)."""
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
    return _create_members(actor, tenant, [row], groups_by_name, (base_url or public_url()).rstrip("/"))[0]


def parse_onboarding_csv(text):
    """Rows of `username,email,groups[,role[,first_name[,last_name]]]`; groups separated by ';'.

    A first row naming the columns is optional. Returns (rows, problems).
    """
    rows, problems = [], []
    if "\x00" in text:
        # Binary data, not text: no database stores it.
        line = text.count("\n", 0, text.index("\x00")) + 1
        return [], [f"line {line}: contains a NUL character; is this a CSV file?"]
    # Strict: a quoted value that is never closed is an error, not the rest of the file.
    reader = csv.reader(io.StringIO(text), strict=True)
    columns = ["username", "email", "groups", "role", "first_name", "last_name"]
    for line, cells in enumerate(_csv_records(reader, problems), start=1):
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


def _csv_records(reader, problems):
    """The reader's records, until one cannot be read: its problem is added, naming the line."""
    while True:
        start = reader.line_num + 1
        try:
            yield next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            reason = str(exc)
            if "unexpected end of data" in reason:
                reason = "a quoted value is never closed"
            elif "field larger than field limit" in reason:
                reason = f"a value is longer than {csv.field_size_limit()} characters"
            problems.append(f"line {start}: cannot be read as CSV: {reason}")
            return


@transaction.atomic
def bulk_onboard(actor, tenant, csv_text, base_url=None):
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
    users = _create_members(actor, tenant, rows, groups_by_name, (base_url or public_url()).rstrip("/"))
    record(actor, "tenant.bulk_onboard", tenant, changes={"users": len(users)})
    return users


# The welcome e-mails go through the task queue in batches of this many.
EMAIL_BATCH = 50


def queue_onboarding_emails(ids):
    """Hand the e-mails to the worker, EMAIL_BATCH per task (called after the commit)."""
    from django_q.tasks import async_task

    ids = sorted(ids)
    for start in range(0, len(ids), EMAIL_BATCH):
        async_task(
            "apps.tenants.tasks.send_onboarding_emails", ids[start : start + EMAIL_BATCH],
            task_name="tenants.onboarding_emails",
        )


@transaction.atomic
def resend_onboarding_email(actor, membership, base_url=None):
    """Queue the member's welcome e-mail again (a new password link), whatever became of the last."""
    ensure_can_manage(actor, membership.tenant)
    email, _ = OnboardingEmail.objects.select_for_update().get_or_create(
        membership=membership, defaults={"queued_at": timezone.now(), "base_url": ""}
    )
    before = email.status
    email.status, email.attempts, email.last_error = OnboardingEmail.Status.QUEUED, 0, ""
    email.queued_at, email.sent_at = timezone.now(), None
    email.base_url = (base_url or public_url()).rstrip("/")
    email.save()
    record(actor, "tenant.onboarding_email.resend", membership.user, tenant=membership.tenant,
           changes={"status": [before, email.status]})
    transaction.on_commit(lambda: queue_onboarding_emails([email.pk]))
    return email


def _people(users):
    return ", ".join(f"{u.get_full_name() or u.get_username()} <{u.email}>" if u.email else u.get_username() for u in users)


IDLE_GPU_CONSEQUENCES = {
    IdleGpuAction.NONE: "pai takes no action by itself, but administrators may stop it",
    IdleGpuAction.NOTIFY: "its owner gets an e-mail, and if it stays idle {grace} more hours, the team admins do too",
    IdleGpuAction.STOP: "its owner gets an e-mail, and if it stays idle {grace} more hours, the job is stopped",
}


def idle_gpu_consequence(tenant):
    return IDLE_GPU_CONSEQUENCES[tenant.idle_gpu_action].format(grace=tenant.idle_gpu_grace_hours)


def idle_gpu_rule(tenant):
    """The team's idle-GPU rule in one sentence: what the onboarding e-mail states and what
    `apps.monitoring.idle` enforces."""
    return (
        f"A job whose GPUs stay below {tenant.idle_gpu_threshold_percent}% utilisation for "
        f"{tenant.idle_gpu_hours} hours is idle: {idle_gpu_consequence(tenant)}."
    )


def onboarding_values(user, tenant, base_url):
    """Every placeholder of the onboarding e-mail (`mailtemplate.PLACEHOLDERS`), as plain strings."""
    from apps.oncall.services import current_dris
    from apps.storage.models import StorageConfig

    admins = [
        m.user
        for m in Membership.objects.filter(tenant=tenant, role=Membership.Role.ADMIN, user__is_active=True)
        .exclude(user=user)
        .select_related("user")
        .order_by("user__username")
    ]
    storages = StorageConfig.objects.granted_to(user).order_by("name")
    values = {
        "username": user.get_username(),
        "first_name": user.first_name,
        "full_name": user.get_full_name() or user.get_username(),
        "email": user.email,
        "team_name": tenant.name,
        "team_address": tenant.contact_email,
        "team_admins": _people(admins),
        "dris": _people(current_dris()),
        "virtual_clusters": ", ".join(VirtualCluster.objects.usable_by(user).order_by("name").values_list("name", flat=True)),
        "storage": ", ".join(f"{s.name} at {s.mount_path}{' (read-only)' if s.read_only else ''}" for s in storages),
        "retention_days": str(tenant.job_retention_days),
        "idle_gpu_threshold_percent": str(tenant.idle_gpu_threshold_percent),
        "idle_gpu_hours": str(tenant.idle_gpu_hours),
        "idle_gpu_action": idle_gpu_consequence(tenant),
        "idle_gpu_grace_hours": str(tenant.idle_gpu_grace_hours),
        "idle_gpu_rule": idle_gpu_rule(tenant),
        "set_password_url": "",
        "password_link_days": str(max(1, settings.PASSWORD_RESET_TIMEOUT // 86400)),
        "sign_in_url": base_url + reverse("login"),
        "public_url": base_url,
        "manual_url": settings.PAI_USER_MANUAL_URL,
        "api_docs_url": base_url + "/api/docs/",
        "jobs_url": base_url + reverse("portal:job-list"),
        "submit_url": base_url + reverse("portal:submit"),
        "status_url": base_url + reverse("oncall:status"),
        "report_url": base_url + reverse("oncall:incident-new"),
        "oncall_url": base_url + reverse("oncall:rotations"),
    }
    if settings.PAI_AUTH_MODE == "basic":
        values["set_password_url"] = base_url + reverse(
            "password_reset_confirm",
            kwargs={"uidb64": urlsafe_base64_encode(force_bytes(user.pk)), "token": default_token_generator.make_token(user)},
        )
    return values


def default_onboarding_text():
    return get_template("tenants/onboarding_email.txt").template.source


def render_onboarding_email(user, tenant, base_url=None):
    """(subject, body) of the tenant's onboarding e-mail for `user`: the team's text, or pai's."""
    values = onboarding_values(user, tenant, (base_url or public_url()).rstrip("/"))
    subject = tenant.onboarding_email_subject or f"Welcome to {tenant.name} on pai"
    body = render_text(tenant.onboarding_email_template if tenant.onboarding_email_template.strip() else default_onboarding_text(), values)
    return subject, body


def send_onboarding_email(user, tenant, base_url=None):
    subject, body = render_onboarding_email(user, tenant, base_url)
    reply_to = [tenant.contact_email] if tenant.contact_email else None
    EmailMessage(subject, body, to=[user.email], reply_to=reply_to).send()


@transaction.atomic
def update_policies(actor, tenant, **values):
    """Change a tenant's policies (retention, idle-GPU, onboarding text); validated and audited."""
    ensure_can_manage(actor, tenant)
    allowed = {
        "description", "contact_email", "job_retention_days", "idle_gpu_threshold_percent",
        "idle_gpu_hours", "idle_gpu_action", "idle_gpu_grace_hours", "onboarding_email_subject", "onboarding_email_template",
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
