"""The monitoring-hours clock: weekends, evenings, holidays, DST changes in two zones."""

from datetime import date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from apps.oncall.clock import MonitoringCalendar

UTC = timezone.utc
BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def working_hours(zone="UTC", holidays=()):
    return MonitoringCalendar(zone=zone, weekdays=frozenset(range(5)), start=time(9), end=time(18),
                              holidays=frozenset(holidays))


def always(zone):
    return MonitoringCalendar(zone=zone, weekdays=frozenset(range(7)), start=time(0), end=time(0))


def test_inside_hours_the_clock_runs_like_a_wall_clock():
    start = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)  # Tuesday
    assert working_hours().add(start, timedelta(minutes=30)) == datetime(2026, 12, 1, 10, 30, tzinfo=UTC)


def test_evening_stops_the_clock_until_next_morning():
    start = datetime(2026, 12, 1, 17, 45, tzinfo=UTC)  # Tuesday, 15 minutes before close
    assert working_hours().add(start, timedelta(minutes=30)) == datetime(2026, 12, 2, 9, 15, tzinfo=UTC)


def test_opened_at_night_starts_counting_at_nine():
    start = datetime(2026, 12, 1, 23, 0, tzinfo=UTC)
    assert working_hours().add(start, timedelta(hours=2)) == datetime(2026, 12, 2, 11, 0, tzinfo=UTC)


def test_weekend_is_skipped():
    friday = datetime(2026, 12, 4, 16, 30, tzinfo=UTC)
    assert working_hours().add(friday, timedelta(hours=4)) == datetime(2026, 12, 7, 11, 30, tzinfo=UTC)
    saturday = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
    assert working_hours().add(saturday, timedelta(minutes=30)) == datetime(2026, 12, 7, 9, 30, tzinfo=UTC)


def test_holidays_are_skipped():
    calendar = working_hours(holidays=[date(2026, 12, 24), date(2026, 12, 25)])
    start = datetime(2026, 12, 23, 17, 0, tzinfo=UTC)  # Wednesday; Thu and Fri are holidays
    assert calendar.add(start, timedelta(hours=2)) == datetime(2026, 12, 28, 10, 0, tzinfo=UTC)


def test_a_whole_day_of_work_spans_several_days():
    start = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    # 24 h of working time = 2 days and 6 hours of 9-hour days.
    assert working_hours().add(start, timedelta(hours=24)) == datetime(2026, 12, 3, 15, 0, tzinfo=UTC)


def test_elapsed_counts_only_open_time():
    calendar = working_hours()
    friday_evening = datetime(2026, 12, 4, 17, 0, tzinfo=UTC)
    monday_morning = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)
    assert calendar.elapsed(friday_evening, monday_morning) == timedelta(hours=2)
    assert calendar.elapsed(monday_morning, friday_evening) == timedelta(0)
    assert calendar.is_open(monday_morning) and not calendar.is_open(datetime(2026, 12, 5, 10, tzinfo=UTC))


@pytest.mark.parametrize(
    "zone, friday, monday",
    [
        # Berlin springs forward on Sunday 2026-03-29: Friday 16:30 CET is 15:30 UTC,
        # Monday 09:30 CEST is 07:30 UTC.
        ("Europe/Berlin", datetime(2026, 3, 27, 15, 30, tzinfo=UTC), datetime(2026, 3, 30, 7, 30, tzinfo=UTC)),
        # New York springs forward on Sunday 2026-03-08: Friday 16:30 EST = 21:30 UTC,
        # Monday 09:30 EDT = 13:30 UTC.
        ("America/New_York", datetime(2026, 3, 6, 21, 30, tzinfo=UTC), datetime(2026, 3, 9, 13, 30, tzinfo=UTC)),
        # And back in autumn: Berlin 2026-10-25, New York 2026-11-01.
        ("Europe/Berlin", datetime(2026, 10, 23, 14, 30, tzinfo=UTC), datetime(2026, 10, 26, 8, 30, tzinfo=UTC)),
        ("America/New_York", datetime(2026, 10, 30, 20, 30, tzinfo=UTC), datetime(2026, 11, 2, 14, 30, tzinfo=UTC)),
    ],
)
def test_working_hours_keep_wall_clock_across_dst(zone, friday, monday):
    calendar = working_hours(zone)
    # 16:30 local Friday + 2 h of 09:00-18:00 time = 09:30 local Monday, whatever the offset.
    deadline = calendar.add(friday, timedelta(hours=2))
    assert deadline == monday
    assert deadline.astimezone(ZoneInfo(zone)).time() == time(9, 30)


@pytest.mark.parametrize(
    "zone, before, hours_later",
    [
        # 24 h of an always-open clock across spring-forward is 24 real hours, i.e. 25 on the wall clock.
        ("Europe/Berlin", datetime(2026, 3, 28, 12, 0, tzinfo=BERLIN), datetime(2026, 3, 29, 13, 0, tzinfo=BERLIN)),
        ("America/New_York", datetime(2026, 3, 7, 12, 0, tzinfo=NEW_YORK), datetime(2026, 3, 8, 13, 0, tzinfo=NEW_YORK)),
        # Across fall-back, 23 on the wall clock.
        ("Europe/Berlin", datetime(2026, 10, 24, 12, 0, tzinfo=BERLIN), datetime(2026, 10, 25, 11, 0, tzinfo=BERLIN)),
        ("America/New_York", datetime(2026, 10, 31, 12, 0, tzinfo=NEW_YORK), datetime(2026, 11, 1, 11, 0, tzinfo=NEW_YORK)),
    ],
)
def test_always_open_clock_counts_real_time_across_dst(zone, before, hours_later):
    calendar = always(zone)
    assert calendar.add(before, timedelta(hours=24)) == hours_later
    assert calendar.elapsed(before, hours_later) == timedelta(hours=24)


def test_a_short_day_window_is_short_on_spring_forward():
    # 00:00-24:00 on Sunday 2026-03-29 in Berlin lasts 23 real hours.
    calendar = MonitoringCalendar(zone="Europe/Berlin", weekdays=frozenset({6}), start=time(0), end=time(0))
    opens, closes = calendar.window_on(date(2026, 3, 29))
    assert closes - opens == timedelta(hours=23)


def test_snapshot_round_trip():
    calendar = working_hours("Europe/Berlin", holidays=[date(2026, 12, 25)])
    assert MonitoringCalendar.from_dict(calendar.to_dict()) == calendar


def test_bad_calendars_are_refused():
    with pytest.raises(ValueError):
        MonitoringCalendar(zone="UTC", start=time(18), end=time(9))
    with pytest.raises(Exception):
        MonitoringCalendar(zone="Mars/Olympus")
    empty = MonitoringCalendar(zone="UTC", weekdays=frozenset())
    with pytest.raises(ValueError):
        empty.add(datetime(2026, 1, 1, tzinfo=UTC), timedelta(minutes=1))
