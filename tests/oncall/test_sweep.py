"""The SLA sweep: breaches, one reminder per deadline, escalation steps, follow-ups, handoffs, schedules."""

from datetime import date, datetime, timedelta, timezone

from django.core import mail
from django_q.models import Schedule

from apps.oncall import paging, services, tasks
from apps.oncall.choices import IncidentSource, NotificationKind, TimelineKind
from apps.oncall.models import Notification, RotationMember
from tests import factories as f

UTC = timezone.utc
TUESDAY_10 = datetime(2026, 1, 6, 10, 0, tzinfo=UTC)


def sev1(world, now=TUESDAY_10):
    """A sev 1 opened at `now`, its DRIs paged as the task queued at its opening does."""
    incident = services.open_incident(title="Web UI down", severity=1, source=IncidentSource.ALERT,
                                      cluster=world.cluster, now=now)
    paging.page(incident, now)
    mail.outbox.clear()
    return incident


def recipients(kind):
    return [n.recipients for n in Notification.objects.filter(kind=kind)]


def test_sweep_before_the_deadline_only_reminds_once_it_is_near(oncall):
    sev1(oncall)
    assert services.run_sla_sweep(TUESDAY_10 + timedelta(minutes=19)) == 0
    assert mail.outbox == []
    # The SLA row's `remind_before` (10 minutes) before the acknowledge deadline: one reminder.
    assert services.run_sla_sweep(TUESDAY_10 + timedelta(minutes=21)) == 1
    assert services.run_sla_sweep(TUESDAY_10 + timedelta(minutes=29)) == 0
    assert [m.to for m in mail.outbox] == [["alice@example.com"]]
    assert mail.outbox[0].subject.startswith("[pai] Due soon: acknowledge")


def test_missed_ack_is_marked_and_reminded_once(oncall):
    incident = sev1(oncall)
    after = TUESDAY_10 + timedelta(minutes=31)
    assert services.run_sla_sweep(after) == 1
    assert services.run_sla_sweep(after) == 0  # run twice: still one reminder
    assert services.run_sla_sweep(after + timedelta(seconds=30)) == 0
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["alice@example.com"]
    assert "SLA missed" in mail.outbox[0].subject
    incident.refresh_from_db()
    assert incident.ack_breached_at == TUESDAY_10 + timedelta(minutes=30)
    assert incident.timeline.filter(kind=TimelineKind.SLA).count() == 1


def test_escalation_goes_to_the_other_dri_then_the_team_admins(oncall):
    oncall.rotation.dris_per_shift = 2
    oncall.rotation.save()
    RotationMember.objects.create(rotation=oncall.rotation, user=f.UserFactory(username="carol", email="carol@example.com"), position=2)
    incident = sev1(oncall)
    incident.assignees.set([oncall.alice])  # only one of the two DRIs was assigned
    deadline = TUESDAY_10 + timedelta(minutes=30)
    services.run_sla_sweep(deadline)
    assert recipients(NotificationKind.REMIND) == [["alice@example.com"]]
    services.run_sla_sweep(deadline + timedelta(minutes=29))
    assert not Notification.objects.filter(kind=NotificationKind.ESCALATE_DRI).exists()
    services.run_sla_sweep(deadline + timedelta(minutes=30))
    assert recipients(NotificationKind.ESCALATE_DRI) == [["bob@example.com"]]
    services.run_sla_sweep(deadline + timedelta(minutes=60))
    services.run_sla_sweep(deadline + timedelta(minutes=61))
    # The platform rotation's team admins are the platform admins.
    assert recipients(NotificationKind.ESCALATE_ADMINS) == [["root@example.com"]]
    assert len(mail.outbox) == 3


def test_with_one_dri_per_shift_escalation_goes_to_the_next_shift(oncall):
    sev1(oncall)  # alice's shift; bob has the next one
    deadline = TUESDAY_10 + timedelta(minutes=30)
    services.run_sla_sweep(deadline + timedelta(minutes=30))
    assert recipients(NotificationKind.ESCALATE_DRI) == [["bob@example.com"]]


def test_escalation_waits_in_monitoring_hours(oncall):
    # Opened Tuesday 17:45: the ack deadline is Wednesday 09:15, the first escalation 09:45.
    incident = sev1(oncall, now=datetime(2026, 1, 6, 17, 45, tzinfo=UTC))
    assert incident.ack_deadline == datetime(2026, 1, 7, 9, 15, tzinfo=UTC)
    assert services.run_sla_sweep(datetime(2026, 1, 7, 3, 0, tzinfo=UTC)) == 0  # night: clock stopped


def test_tenant_rotation_escalates_to_its_team_admins(oncall):
    from apps.oncall.models import Rotation

    team = Rotation.objects.create(name="team-a", tenant=oncall.tenant_a, start_date=date(2026, 1, 5))
    RotationMember.objects.create(rotation=team, user=oncall.a_member)
    incident = services.open_incident(title="Team A storage slow", severity=1, source=IncidentSource.DRI,
                                      cluster=oncall.cluster, rotation=team, now=TUESDAY_10)
    assert list(incident.assignees.all()) == [oncall.a_member]
    services.run_sla_sweep(TUESDAY_10 + timedelta(hours=2))
    assert recipients(NotificationKind.ESCALATE_ADMINS) == [["a_admin@example.com"]]


def test_each_update_deadline_gets_its_own_reminder(oncall):
    incident = sev1(oncall)
    services.acknowledge(incident, oncall.alice, now=TUESDAY_10)
    first_deadline = TUESDAY_10 + timedelta(hours=2)
    services.run_sla_sweep(first_deadline)
    services.run_sla_sweep(first_deadline)
    services.post_update(incident, oncall.alice, "still investigating", now=first_deadline + timedelta(minutes=5))
    services.run_sla_sweep(first_deadline + timedelta(hours=2, minutes=5))
    incident.refresh_from_db()
    assert incident.update_breaches == 2 and incident.ack_breached_at is None
    assert Notification.objects.filter(kind=NotificationKind.REMIND).count() == 2


def test_resolved_incidents_are_not_chased(oncall):
    incident = sev1(oncall)
    services.acknowledge(incident, oncall.alice, now=TUESDAY_10)
    services.resolve(incident, oncall.alice, now=TUESDAY_10)
    assert services.run_sla_sweep(TUESDAY_10 + timedelta(days=3)) == 0


def test_overdue_follow_ups_are_reminded_once(oncall):
    incident = sev1(oncall)
    services.acknowledge(incident, oncall.alice, now=TUESDAY_10)
    services.mitigate(incident, oncall.alice, now=TUESDAY_10)
    services.record_review(incident, oncall.alice, cause="c", prevention="p", follow_ups=[
        {"title": "Add disk alerts", "owner": oncall.bob, "due_date": date(2026, 1, 10)},
        {"title": "Later", "owner": oncall.bob, "due_date": date(2026, 3, 1)},
    ])
    services.resolve(incident, oncall.alice, now=TUESDAY_10)
    now = datetime(2026, 1, 12, 8, 0, tzinfo=UTC)
    services.run_sla_sweep(now)
    services.run_sla_sweep(now + timedelta(hours=1))
    overdue = [m for m in mail.outbox if "follow-up" in m.subject]
    assert len(overdue) == 1 and overdue[0].to == ["bob@example.com"] and "Add disk alerts" in overdue[0].subject


def test_handoff_mail_goes_to_the_incoming_dri_once_per_shift(oncall):
    bob_starts = datetime(2026, 1, 12, 10, 0, tzinfo=UTC)
    assert services.send_handoffs(bob_starts + timedelta(minutes=1)) == 1
    assert services.send_handoffs(bob_starts + timedelta(minutes=6)) == 0
    assert [m.to for m in mail.outbox] == [["bob@example.com"]]
    assert services.send_handoffs(bob_starts + timedelta(days=7, minutes=1)) == 1
    assert mail.outbox[-1].to == ["alice@example.com"]
    # A shift that started more than a day ago gets no late handoff mail.
    assert services.send_handoffs(bob_starts + timedelta(days=9)) == 0


def test_schedules_are_created_once_by_name(db):
    # post_migrate already ran ensure_schedules when the test database was built.
    assert set(Schedule.objects.values_list("name", flat=True)) >= set(tasks.SCHEDULES)
    Schedule.objects.filter(name="oncall.sla_sweep").update(minutes=15)
    tasks.ensure_schedules()
    tasks.ensure_schedules()
    sweep = Schedule.objects.get(name="oncall.sla_sweep")
    assert (sweep.func, sweep.minutes, sweep.schedule_type) == ("apps.oncall.tasks.sla_sweep", 1, Schedule.MINUTES)
    assert Schedule.objects.filter(name__startswith="oncall.").count() == len(tasks.SCHEDULES)


def test_sweep_task_uses_the_current_time(oncall):
    from django.utils import timezone as tz

    sev1(oncall, now=tz.now() - timedelta(days=30))  # its ack deadline passed long ago
    # Every step is due at once: remind, escalate to the other DRI, escalate to admins.
    assert tasks.sla_sweep() == 3
    sent = len(mail.outbox)
    assert tasks.sla_sweep() == 0
    assert len(mail.outbox) == sent


def test_a_failing_mail_server_is_retried_by_the_next_sweep(oncall, settings):
    sev1(oncall)
    after = TUESDAY_10 + timedelta(minutes=31)
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", 9, 2  # nothing listens there
    assert services.run_sla_sweep(after) == 0
    assert not Notification.objects.filter(kind=NotificationKind.REMIND).exists()
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    assert services.run_sla_sweep(after) == 1
    assert len(mail.outbox) == 1
