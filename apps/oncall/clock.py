"""The monitoring-hours clock: SLA time that runs only inside a calendar's open windows.

Pure Python (no Django): a calendar is a set of weekdays, a daily wall-clock window and
holidays in one IANA time zone. Windows are computed per local date and converted to
UTC, so a window on a DST-change day is as long as the wall clock says (an all-day
window on a spring-forward day lasts 23 hours), and deadlines land on the right
wall-clock time after the change.
"""

from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo

# A calendar with no open window within this many days is treated as broken rather than
# searched for ever.
SEARCH_LIMIT_DAYS = 3 * 366


@dataclass(frozen=True)
class MonitoringCalendar:
    zone: str
    weekdays: frozenset = frozenset(range(5))
    start: time = time(9, 0)
    # The window closes at `end`; midnight (00:00) means the end of the day.
    end: time = time(18, 0)
    holidays: frozenset = field(default_factory=frozenset)

    def __post_init__(self):
        ZoneInfo(self.zone)  # fails early on an unknown zone
        if self.end != time(0, 0) and self.end <= self.start:
            raise ValueError("the monitoring window must end after it starts (00:00 means midnight)")
        if not set(self.weekdays) <= set(range(7)):
            raise ValueError("weekdays are 0 (Monday) to 6 (Sunday)")

    @property
    def tz(self):
        return ZoneInfo(self.zone)

    def to_dict(self):
        return {
            "zone": self.zone,
            "weekdays": sorted(self.weekdays),
            "start": self.start.strftime("%H:%M"),
            "end": self.end.strftime("%H:%M"),
            "holidays": sorted(d.isoformat() for d in self.holidays),
        }

    @classmethod
    def from_dict(cls, data):
        return cls(
            zone=data["zone"],
            weekdays=frozenset(data["weekdays"]),
            start=time.fromisoformat(data["start"]),
            end=time.fromisoformat(data["end"]),
            holidays=frozenset(date.fromisoformat(d) for d in data.get("holidays", [])),
        )

    def window_on(self, day):
        """The open window (UTC start, UTC end) on a local date, or None when closed that day."""
        if day.weekday() not in self.weekdays or day in self.holidays:
            return None
        tz = self.tz
        opens = datetime.combine(day, self.start, tzinfo=tz)
        closes = (
            datetime.combine(day + timedelta(days=1), time(0, 0), tzinfo=tz)
            if self.end == time(0, 0)
            else datetime.combine(day, self.end, tzinfo=tz)
        )
        return opens.astimezone(timezone.utc), closes.astimezone(timezone.utc)

    def windows_from(self, moment):
        """Open windows that end after `moment`, in order, clipped to start no earlier than it."""
        day = moment.astimezone(self.tz).date() - timedelta(days=1)
        for offset in range(SEARCH_LIMIT_DAYS):
            window = self.window_on(day + timedelta(days=offset))
            if window is None or window[1] <= moment:
                continue
            yield max(window[0], moment), window[1]
        raise ValueError(f"the calendar has no open window within {SEARCH_LIMIT_DAYS} days")

    def is_open(self, moment):
        first = next(self.windows_from(moment))
        return first[0] <= moment

    def add(self, moment, duration):
        """The instant at which `duration` of monitoring time has passed since `moment`."""
        remaining = duration
        for opens, closes in self.windows_from(moment):
            if opens + remaining <= closes:
                return opens + remaining
            remaining -= closes - opens
        raise AssertionError("unreachable: windows_from raises when it runs out")

    def elapsed(self, start, end):
        """Monitoring time between two instants (zero when end is not after start)."""
        total = timedelta(0)
        if end <= start:
            return total
        for opens, closes in self.windows_from(start):
            if opens >= end:
                break
            total += min(closes, end) - opens
        return total
