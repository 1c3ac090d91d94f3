"""The onboarding e-mail: a team's text is data (issue 13 #1), it tells the truth and links only
pages that work (issue 15), and it is sent by tasks after the commit, once, retried (issue 13 #9)."""

import re
import socket

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.core.exceptions import ValidationError
from django.urls import reverse

from apps.tenants.models import Membership, OnboardingEmail, Tenant
from apps.tenants.services import bulk_onboard, onboard_user, update_policies
from apps.tenants.tasks import retry_onboarding_emails, send_onboarding_emails

User = get_user_model()

@pytest.fixture
def committed(django_capture_on_commit_callbacks):
    """A block whose transactions' on-commit callbacks (queueing the e-mails) run, as in production."""
    return lambda: django_capture_on_commit_callbacks(execute=True)


# The attack of issue 13, as a team admin wrote it.
INJECTION = (
    "{% for g in user.groups.all %}{% for u in g.user_set.all %}{{u.password}}"
    "{% for j in u.jobs.all %}{{j.secret.values}}{% endfor %}{% endfor %}{% endfor %}"
)


def test_the_injection_is_refused_when_a_team_admin_saves_it(world, client):
    client.force_login(world.a_admin)
    url = reverse("admin:tenants_tenant_change", args=[world.tenant_a.pk])
    page = client.get(url)
    form = page.context["adminform"].form
    data = {name: form[name].value() for name in form.fields if form[name].value() is not None}
    data["onboarding_email_template"] = INJECTION
    response = client.post(url, data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["onboarding_email_template"]
    assert "the {% for %} tag is not allowed" in str(errors)
    assert Tenant.objects.get(pk=world.tenant_a.pk).onboarding_email_template == ""
    with pytest.raises(ValidationError):
        update_policies(world.a_admin, world.tenant_a, onboarding_email_template=INJECTION)


@pytest.mark.parametrize(
    "text, problem",
    [
        (INJECTION, "the {% for %} tag is not allowed"),
        ("{{ user.password }}", "unknown placeholder 'user.password'"),
        ("{{ tenant.memberships }}", "unknown placeholder 'tenant.memberships'"),
        ("{% debug %}", "the {% debug %} tag is not allowed"),
        ("{% load admin_list %}", "the {% load %} tag is not allowed"),
        ('{% include "tenants/onboarding_email.txt" %}', "the {% include %} tag is not allowed"),
        ('{{ username|center:"999999999" }}', "Invalid filter: 'center'"),
        ("{% if user.is_superuser %}x{% endif %}", "unknown placeholder 'user.is_superuser'"),
    ],
)
def test_a_stored_text_that_reaches_beyond_plain_strings_sends_nothing(world, text, problem, committed):
    """A text stored before validation existed (or written past it) is refused when rendered:
    the e-mail fails with the reason, and no hash or secret leaves."""
    Tenant.objects.filter(pk=world.tenant_a.pk).update(onboarding_email_template=text)
    world.tenant_a.refresh_from_db()
    with committed():
        user = onboard_user(world.a_admin, world.tenant_a, username="mallory", email="mallory@example.com", groups=["team_a"])
    email = OnboardingEmail.objects.get(membership__user=user)
    assert email.status == OnboardingEmail.Status.FAILED
    assert problem in email.last_error
    assert mail.outbox == []


def test_the_rendered_email_is_capped(world, committed):
    world.tenant_a.name = "T" * 200
    world.tenant_a.onboarding_email_template = "{{ team_name }}" * 1000  # 15,000 characters of text
    world.tenant_a.full_clean()
    world.tenant_a.save()
    with committed():
        user = onboard_user(world.a_admin, world.tenant_a, username="ann", email="ann@example.com", groups=["team_a"])
    email = OnboardingEmail.objects.get(membership__user=user)
    assert email.status == OnboardingEmail.Status.FAILED and "longer than 100000 characters" in email.last_error
    assert mail.outbox == []


def _links(body):
    return [url.rstrip(".,;)") for url in re.findall(r"https?://\S+", body)]


def test_the_email_states_the_teams_actual_policies_and_every_link_works(world, client, settings, committed):
    """Non-default policies appear with their numbers; following every link of the e-mail, as
    the new member does, reaches a working page."""
    settings.PAI_USER_MANUAL_URL = "https://docs.example.org/pai/manual/"
    update_policies(
        world.root, world.tenant_a, job_retention_days=9, idle_gpu_threshold_percent=12, idle_gpu_hours=6,
        idle_gpu_action="stop", contact_email="gpu-team@example.com",
    )
    client.force_login(world.a_admin)
    with committed():
        response = client.post(
            reverse("admin:tenants_tenant_onboard", args=[world.tenant_a.pk]),
            {"username": "nina", "email": "nina@example.com", "first_name": "Nina", "role": "member",
             "groups": [world.group_a.pk]},
        )
    assert response.status_code == 302
    [message] = mail.outbox
    body = message.body
    assert "Hello Nina," in body
    assert "Completed jobs are deleted after 9 days" in body
    assert "below 12% utilisation for 6 hours is idle: its owner gets an e-mail, and if it stays idle 12 more hours, the job is stopped." in body
    assert "team-a-data at /mnt/" in body
    assert "a_admin <a_admin@example.com>; the team's address: gpu-team@example.com" in body
    assert body.count("gpu-team@example.com") == 1
    assert message.reply_to == ["gpu-team@example.com"]

    links = _links(body)
    # The portal's pages: the member's jobs (and where to submit one).
    assert "http://testserver/jobs/" in links and "http://testserver/submit/" in links
    # In development without PAI_PUBLIC_URL the links use the address the admin onboarded at.
    internal = [url for url in links if url == "http://testserver" or url.startswith("http://testserver/")]
    assert set(links) - set(internal) == {settings.PAI_USER_MANUAL_URL}
    set_password = next(url for url in internal if "/accounts/reset/" in url)
    client.logout()
    page = client.get(set_password.removeprefix("http://testserver"), follow=True)
    assert page.status_code == 200 and b"Choose your password" in page.content
    assert b"Django administration" not in page.content
    done = client.post(page.redirect_chain[-1][0], {"new_password1": "a-long-new-pass-92", "new_password2": "a-long-new-pass-92"}, follow=True)
    assert b"Your password is set" in done.content
    assert client.login(username="nina", password="a-long-new-pass-92")
    for url in sorted(set(internal) - {set_password}):
        response = client.get(url.removeprefix("http://testserver") or "/", follow=True)
        assert response.status_code == 200, url


def test_production_requires_pai_public_url_and_uses_it(world, settings, committed):
    settings.PAI_PUBLIC_URL = "https://pai.example.com"
    with committed():
        onboard_user(world.a_admin, world.tenant_a, username="ola", email="ola@example.com", groups=["team_a"])
    links = _links(mail.outbox[0].body)
    assert all(url.startswith("https://pai.example.com/") for url in links if "example.com/" in url and "docs" not in url)


def test_the_sign_in_page_offers_a_password_reset_in_pais_own_pages(client, db):
    page = client.get(reverse("login"))
    assert b'id="forgot-password"' in page.content
    reset = client.get(reverse("password_reset"))
    assert reset.status_code == 200
    assert b"Forgot your password?" in reset.content and b"Django administration" not in reset.content


def test_a_forgotten_password_is_reset_from_the_link_the_member_is_mailed(world, client, settings):
    world.a_member.set_password("an-old-password-71")
    world.a_member.save()
    done = client.post(reverse("password_reset"), {"email": world.a_member.email}, follow=True)
    assert done.status_code == 200 and b"Django administration" not in done.content
    # An address nobody has gets the same answer and no mail.
    client.post(reverse("password_reset"), {"email": "nobody@example.com"})
    [message] = mail.outbox
    assert message.to == [world.a_member.email] and message.subject == "[pai] Choose a new password"
    assert f'your pai account "{world.a_member.username}"' in message.body and "testserver team" not in message.body
    # Its links are at the address the member asked from (development), every one working.
    links = _links(message.body)
    assert links[1] == "http://testserver/accounts/login/"
    [link] = [url for url in links if "/accounts/reset/" in url]
    page = client.get(link.removeprefix("http://testserver"), follow=True)
    assert b"Choose your password" in page.content
    client.post(page.redirect_chain[-1][0], {"new_password1": "a-fresh-pass-5531", "new_password2": "a-fresh-pass-5531"})
    assert client.login(username=world.a_member.username, password="a-fresh-pass-5531")
    assert not client.login(username=world.a_member.username, password="an-old-password-71")
    # In production, at PAI_PUBLIC_URL whatever host the request named.
    settings.PAI_PUBLIC_URL = "https://pai.example.com"
    client.post(reverse("password_reset"), {"email": world.a_member.email})
    assert [url.split("/accounts/")[0] for url in _links(mail.outbox[-1].body)] == ["https://pai.example.com"] * 2


# --- sent by tasks ----------------------------------------------------------------------------


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_bulk_emails_are_sent_by_tasks_once_each_and_retried_after_a_mail_server_failure(world, settings, committed):
    rows = "\n".join(f"user{i:03d},user{i:03d}@example.com,team_a" for i in range(60))
    # The mail server is down while the tasks run: every e-mail fails and waits for a retry.
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", _closed_port(), 2
    with committed():
        users = bulk_onboard(world.a_admin, world.tenant_a, "username,email,groups\n" + rows)
    assert len(users) == 60
    emails = OnboardingEmail.objects.filter(membership__tenant=world.tenant_a)
    assert emails.count() == 60
    assert set(emails.values_list("status", flat=True)) == {OnboardingEmail.Status.FAILED}
    assert "ConnectionRefusedError" in emails.first().last_error

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    with committed():
        assert retry_onboarding_emails() == 60
    assert sorted(m.to[0] for m in mail.outbox) == sorted(f"user{i:03d}@example.com" for i in range(60))
    assert set(emails.values_list("status", flat=True)) == {OnboardingEmail.Status.SENT}
    # A task delivered twice, or the retry run again, sends nothing more.
    send_onboarding_emails(list(emails.values_list("pk", flat=True)))
    assert retry_onboarding_emails() == 0
    assert len(mail.outbox) == 60
    # Every user is a member with their groups, the default group included, as one by one.
    ann = User.objects.get(username="user007")
    assert set(ann.groups.values_list("name", flat=True)) == {"default", "team_a"}
    assert Membership.objects.get(user=ann).tenant == world.tenant_a


def test_a_team_admin_sees_the_state_and_resends(world, client, committed):
    with committed():
        user = onboard_user(world.a_admin, world.tenant_a, username="pat", email="pat@example.com", groups=["team_a"])
    membership = Membership.objects.get(user=user)
    client.force_login(world.a_admin)
    page = client.get(reverse("admin:tenants_tenant_change", args=[world.tenant_a.pk]))
    row = re.search(rb'<tr class="member" data-username="pat">.*?</tr>', page.content, re.S).group(0)
    assert b"Sent" in row and b"default, team_a" in row and b"never" in row
    with committed():
        response = client.post(reverse("admin:tenants_tenant_resend_onboarding", args=[world.tenant_a.pk, membership.pk]))
    assert response.status_code == 302
    assert [m.to for m in mail.outbox] == [["pat@example.com"], ["pat@example.com"]]
    # The members list shows the state too, and resends in bulk.
    listing = client.get(reverse("admin:tenants_membership_changelist"), {"onboarding_email__status__exact": "sent"})
    assert b"pat" in listing.content
    with committed():
        client.post(reverse("admin:tenants_membership_changelist"),
                    {"action": "resend_onboarding_action", "_selected_action": [membership.pk]})
    assert len(mail.outbox) == 3
    # Another team's member cannot be resent to.
    other = Membership.objects.get(user=world.b_member)
    assert client.post(reverse("admin:tenants_tenant_resend_onboarding", args=[world.tenant_b.pk, other.pk])).status_code == 404
    assert client.post(reverse("admin:tenants_tenant_resend_onboarding", args=[world.tenant_a.pk, other.pk])).status_code == 404


def test_onboarding_into_no_vc_group_warns_and_the_teams_group_is_preselected(world, client, committed):
    from apps.accounts.models import Group

    Group.objects.create(name="team_a_readers", tenant=world.tenant_a)
    client.force_login(world.a_admin)
    url = reverse("admin:tenants_tenant_onboard", args=[world.tenant_a.pk])
    form = client.get(url).context["form"]
    assert [g.name for g in form.fields["groups"].initial] == ["team_a"]  # the team's one VC-granting group
    assert "team_a — submits to team_a" in client.get(url).content.decode()
    readers = Group.objects.get(name="team_a_readers")
    refused = client.post(url, {"username": "vic", "email": "vic@example.com", "role": "member", "groups": [readers.pk]})
    assert refused.status_code == 200 and "grants a virtual cluster" in str(refused.context["form"].errors["groups"])
    assert not User.objects.filter(username="vic").exists()
    with committed():
        accepted = client.post(url, {"username": "vic", "email": "vic@example.com", "role": "member",
                                     "groups": [readers.pk], "without_vc": "on"})
    assert accepted.status_code == 302 and User.objects.filter(username="vic").exists()


def test_the_sample_csv_names_the_teams_groups_and_onboards_as_is(world, client, committed):
    client.force_login(world.a_admin)
    response = client.get(reverse("admin:tenants_tenant_sample_csv", args=[world.tenant_a.pk]))
    assert response["Content-Type"].startswith("text/csv")
    text = response.content.decode()
    assert text.splitlines()[0] == "username,email,groups,role,first_name,last_name" and ",team_a," in text
    with committed():
        users = bulk_onboard(world.a_admin, world.tenant_a, text)
    assert [u.username for u in users] == ["ada", "grace"]
    assert client.get(reverse("admin:tenants_tenant_sample_csv", args=[world.tenant_b.pk])).status_code == 404
