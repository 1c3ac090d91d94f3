"""Writing many rows in one statement.

Django's `bulk_update` builds a CASE expression per field and row, and `bulk_create` a
placeholder per field and row; with psycopg's client-side binding every placeholder is
then found and quoted in Python, which costs more than the database spends. On
PostgreSQL these helpers send one array per column instead (`unnest`), so a batch of a
thousand rows costs a handful of parameters. SQLite keeps Django's own methods.
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
    assignments = ", ".join(f'"{f.column}" = {_cast(f, "v")}' for f in columns)
    names = ", ".join(f'"{c}"' for c in [pk.column] + [f.column for f in columns])
    arrays = ", ".join(["%s::text[]"] * (len(columns) + 1))
    sql = (
        f'UPDATE "{meta.db_table}" AS t SET {assignments} FROM unnest({arrays}) AS v({names}) '
        f'WHERE t."{pk.column}" = {_cast(pk, "v")}'
    )
    with connection.cursor() as cursor:
        for start in range(0, len(objects), BATCH):
            batch = objects[start:start + BATCH]
            params = [[_as_text(pk.get_db_prep_save(obj.pk, connection)) for obj in batch]]
            for field in columns:
                attname = field.attname
                params.append([_as_text(field.get_db_prep_save(getattr(obj, attname), connection)) for obj in batch])
            cursor.execute(sql, params)


def bulk_insert(model, objects, ignore_conflicts=False):
    """Insert the objects (new rows whose primary keys the database assigns, or set ones),
    without reading anything back: their `pk` stays as it was. With `ignore_conflicts`,
    rows that would break a unique constraint are left out."""
    objects = list(objects)
    if not objects:
        return
    if connection.vendor != "postgresql":
        model.objects.bulk_create(objects, batch_size=BATCH, ignore_conflicts=ignore_conflicts)
        return
    meta = model._meta
    given = [obj.pk is not None for obj in objects]
    if any(given) and not all(given):
        raise ValueError("bulk_insert: either every object or none has its primary key")
    columns = [f for f in meta.concrete_fields if all(given) or not (f.primary_key and getattr(f, "db_returning", False))]
    names = ", ".join(f'"{f.column}"' for f in columns)
    arrays = ", ".join(["%s::text[]"] * len(columns))
    casts = ", ".join(_cast(f, "v") for f in columns)
    sql = f'INSERT INTO "{meta.db_table}" ({names}) SELECT {casts} FROM unnest({arrays}) AS v({names})'
    if ignore_conflicts:
        sql += " ON CONFLICT DO NOTHING"
    with connection.cursor() as cursor:
        for start in range(0, len(objects), BATCH):
            batch = objects[start:start + BATCH]
            params = []
            for field in columns:
                params.append([_as_text(field.get_db_prep_save(field.pre_save(obj, True), connection)) for obj in batch])
            cursor.execute(sql, params)


def _cast(field, alias):
    db_type = field.db_type(connection)
    if db_type == "text" or db_type.startswith("varchar("):
        # Text is assigned as it is: an explicit cast to varchar(n) would cut a longer
        # value silently, where the assignment refuses it as an insert would.
        return f'{alias}."{field.column}"'
    return f'CAST({alias}."{field.column}" AS {db_type})'


def _as_text(value):
    """A value as the text PostgreSQL casts back to its column's type (None stays NULL)."""
    if value is None or type(value) is str:
        return value
    adapted = getattr(value, "obj", None)  # psycopg's Jsonb wrapper
    if adapted is not None and type(value).__name__ == "Jsonb":
        import json

        return json.dumps(adapted)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)
