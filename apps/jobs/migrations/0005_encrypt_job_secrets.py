"""Job secrets and registry credentials encrypted at rest.

The plain JSON columns are copied into encrypted ones, then dropped, and the encrypted
columns take their names: no plain value survives the migration.
"""

from django.db import migrations

import pai.security


def encrypt(apps, schema_editor):
    JobSecret = apps.get_model("jobs", "JobSecret")
    for row in JobSecret.objects.only("pk", "values", "image_auth").iterator(chunk_size=500):
        JobSecret.objects.filter(pk=row.pk).update(values_encrypted=row.values, image_auth_encrypted=row.image_auth)


def decrypt(apps, schema_editor):
    JobSecret = apps.get_model("jobs", "JobSecret")
    for row in JobSecret.objects.iterator(chunk_size=500):
        JobSecret.objects.filter(pk=row.pk).update(values=row.values_encrypted, image_auth=row.image_auth_encrypted)


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0004_job_shares"),
    ]

    operations = [
        migrations.AddField(
            model_name="jobsecret",
            name="values_encrypted",
            field=pai.security.EncryptedJSONField(default=dict),
        ),
        migrations.AddField(
            model_name="jobsecret",
            name="image_auth_encrypted",
            field=pai.security.EncryptedJSONField(default=dict),
        ),
        migrations.RunPython(encrypt, decrypt),
        migrations.RemoveField(model_name="jobsecret", name="values"),
        migrations.RemoveField(model_name="jobsecret", name="image_auth"),
        migrations.RenameField(model_name="jobsecret", old_name="values_encrypted", new_name="values"),
        migrations.RenameField(model_name="jobsecret", old_name="image_auth_encrypted", new_name="image_auth"),
    ]
