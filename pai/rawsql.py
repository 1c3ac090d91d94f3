"""Model instances from hand-written SQL, for the few hot paths where the ORM's cost of
building and planning a query outweighs running it (bearer-token authentication, the
VC lookup of a job submit). Everything else goes through the ORM.
"""

from django.db import connections


def columns(model, attnames, alias):
    """`alias."column", ...` for the model's fields named by attribute."""
    return ", ".join(f'{alias}."{model._meta.get_field(name).column}"' for name in attnames)


def concrete_attnames(model):
    return [field.attname for field in model._meta.concrete_fields]


def instance(model, db, attnames, values):
    """A model instance from raw column values, converted as the ORM would (SQLite hands
    back datetimes as text and booleans as integers)."""
    connection = connections[db]
    converted = []
    for name, value in zip(attnames, values):
        field = model._meta.get_field(name)
        col = field.get_col(model._meta.db_table)
        for converter in connection.ops.get_db_converters(col) + col.get_db_converters(connection):
            value = converter(value, col, connection)
        converted.append(value)
    return model.from_db(db, attnames, converted)


def db_datetime(db, value):
    """A datetime as the database stores it, for a parameter of hand-written SQL."""
    return connections[db].ops.adapt_datetimefield_value(value)
