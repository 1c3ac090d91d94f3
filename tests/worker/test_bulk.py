"""The worker's many-row writes (`apps.jobs.worker.bulk`): on PostgreSQL one array per
column, elsewhere Django's own bulk methods; either way every value comes back as written."""

from datetime import datetime, timedelta, timezone

import pytest
from django.db import DataError, connection, transaction
from django.test.utils import CaptureQueriesContext

from apps.jobs.models import Job, JobEvent
from apps.jobs.worker.bulk import bulk_insert, bulk_set

from tests.conftest import requires_postgres

from .conftest import job_yaml

# Text that array literals and quoting get wrong when done by hand.
AWKWARD = ["NULL", "", 'a "quoted" {brace,comma} \\ back', "it's", "é\n\t", "x" * 5000]


@pytest.fixture
def jobs(world, submit):
    return [submit(world.a_member, job_yaml(f"bulk-{i}")) for i in range(len(AWKWARD))]


def test_bulk_set_writes_each_rows_own_values_of_every_type(jobs):
    at = datetime(2026, 12, 4, 10, 0, 0, 123456, tzinfo=timezone.utc)
    for i, job in enumerate(jobs):
        job.wait_reason = AWKWARD[i]
        job.queue_position = None if i % 2 else i
        job.gang_allocation = bool(i % 2)
        job.completed_at = None if i == 0 else at + timedelta(seconds=i)
        job.placement = None if i == 1 else {"pods": [{"node": AWKWARD[i], "devices": [i]}], "n": None}
    untouched = Job.objects.get(pk=jobs[0].pk).spec
    with CaptureQueriesContext(connection) as queries:
        bulk_set(Job, jobs, ["wait_reason", "queue_position", "gang_allocation", "completed_at", "placement"])
    if connection.vendor == "postgresql":
        assert len(queries) == 1  # one statement for the batch, whatever its size
    for i, job in enumerate(jobs):
        stored = Job.objects.get(pk=job.pk)
        assert stored.wait_reason == AWKWARD[i]
        assert stored.queue_position == (None if i % 2 else i)
        assert stored.gang_allocation is bool(i % 2)
        assert stored.completed_at == (None if i == 0 else at + timedelta(seconds=i))
        assert stored.placement == (None if i == 1 else {"pods": [{"node": AWKWARD[i], "devices": [i]}], "n": None})
    assert Job.objects.get(pk=jobs[0].pk).spec == untouched  # fields not named are left alone


def test_bulk_insert_stores_every_row_as_given(jobs):
    at = datetime(2026, 12, 4, 10, 0, 0, tzinfo=timezone.utc)
    events = [
        JobEvent(job=job, reason=AWKWARD[i][:255], message=AWKWARD[-1 - i], first_seen=at, last_seen=at + timedelta(seconds=i),
                 count=i + 1, task_index=None if i % 2 else i, source_host=AWKWARD[i][:253])
        for i, job in enumerate(jobs)
    ]
    with CaptureQueriesContext(connection) as queries:
        bulk_insert(JobEvent, events)
    if connection.vendor == "postgresql":
        assert len(queries) == 1
    stored = {e.job_id: e for e in JobEvent.objects.filter(job__in=jobs)}
    assert len(stored) == len(jobs)
    for i, job in enumerate(jobs):
        event = stored[job.pk]
        assert (event.reason, event.message, event.count, event.task_index, event.source_host) == (
            AWKWARD[i][:255], AWKWARD[-1 - i], i + 1, None if i % 2 else i, AWKWARD[i][:253])
        assert (event.first_seen, event.last_seen) == (at, at + timedelta(seconds=i))
        assert event.type == "Normal"  # the field's default


@requires_postgres
def test_text_too_long_for_its_column_is_refused_not_cut(jobs):
    # As an insert or update of one row would be (SQLite does not enforce lengths).
    at = datetime(2026, 12, 4, 10, 0, 0, tzinfo=timezone.utc)
    with pytest.raises(DataError), transaction.atomic():
        bulk_insert(JobEvent, [JobEvent(job=jobs[0], reason="r" * 256, first_seen=at, last_seen=at)])
    assert not JobEvent.objects.filter(job=jobs[0]).exists()
    jobs[0].name = "n" * 300
    with pytest.raises(DataError), transaction.atomic():
        bulk_set(Job, jobs[:1], ["name"])
    assert Job.objects.get(pk=jobs[0].pk).name == "bulk-0"


def test_bulk_insert_can_leave_out_rows_that_exist(jobs):
    at = datetime(2026, 12, 4, 10, 0, 0, tzinfo=timezone.utc)
    first = JobEvent.objects.create(job=jobs[0], reason="Started", first_seen=at, last_seen=at)
    again = JobEvent(pk=first.pk, job=jobs[0], reason="changed", first_seen=at, last_seen=at)
    bulk_insert(JobEvent, [again], ignore_conflicts=True)
    bulk_insert(JobEvent, [JobEvent(job=jobs[1], reason="Pulled", first_seen=at, last_seen=at)], ignore_conflicts=True)
    assert JobEvent.objects.get(pk=first.pk).reason == "Started"
    assert JobEvent.objects.filter(job=jobs[1], reason="Pulled").exists()
