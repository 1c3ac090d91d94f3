import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.core.exceptions import PermissionDenied

from apps.audit.models import AuditEntry
from apps.tenants.models import Membership
from apps.tenants.services import OnboardingError, bulk_onboard, onboard_user, update_policies

User = get_user_model()


def onboard(world, actor=None, **kwargs):
    values = {"username": "newbie", "email": "newbie@example.com", "groups": ["team_a"]}
    values.update(kwargs)
    return onboard_user(actor or world.a_admin, world.tenant_a, **values)


def test_onboarding_creates_member_in_groups_and_sends_the_welcome(world, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        user = onboard(world)
    assert Membership.objects.get(user=user).tenant == world.tenant_a
    assert set(user.groups.values_list("name", flat=True)) == {"default", "team_a"}
    assert not user.has_usable_password()
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["newbie@example.com"]
    assert message.subject == "Welcome to Team A on pai"
    assert message.reply_to == ["team-a-admins@example.com"]


def test_default_email_covers_submitting_retention_idle_jobs_and_contacts(world, django_capture_on_commit_callbacks):
    world.tenant_a.job_retention_days = 14
    world.tenant_a.save()
    with django_capture_on_commit_callbacks(execute=True):
        onboard(world)
    body = mail.outbox[0].body
    assert "OpenPAI client" in body and "/api/docs/" in body
    assert "The user manual: https://openpai.readthedocs.io/" in body
    assert "deleted after 14 days" in body
    assert "below 5% utilisation for 24 hours is idle: its owner gets an e-mail, and if it stays idle 12 more hours, the team admins do too." in body
    assert "a_admin <a_admin@example.com>; the team's address: team-a-admins@example.com" in body
    assert body.count("team-a-admins@example.com") == 1
    assert "DRI" in body and "/oncall/rotations/" in body
    assert "You can submit to: team_a." in body
    assert "Your jobs can mount: team-a-data at " in body
    assert "/accounts/reset/" in body  # basic mode: a link to choose a password


def test_custom_email_text_uses_placeholders(world, django_capture_on_commit_callbacks):
    world.tenant_a.onboarding_email_subject = "Hi from A"
    world.tenant_a.onboarding_email_template = (
        "Dear {{ username }}, keep jobs {{ retention_days }} days.{% if dris %} DRI: {{ dris }}{% else %} No DRI.{% endif %}"
    )
    world.tenant_a.full_clean()
    world.tenant_a.save()
    with django_capture_on_commit_callbacks(execute=True):
        onboard(world)
    assert mail.outbox[0].subject == "Hi from A"
    assert mail.outbox[0].body == "Dear newbie, keep jobs 30 days. No DRI."


def test_onboarding_is_audited(world):
    user = onboard(world)
    entry = AuditEntry.objects.get(action="tenant.onboard")
    assert entry.actor == world.a_admin
    assert entry.object_id == str(user.pk)
    assert entry.tenant == world.tenant_a
    assert entry.changes["groups"] == ["team_a"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"username": "a_member"}, "username: 'a_member' is taken"),
        ({"username": "bad name!"}, "username: Enter a valid username"),
        ({"email": "not-an-email"}, "email: Enter a valid email address."),
        ({"groups": ["team_b"]}, "groups: 'team_b' is not a group of Team A"),
        ({"role": "owner"}, "role: must be one of member, admin"),
    ],
)
def test_bad_onboarding_input_names_the_field_and_creates_nothing(world, kwargs, message):
    users_before = User.objects.count()
    with pytest.raises(OnboardingError) as excinfo:
        onboard(world, **kwargs)
    assert any(e.startswith(message) for e in excinfo.value.errors), excinfo.value.errors
    assert User.objects.count() == users_before
    assert not mail.outbox


def test_tenant_admin_cannot_onboard_into_another_tenant(world):
    with pytest.raises(PermissionDenied):
        onboard_user(world.a_admin, world.tenant_b, username="spy", email="spy@example.com")
    with pytest.raises(PermissionDenied):
        onboard_user(world.a_member, world.tenant_a, username="spy", email="spy@example.com")
    assert not User.objects.filter(username="spy").exists()


CSV_OK = """username,email,groups,role
ann,ann@example.com,team_a,member
ben,ben@example.com,team_a;default,admin
cid,cid@example.com,,
"""


def test_bulk_onboarding_creates_every_row_and_emails_each(world, django_capture_on_commit_callbacks):
    from apps.accounts.models import Group

    Group.objects.create(name="team_a_ml", tenant=world.tenant_a)
    csv_text = CSV_OK.replace("team_a;default", "team_a;team_a_ml")
    with django_capture_on_commit_callbacks(execute=True):
        users = bulk_onboard(world.a_admin, world.tenant_a, csv_text)
    assert [u.username for u in users] == ["ann", "ben", "cid"]
    ben = User.objects.get(username="ben")
    assert set(ben.groups.values_list("name", flat=True)) == {"default", "team_a", "team_a_ml"}
    assert Membership.objects.get(user=ben).role == "admin"
    assert sorted(m.to[0] for m in mail.outbox) == ["ann@example.com", "ben@example.com", "cid@example.com"]
    assert AuditEntry.objects.filter(action="tenant.onboard").count() == 3
    assert AuditEntry.objects.filter(action="tenant.bulk_onboard", tenant=world.tenant_a).count() == 1


def test_bulk_onboarding_reports_bad_rows_line_by_line_and_creates_nothing(world, django_capture_on_commit_callbacks):
    csv_text = """username,email,groups
ann,ann@example.com,team_a
a_member,dup@example.com,team_a
ann,ann2@example.com,team_a
dan,not-an-email,team_b
onlyname
"""
    users_before = User.objects.count()
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(OnboardingError) as excinfo:
        bulk_onboard(world.a_admin, world.tenant_a, csv_text)
    assert excinfo.value.errors == [
        "line 6: expected at least username and email, got 1 value(s)",
        "line 3: username: 'a_member' is taken",
        "line 4: username: 'ann' repeats line 2",
        "line 5: email: Enter a valid email address.",
        "line 5: groups: 'team_b' is not a group of Team A",
    ]
    assert User.objects.count() == users_before
    assert not User.objects.filter(username="ann").exists()
    assert not mail.outbox


def test_bulk_onboarding_refuses_an_empty_file(world):
    with pytest.raises(OnboardingError) as excinfo:
        bulk_onboard(world.a_admin, world.tenant_a, "username,email,groups\n")
    assert excinfo.value.errors == ["the file has no rows"]


def test_policy_update_is_validated_and_audited(world):
    from django.core.exceptions import ValidationError

    update_policies(world.a_admin, world.tenant_a, job_retention_days=7, idle_gpu_action="stop")
    world.tenant_a.refresh_from_db()
    assert world.tenant_a.job_retention_days == 7
    entry = AuditEntry.objects.get(action="tenant.policies")
    assert entry.changes == {"job_retention_days": [30, 7], "idle_gpu_action": ["notify", "stop"]}
    with pytest.raises(ValidationError) as excinfo:
        update_policies(world.a_admin, world.tenant_a, job_retention_days=0)
    assert "job_retention_days" in excinfo.value.message_dict
    with pytest.raises(PermissionDenied):
        update_policies(world.b_admin, world.tenant_a, job_retention_days=9)


def test_onboarding_email_names_this_weeks_dri(world, django_capture_on_commit_callbacks):
    from datetime import date, timedelta

    from apps.oncall.models import Rotation, RotationMember

    rotation = Rotation.objects.create(name="platform", start_date=date.today() - timedelta(days=14))
    RotationMember.objects.create(rotation=rotation, user=world.root, position=0)
    with django_capture_on_commit_callbacks(execute=True):
        onboard(world)
    assert "This week's DRI (the on-call engineer for the cluster): root <root@example.com>" in mail.outbox[0].body
