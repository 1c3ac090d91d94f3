"""The django-q2 schedules every app declares are kept in the database by name."""

import pytest
from django_q.models import Schedule

from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.jobs import tasks as jobs_tasks
from apps.monitoring import tasks as monitoring_tasks
from apps.oncall import tasks as oncall_tasks
from apps.tenants import tasks as tenants_tasks
from pai import schedules

pytestmark = pytest.mark.django_db

APPS = (jobs_tasks, monitoring_tasks, oncall_tasks, tenants_tasks)


def _declared():
    return {name: spec for module in APPS for name, spec in module.SCHEDULES.items()}


def test_migrate_created_every_apps_schedules():
    stored = {s.name: (s.func, s.minutes, s.schedule_type, s.repeats) for s in Schedule.objects.all()}
    for name, (func, minutes) in _declared().items():
        assert stored[name] == (func, minutes, Schedule.MINUTES, -1)


def test_a_changed_or_deleted_schedule_is_put_back_and_a_second_run_writes_nothing():
    Schedule.objects.filter(name="jobs.retention").update(minutes=5, repeats=3)
    Schedule.objects.filter(name="tenants.onboarding_email_retry").delete()
    for module in APPS:
        module.ensure_schedules()
    retention = Schedule.objects.get(name="jobs.retention")
    assert (retention.minutes, retention.repeats) == (60, -1)
    assert Schedule.objects.filter(name="tenants.onboarding_email_retry").count() == 1

    with CaptureQueriesContext(connection) as queries:
        schedules.ensure(_declared())
    writes = [q["sql"] for q in queries if q["sql"].split(" ", 1)[0] in ("INSERT", "UPDATE", "DELETE")]
    assert writes == []
    assert Schedule.objects.count() == len(_declared())
