"""Job submission limits are a burst, then a rate per second: a sweep of a few hundred jobs
goes through however fast its script sends them, a runaway loop is held to the rate with
429s, and a tenant may have rates of its own."""

import pytest
from rest_framework.throttling import SimpleRateThrottle

from apps.jobs.models import Job

from .conftest import job_document, submit


@pytest.fixture
def clock(monkeypatch):
    """DRF's throttles read this clock instead of the wall clock; tests move it."""
    now = [1_000_000.0]
    monkeypatch.setattr(SimpleRateThrottle, "timer", staticmethod(lambda: now[0]))
    return now


def test_a_sweep_of_three_hundred_jobs_in_a_minute_goes_through(world, api, clock):
    client = api(world.a_member)
    # A sweep script submits 300 variants, 5 a second. The throttle runs before the body is
    # read, so documents the protocol refuses count as submissions too: they keep this fast.
    answers = []
    for i in range(300):
        answers.append(submit(client, "protocolVersion: 2\nname: sweep\n").status_code)
        clock[0] += 0.2
    assert set(answers) == {400}
    assert submit(client, job_document(name="sweep_300")).status_code == 202


def test_a_sweep_sent_as_fast_as_possible_goes_through(world, api, clock):
    client = api(world.a_member)
    # A script that submits 300 variants one after the other, without waiting: 30 ms each
    # (pai answers a submission in about 40 ms), past the rate of 20 a second; the burst
    # takes them all.
    answers = []
    for i in range(299):
        answers.append(submit(client, "protocolVersion: 2\nname: sweep\n").status_code)
        clock[0] += 0.03
    assert set(answers) == {400}
    assert submit(client, job_document(name="sweep_299")).status_code == 202


def test_past_its_burst_a_member_is_held_to_the_rate(world, api, clock, settings):
    settings.PAI_THROTTLE_JOB_SUBMIT = "20/second burst 30"
    client = api(world.a_member)
    assert {submit(client, "protocolVersion: 2\nname: sweep\n").status_code for _ in range(30)} == {400}
    refused = submit(client, job_document(name="late"))
    assert refused.status_code == 429 and refused.json()["code"] == "TooManyRequestsError"
    assert refused["Retry-After"] == "1"
    # Another user has a burst of their own.
    assert submit(api(world.b_member), job_document(name="other_user", defaults=None)).status_code == 202
    # Then 20 a second: one every 50 ms.
    clock[0] += 0.05
    assert [submit(client, job_document(name="late")).status_code for _ in range(2)] == [202, 429]
    clock[0] += 0.5
    assert [submit(client, "protocolVersion: 2\nname: sweep\n").status_code for _ in range(11)] == [400] * 10 + [429]
    assert Job.objects.filter(owner=world.a_member).count() == 1


def test_a_rate_without_a_burst_takes_that_many_at_once(world, api, clock, settings):
    settings.PAI_THROTTLE_JOB_SUBMIT = "20/second"
    client = api(world.a_member)
    for i in range(20):
        assert submit(client, job_document(name=f"burst_{i}")).status_code == 202
    refused = submit(client, job_document(name="burst_20"))
    assert refused.status_code == 429 and refused["Retry-After"] == "1"
    clock[0] += 1.01
    assert submit(client, job_document(name="burst_20")).status_code == 202
    assert Job.objects.filter(owner=world.a_member).count() == 21


def test_a_tenant_may_have_rates_of_its_own(world, api, clock):
    world.tenant_a.job_submit_rate = "2/second"
    world.tenant_a.save()
    member, other = api(world.a_member), api(world.b_member)
    assert [submit(member, job_document(name=f"a_{i}")).status_code for i in range(3)] == [202, 202, 429]
    assert [submit(other, job_document(name=f"b_{i}", defaults=None)).status_code for i in range(3)] == [202, 202, 202]

    world.tenant_a.job_submit_rate = "1/minute burst 4"  # 4 at once, then one a minute
    world.tenant_a.save()
    clock[0] += 2
    assert [submit(member, job_document(name=f"c_{i}")).status_code for i in range(5)] == [202] * 4 + [429]
    assert submit(member, job_document(name="c_4"))["Retry-After"] == "60"
    clock[0] += 60
    assert [submit(member, job_document(name="c_4")).status_code for _ in range(2)] == [202, 429]

    world.tenant_a.job_submit_rate = ""  # back to the site's rate, at once
    world.tenant_a.save()
    assert submit(member, job_document(name="a_3")).status_code == 202


@pytest.mark.parametrize("name, bad, message, good", [
    ("PAI_THROTTLE_JOB_SUBMIT", "20/week", "A number of requests per second, minute, hour or day, such as "
     "50/second, optionally with a burst, such as 20/second burst 300.", "20/second burst 300"),
    # The API-wide limit (DRF's sliding window) would ignore a burst without a word.
    ("PAI_THROTTLE_API", "50/second burst 500", "the API-wide rate takes no burst (only the job rates do); "
     "write it as N/period, such as 50/second.", "50/second"),
])
def test_a_site_rate_that_does_not_read_fails_the_start_naming_the_setting(settings, name, bad, message, good):
    from django.core import checks

    setattr(settings, name, bad)
    found = [(m.id, m.msg) for m in checks.run_checks() if m.id == "jobs.E003"]
    assert found == [("jobs.E003", f"{name}={bad!r}: {message}")]
    setattr(settings, name, good)
    assert [m for m in checks.run_checks() if m.id == "jobs.E003"] == []
