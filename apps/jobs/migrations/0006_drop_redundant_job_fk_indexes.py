"""Drop the single-column indexes of Job's owner, tenant and VC foreign keys.

The composite indexes (owner/submitted, tenant/submitted, VC/state) and the unique
owner/name constraint lead with those columns, so the single-column ones only slowed
inserts. Only the indexes go: Django's AlterField would also drop and re-add the foreign
key constraints, which re-checks every row of a large jobs table under a lock.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

INDEXES = {
    "jobs_job_owner_id_4c884775": "owner_id",
    "jobs_job_tenant_id_47fdbf2d": "tenant_id",
    "jobs_job_virtual_cluster_id_9800dc9e": "virtual_cluster_id",
}


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0005_encrypt_job_secrets'),
        ('tenants', '0001_initial'),
        ('virtualclusters', '0002_virtualcluster_shares'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{name}"',
                    reverse_sql=f'CREATE INDEX IF NOT EXISTS "{name}" ON "jobs_job" ("{column}")',
                )
                for name, column in INDEXES.items()
            ],
            state_operations=[
                migrations.AlterField(
                    model_name='job',
                    name='owner',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='jobs', to=settings.AUTH_USER_MODEL),
                ),
                migrations.AlterField(
                    model_name='job',
                    name='tenant',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='jobs', to='tenants.tenant'),
                ),
                migrations.AlterField(
                    model_name='job',
                    name='virtual_cluster',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='jobs', to='virtualclusters.virtualcluster'),
                ),
            ],
        ),
    ]
