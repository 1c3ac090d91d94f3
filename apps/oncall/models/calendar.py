import functools
from datetime import time
from zoneinfo import available_timezones

from django.core.exceptions import ValidationError
from django.db import models

from .. import clock


@functools.cache
def _zones():
    return frozenset(available_timezones())


def validate_zone(value):
    if value not in _zones():
        raise ValidationError(f"'{value}' is not an IANA time zone (e.g. Europe/Berlin).")


def validate_weekdays(value):
    if not isinstance(value, list) or not all(isinstance(d, int) and 0 <= d <= 6 for d in value):
        raise ValidationError("Weekdays are a list of numbers 0 (Monday) to 6 (Sunday).")


class MonitoringCalendar(models.Model):
    """When SLA clocks run: weekdays, a daily window, holidays, in one time zone."""

    name = models.CharField(max_length=100, unique=True)
    timezone = models.CharField(max_length=64, default="UTC", validators=[validate_zone])
    weekdays = models.JSONField(
        default=list, validators=[validate_weekdays], help_text="0 = Monday … 6 = Sunday."
    )
    start_time = models.TimeField(default=time(9, 0))
    end_time = models.TimeField(default=time(18, 0), help_text="00:00 means midnight at the end of the day.")

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def clean(self):
        if self.end_time != time(0, 0) and self.end_time <= self.start_time:
            raise ValidationError({"end_time": "The window must end after it starts (00:00 means midnight)."})

    def as_clock(self):
        return clock.MonitoringCalendar(
            zone=self.timezone,
            weekdays=frozenset(self.weekdays),
            start=self.start_time,
            end=self.end_time,
            holidays=frozenset(self.holidays.values_list("date", flat=True)) if self.pk else frozenset(),
        )


class Holiday(models.Model):
    calendar = models.ForeignKey(MonitoringCalendar, on_delete=models.CASCADE, related_name="holidays")
    date = models.DateField()
    name = models.CharField(max_length=100, blank=True)

    class Meta:
        ordering = ["date"]
        constraints = [models.UniqueConstraint(fields=["calendar", "date"], name="unique_holiday_date")]

    def __str__(self):
        return f"{self.date} {self.name}".strip()
