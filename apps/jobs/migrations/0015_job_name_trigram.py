"""A trigram index on job names (PostgreSQL only), for the keyword search of the job list
(API and portal): `name ILIKE '%word%'` reads the index instead of every job."""

from django.db import migrations


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    # pg_trgm is a trusted extension (PostgreSQL 13+): the database's owner may create it.
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    # The expression Django's icontains compares: UPPER("name"::text) LIKE UPPER(%s).
    schema_editor.execute(
        'CREATE INDEX IF NOT EXISTS job_name_trgm ON jobs_job USING gin ((UPPER("name"::text)) gin_trgm_ops)'
    )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS job_name_trgm")


class Migration(migrations.Migration):
    dependencies = [("jobs", "0014_job_stop_code")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
