"""Rotation arithmetic: which members are on call in which shift, with overrides.

Pure Python (no Django), so the calendar rules are testable on their own. Shifts hand
off at a wall-clock time in the rotation's IANA zone: across a DST change a one-week
shift is 167 or 169 hours long, and the handoff stays at, say, Monday 10:00 local.
"""

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo


@dataclass(frozen=True)
class Override:
    """`member` covers for `replaces` from `starts_at` (inclusive) to `ends_at` (exclusive)."""

    starts_at: datetime
    ends_at: datetime
    replaces: object
    member: object

    def active_at(self, moment):
        return self.starts_at <= moment < self.ends_at


@dataclass(frozen=True)
class Shift:
    index: int
    starts_at: datetime
    ends_at: datetime
    scheduled: tuple

    def overlaps(self, start, end):
        return self.starts_at < end and start < self.ends_at


def first_handoff_day(start_date, handoff_weekday):
    """The first date on or after `start_date` that falls on the handoff weekday."""
    return start_date + timedelta(days=(handoff_weekday - start_date.weekday()) % 7)


@dataclass(frozen=True)
class RotationPlan:
    zone: str
    first_day: date
    handoff: time
    shift_days: int
    members: tuple
    dris_per_shift: int = 1

    def __post_init__(self):
        if self.shift_days < 1:
            raise ValueError("a shift lasts at least one day")
        if self.dris_per_shift not in (1, 2):
            raise ValueError("a shift has one or two DRIs")

    def shift_start(self, index):
        day = self.first_day + timedelta(days=index * self.shift_days)
        return datetime.combine(day, self.handoff, tzinfo=ZoneInfo(self.zone)).astimezone(timezone.utc)

    def shift_index_at(self, moment):
        """The index of the shift running at `moment`, or None before the first handoff."""
        first = self.shift_start(0)
        if moment < first:
            return None
        index = (moment - first) // timedelta(days=self.shift_days)
        # The estimate above ignores DST; the wall-clock handoffs settle it.
        while self.shift_start(index) > moment:
            index -= 1
        while self.shift_start(index + 1) <= moment:
            index += 1
        return index

    def scheduled(self, index):
        """Members scheduled for shift `index`: the next `dris_per_shift` in order, wrapping."""
        if not self.members:
            return ()
        count = min(self.dris_per_shift, len(self.members))
        return tuple(self.members[(index * count + j) % len(self.members)] for j in range(count))

    def shift(self, index):
        return Shift(index, self.shift_start(index), self.shift_start(index + 1), self.scheduled(index))

    def shifts_from(self, moment, count):
        """The shift running at `moment` (or the first one, if not started) and the next ones."""
        index = self.shift_index_at(moment)
        index = 0 if index is None else index
        return [self.shift(index + i) for i in range(count)]

    def on_call_at(self, moment, overrides=()):
        """Who is on call at `moment`: the shift's scheduled members with overrides applied."""
        index = self.shift_index_at(moment)
        if index is None:
            return ()
        dris = list(self.scheduled(index))
        for override in sorted(overrides, key=lambda o: o.starts_at):
            if not override.active_at(moment) or override.replaces not in dris:
                continue
            position = dris.index(override.replaces)
            if override.member in dris:
                dris.pop(position)
            else:
                dris[position] = override.member
        return tuple(dris)

    def fair_share(self, start, end, overrides=()):
        """Per member: scheduled shifts starting in [start, end) and hours actually on call.

        Hours count overrides: a swap moves time from one member to another, and the
        totals show whether the load stayed even.
        """
        shares = {member: {"shifts": 0, "hours": 0.0} for member in self.members}
        for override in overrides:
            shares.setdefault(override.member, {"shifts": 0, "hours": 0.0})
        if end <= start:
            return shares
        index = self.shift_index_at(start)
        index = 0 if index is None else index
        while True:
            shift = self.shift(index)
            if shift.starts_at >= end:
                break
            if start <= shift.starts_at:
                for member in shift.scheduled:
                    shares[member]["shifts"] += 1
            lo, hi = max(shift.starts_at, start), min(shift.ends_at, end)
            if lo < hi:
                cuts = {lo, hi}
                for override in overrides:
                    cuts.update(t for t in (override.starts_at, override.ends_at) if lo < t < hi)
                cuts = sorted(cuts)
                for seg_start, seg_end in zip(cuts, cuts[1:]):
                    for member in self.on_call_at(seg_start, overrides):
                        shares[member]["hours"] += (seg_end - seg_start).total_seconds() / 3600
            index += 1
        return shares
