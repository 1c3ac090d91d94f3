"""A unique index on the lower-cased user name: `Carol` cannot stand beside `carol`.

Before the index is built, the migration looks for names that already differ only in case
and stops, naming them, so that an operator renames or merges those accounts first (the
index would otherwise fail with the database's own words, or not at all on one of them).
"""

from django.conf import settings
from django.db import migrations

INDEX = "pai_user_username_lower_uniq"


def refuse_case_twins(apps, schema_editor):
    from django.db.models import Count
    from django.db.models.functions import Lower

    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    twins = (
        User.objects.annotate(lowered=Lower("username")).values("lowered").annotate(n=Count("pk")).filter(n__gt=1)
    )
    clashes = []
    for row in twins.order_by("lowered"):
        names = sorted(User.objects.annotate(lowered=Lower("username")).filter(lowered=row["lowered"])
                       .values_list("username", flat=True))
        clashes.append(" / ".join(names))
    if clashes:
        raise RuntimeError(
            "These user names differ only in case; rename or merge all but one of each before migrating "
            "(user names become unique whatever their case): " + "; ".join(clashes)
        )


def create_index(apps, schema_editor):
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    quote = schema_editor.quote_name
    table, column = User._meta.db_table, User._meta.get_field("username").column
    schema_editor.execute(f"CREATE UNIQUE INDEX {quote(INDEX)} ON {quote(table)} (LOWER({quote(column)}))")


def drop_index(apps, schema_editor):
    schema_editor.execute(f"DROP INDEX {schema_editor.quote_name(INDEX)}")


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0004_login_throttles"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(refuse_case_twins, migrations.RunPython.noop),
        migrations.RunPython(create_index, drop_index),
    ]
