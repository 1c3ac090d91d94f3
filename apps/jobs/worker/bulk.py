"""Updating many rows with different values in one statement.

Django's `bulk_update` builds a CASE expression per field and row, which costs more
Python time than the database spends; on PostgreSQL one `UPDATE ... FROM (VALUES ...)`
does the same work. SQLite keeps `bulk_update`.
"""

from django.db import connection

BATCH = 1000


def bulk_set(model, objects, fields):
    """Write `fields` of each object (by primary key) to the database."""
    objects = list(objects)
    if not objects:
        return
    if connection.vendor != "postgresql":
        model.objects.bulk_update(objects, fields, batch_size=BATCH)
        return
    meta = model._meta
    columns = [meta.get_field(name) for name in fields]
    pk = meta.pk
    assignments = ", ".join(
        f'"{f.column}" = CAST(v."{f.column}" AS {f.db_type(connection)})' for f in columns
    )
    names = ", ".join(f'"{c}"' for c in [pk.column] + [f.column for f in columns])
    with connection.cursor() as cursor:
        for start in range(0, len(objects), BATCH):
            batch = objects[start:start + BATCH]
            row = "(" + ", ".join(["%s"] * (len(columns) + 1)) + ")"
            values = ", ".join([row] * len(batch))
            params = []
            for obj in batch:
                params.append(obj.pk)
                for field in columns:
                    value = field.get_db_prep_save(getattr(obj, field.attname), connection)
                    # Values travel as text so that NULLs and JSON need no per-type placeholder.
                    params.append(None if value is None else _as_text(value))
            cursor.execute(
                f'UPDATE "{meta.db_table}" AS t SET {assignments} '
                f'FROM (VALUES {values}) AS v({names}) WHERE t."{pk.column}" = CAST(v."{pk.column}" AS {pk.db_type(connection)})',
                params,
            )


def _as_text(value):
    adapted = getattr(value, "obj", None)  # psycopg's Jsonb wrapper
    if adapted is not None and type(value).__name__ == "Jsonb":
        import json

        return json.dumps(adapted)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)
