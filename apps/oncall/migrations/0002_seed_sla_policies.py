"""Seed the SLA table of the spec; admins edit the rows afterwards."""

from datetime import time, timedelta

from django.db import migrations

SEED = [
    ("Severity 0–1, production", [0, 1], "production", timedelta(minutes=30), timedelta(hours=2), 10),
    ("Severity 2, production", [2], "production", timedelta(hours=2), timedelta(hours=24), 20),
    ("Severity 3, all clusters", [3], "", timedelta(hours=4), timedelta(hours=24), 30),
]


def seed(apps, schema_editor):
    Calendar = apps.get_model("oncall", "MonitoringCalendar")
    Policy = apps.get_model("oncall", "SlaPolicy")
    calendar, _ = Calendar.objects.get_or_create(
        name="Working hours",
        defaults={"timezone": "UTC", "weekdays": [0, 1, 2, 3, 4], "start_time": time(9), "end_time": time(18)},
    )
    for name, severities, cluster_class, ack, update, position in SEED:
        Policy.objects.get_or_create(
            name=name,
            defaults={
                "severities": severities,
                "cluster_class": cluster_class,
                "ack_within": ack,
                "update_every": update,
                "calendar": calendar,
                "position": position,
            },
        )


def unseed(apps, schema_editor):
    apps.get_model("oncall", "SlaPolicy").objects.filter(name__in=[row[0] for row in SEED]).delete()
    apps.get_model("oncall", "MonitoringCalendar").objects.filter(name="Working hours", policies__isnull=True).delete()


class Migration(migrations.Migration):
    dependencies = [("oncall", "0001_initial")]

    operations = [migrations.RunPython(seed, unseed)]
