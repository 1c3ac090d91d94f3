"""Issue 13, item 11, beyond the API's parsers: JSON typed into an admin form (a cluster's
labels, a storage server's options, a calendar's weekdays...) nested thousands deep is a field
error, not a RecursionError and a 500."""

import pytest
from django import forms
from django.contrib import admin
from django.test import Client, RequestFactory

pytestmark = pytest.mark.django_db

DEEP = '{"a": ' * 20_000 + "1" + "}" * 20_000


def _json_form_fields(root):
    request = RequestFactory().get("/admin/")
    request.user = root
    for model, model_admin in admin.site._registry.items():
        if not model.__module__.startswith("apps."):
            continue  # django-q2's task pages
        if not model_admin.has_add_permission(request) and not model_admin.has_change_permission(request):
            continue
        form = model_admin.get_form(request)
        for name, field in form.base_fields.items():
            if isinstance(field, forms.JSONField):
                yield model._meta.label_lower, name, field


def test_every_json_field_of_the_admin_refuses_deep_nesting_as_a_field_error(world):
    found = list(_json_form_fields(world.root))
    assert {(label, name) for label, name, _ in found} >= {("clusters.node", "labels"),
                                                           ("storage.storageserver", "options")}
    for label, name, field in found:
        with pytest.raises(forms.ValidationError) as refused:
            field.clean(DEEP)
        assert refused.value.messages == ["The value is nested more than 64 levels deep."], (label, name)
        assert field.clean('{"ok": [1, 2]}') == {"ok": [1, 2]}


def test_a_storage_server_added_with_deeply_nested_options_gets_the_form_back(world):
    from apps.storage.models import StorageServer

    client = Client()
    client.force_login(world.root)
    response = client.post("/admin/storage/storageserver/add/", {
        "tenant": world.tenant_a.pk, "name": "nested", "kind": "nfs", "address": "10.0.0.1", "root_path": "/x",
        "options": DEEP})

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["options"] == ["The value is nested more than 64 levels deep."]
    assert not StorageServer.objects.filter(name="nested").exists()
