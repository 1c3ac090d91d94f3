"""Rotation arithmetic across DST, overrides and swaps, fair share, and who is on call."""

from datetime import date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from django.core.exceptions import ValidationError

from apps.audit.models import AuditEntry
from apps.oncall import services
from apps.oncall.models import Rotation, RotationMember
from apps.oncall.shifts import Override, RotationPlan, first_handoff_day
from tests import factories as f

UTC = timezone.utc
BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def weekly(zone, members=("a", "b", "c"), dris=1, first_day=date(2026, 3, 2)):
    return RotationPlan(zone=zone, first_day=first_day, handoff=time(10, 0), shift_days=7, members=members,
                        dris_per_shift=dris)


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/New_York"])
def test_handoff_stays_at_local_wall_clock_across_spring_forward(zone):
    plan = weekly(zone)
    tz = ZoneInfo(zone)
    starts = [plan.shift_start(i) for i in range(6)]  # March into April 2026, in UTC
    assert all(s.astimezone(tz).weekday() == 0 and s.astimezone(tz).time() == time(10, 0) for s in starts)
    lengths = {(b - a) for a, b in zip(starts, starts[1:])}
    # One shift spans the change and is an hour short.
    assert lengths == {timedelta(days=7), timedelta(days=7, hours=-1)}


def test_fall_back_makes_one_shift_an_hour_longer():
    plan = weekly("Europe/Berlin", first_day=date(2026, 10, 19))
    assert plan.shift(0).ends_at - plan.shift(0).starts_at == timedelta(days=7, hours=1)


@pytest.mark.parametrize("tz", [BERLIN, NEW_YORK])
def test_who_is_on_call_around_a_dst_handoff(tz):
    plan = weekly(str(tz), first_day=date(2026, 3, 2))
    # Shift 1 (b) runs from Monday 2026-03-09 10:00 local to Monday 2026-03-16 10:00 local.
    assert plan.on_call_at(datetime(2026, 3, 9, 9, 59, tzinfo=tz)) == ("a",)
    assert plan.on_call_at(datetime(2026, 3, 9, 10, 0, tzinfo=tz)) == ("b",)
    assert plan.on_call_at(datetime(2026, 3, 30, 9, 59, tzinfo=tz)) == ("a",)  # shift 3 wraps to a
    assert plan.on_call_at(datetime(2026, 3, 30, 10, 0, tzinfo=tz)) == ("b",)
    assert plan.on_call_at(datetime(2026, 3, 2, 9, 0, tzinfo=tz)) == ()  # before the first shift


def test_two_dris_per_shift_walk_the_list_in_pairs():
    plan = weekly("UTC", members=("a", "b", "c"), dris=2)
    assert [plan.scheduled(i) for i in range(4)] == [("a", "b"), ("c", "a"), ("b", "c"), ("a", "b")]


def test_shift_days_and_handoff_weekday():
    assert first_handoff_day(date(2026, 12, 2), 0) == date(2026, 12, 7)  # Wed → next Monday
    assert first_handoff_day(date(2026, 12, 7), 0) == date(2026, 12, 7)
    daily = RotationPlan(zone="UTC", first_day=date(2026, 12, 7), handoff=time(8), shift_days=1, members=("a", "b"))
    assert [s.scheduled for s in daily.shifts_from(datetime(2026, 12, 8, 9, tzinfo=UTC), 3)] == [("b",), ("a",), ("b",)]


def test_override_replaces_one_dri_for_its_range_only():
    plan = weekly("UTC", members=("a", "b"), dris=2)
    cover = Override(datetime(2026, 3, 3, tzinfo=UTC), datetime(2026, 3, 4, tzinfo=UTC), replaces="a", member="z")
    assert plan.on_call_at(datetime(2026, 3, 3, 12, tzinfo=UTC), [cover]) == ("z", "b")
    assert plan.on_call_at(datetime(2026, 3, 4, 12, tzinfo=UTC), [cover]) == ("a", "b")
    # Covering for someone already on the shift leaves one DRI, not a duplicate.
    self_cover = Override(cover.starts_at, cover.ends_at, replaces="a", member="b")
    assert plan.on_call_at(datetime(2026, 3, 3, 12, tzinfo=UTC), [self_cover]) == ("b",)


def test_fair_share_is_even_and_counts_overrides():
    plan = weekly("Europe/Berlin", members=("a", "b", "c"))
    start = plan.shift_start(0)
    end = plan.shift_start(6)  # six shifts: two each, one of them across spring forward
    shares = plan.fair_share(start, end)
    assert {m: s["shifts"] for m, s in shares.items()} == {"a": 2, "b": 2, "c": 2}
    total = sum(s["hours"] for s in shares.values())
    assert total == pytest.approx((end - start).total_seconds() / 3600)
    # a's second shift spans spring forward: an hour less than the others.
    assert shares["a"]["hours"] == pytest.approx(335) and shares["c"]["hours"] == pytest.approx(336)
    # c takes a day of a's first shift.
    cover = Override(start, start + timedelta(days=1), replaces="a", member="c")
    covered = plan.fair_share(start, end, [cover])
    assert covered["c"]["hours"] == pytest.approx(360) and covered["a"]["hours"] == pytest.approx(311)
    assert covered["a"]["shifts"] == 2  # scheduled shifts do not move


def test_rotation_model_drives_the_plan_and_current_dris(oncall):
    monday = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
    assert services.current_dris(monday) == [oncall.alice]
    assert services.current_dris(monday + timedelta(days=7)) == [oncall.bob]
    assert services.current_dris(monday - timedelta(minutes=1)) == []
    # A tenant's rotation is not the platform's.
    team = Rotation.objects.create(name="team-a", tenant=oncall.tenant_a, start_date=date(2026, 1, 1))
    RotationMember.objects.create(rotation=team, user=oncall.a_admin)
    assert services.current_dris(monday + timedelta(days=7)) == [oncall.bob]
    assert [u for _, u in services.on_call(monday + timedelta(days=7))] == [[oncall.bob], [oncall.a_admin]]


def test_swap_and_override_services(oncall):
    rotation = oncall.rotation
    services.swap_shifts(rotation, oncall.root, first_index=0, second_index=1,
                         first_user=oncall.alice, second_user=oncall.bob)
    monday = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
    assert services.rotation_dris(rotation, monday + timedelta(hours=1)) == [oncall.bob]
    assert services.rotation_dris(rotation, monday + timedelta(days=7, hours=1)) == [oncall.alice]
    assert services.rotation_dris(rotation, monday + timedelta(days=14, hours=1)) == [oncall.alice]
    assert AuditEntry.objects.filter(action="oncall.rotation.override").count() == 2
    with pytest.raises(ValidationError):
        services.swap_shifts(rotation, oncall.root, first_index=0, second_index=1,
                             first_user=oncall.bob, second_user=oncall.bob)
    outsider = f.UserFactory(username="carol")
    with pytest.raises(ValidationError) as refused:
        services.add_override(rotation, oncall.root, user=oncall.alice, replaces=outsider,
                              starts_at=monday, ends_at=monday + timedelta(days=1))
    assert "replaces" in refused.value.message_dict


def test_upcoming_shifts_and_fair_share_services(oncall):
    at = datetime(2026, 1, 14, tzinfo=UTC)
    shifts = services.upcoming_shifts(oncall.rotation, 3, at)
    assert [s["scheduled"] for s in shifts] == [[oncall.bob], [oncall.alice], [oncall.bob]]
    assert shifts[0]["current"] and not shifts[1]["current"]
    share = services.fair_share(oncall.rotation, datetime(2026, 1, 5, 10, tzinfo=UTC), datetime(2026, 2, 2, 10, tzinfo=UTC))
    assert sorted((u.username, n, h) for u, n, h in share) == [("alice", 2, 336.0), ("bob", 2, 336.0)]
