"""Exits classified by the old catch-all row 255 take OpenPAI's fallback rows: 256 for a
positive code, -8000 for a negative one (255 stays for a real 255 or no code at all)."""

from django.db import migrations
from django.db.models import Q


def to_openpai_fallbacks(apps, schema_editor):
    for name in ("JobAttempt", "TaskAttempt"):
        model = apps.get_model("jobs", name)
        old = model.objects.filter(exit_spec_code=255).exclude(Q(exit_code=255) | Q(exit_code__isnull=True))
        old.filter(exit_code__gt=0).update(exit_spec_code=256)
        old.filter(exit_code__lt=0).update(exit_spec_code=-8000)


def back_to_the_catch_all(apps, schema_editor):
    for name in ("JobAttempt", "TaskAttempt"):
        apps.get_model("jobs", name).objects.filter(exit_spec_code__in=[256, -8000]).update(exit_spec_code=255)


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0008_job_queue_index"),
    ]

    operations = [
        migrations.RunPython(to_openpai_fallbacks, back_to_the_catch_all),
    ]
