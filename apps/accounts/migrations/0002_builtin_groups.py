from django.db import migrations

BUILTIN = {
    "default": "Every user. Its grants apply to everyone.",
    "admingroup": "Platform administrators.",
}


def create_builtin_groups(apps, schema_editor):
    Group = apps.get_model("accounts", "Group")
    AuthGroup = apps.get_model("auth", "Group")
    for name, description in BUILTIN.items():
        base = AuthGroup.objects.filter(name=name).first()
        if base is None:
            Group.objects.create(name=name, description=description, is_builtin=True)
        elif not Group.objects.filter(group_ptr_id=base.pk).exists():
            # Promote an existing Django group of that name rather than duplicate it.
            Group.objects.create(group_ptr_id=base.pk, name=name, description=description, is_builtin=True)


class Migration(migrations.Migration):
    dependencies = [("accounts", "0001_initial")]

    operations = [migrations.RunPython(create_builtin_groups, migrations.RunPython.noop)]
