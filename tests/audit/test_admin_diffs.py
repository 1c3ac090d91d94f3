"""Audit (issue 15): admin changes store each field's before and after value, inline rows (a VC's
cells and grants, a storage's grants) are audited on their own, and the log shows a diff."""

from django.urls import reverse

from apps.audit.models import AuditEntry
from apps.virtualclusters.models import VirtualClusterCell


def _inline(prefix, rows, extra=()):
    data = {f"{prefix}-TOTAL_FORMS": str(len(rows) + len(extra)), f"{prefix}-INITIAL_FORMS": str(len(rows)),
            f"{prefix}-MIN_NUM_FORMS": "0", f"{prefix}-MAX_NUM_FORMS": "1000"}
    for i, row in enumerate(list(rows) + list(extra)):
        data.update({f"{prefix}-{i}-{k}": v for k, v in row.items()})
    return data


def test_a_quota_change_and_a_grant_are_audited_with_before_and_after(world, client):
    client.force_login(world.root)
    vc = world.vc_b
    url = reverse("admin:virtualclusters_virtualcluster_change", args=[vc.pk])
    form = client.get(url).context["adminform"].form
    data = {name: form[name].value() for name in form.fields if form[name].value() is not None}
    data["description"] = "Team B's slice"
    cells = [
        {"id": c.pk, "virtual_cluster": vc.pk, "cell_type": c.cell_type_id, "count": str(c.count)}
        for c in VirtualClusterCell.objects.filter(virtual_cluster=vc).order_by("id")
    ]
    switch = next(c for c in cells if c["cell_type"] == world.switch.pk)
    switch["count"] = "2"
    data.update(_inline("cells", cells))
    data.update(_inline("grants", [{"id": g.pk, "virtual_cluster": vc.pk, "group": g.group_id} for g in vc.grants.all()],
                        extra=[{"virtual_cluster": vc.pk, "group": world.group_a.pk}]))
    response = client.post(url, data)
    assert response.status_code == 302, response.context and response.context["adminform"].form.errors

    change = AuditEntry.objects.get(action="admin.change.virtualcluster", object_id=str(vc.pk))
    assert change.changes["fields"] == {"description": ["", "Team B's slice"]}
    cell = AuditEntry.objects.get(action="admin.change.virtualclustercell")
    assert cell.changes["fields"] == {"count": [4, 2]} and cell.tenant == world.tenant_b
    grant = AuditEntry.objects.get(action="admin.add.virtualclustergrant")
    assert grant.changes["fields"]["group"] == [None, "team_a"]

    page = client.get(reverse("admin:audit_auditentry_change", args=[cell.pk]))
    html = page.content.decode()
    assert '<del class="before">4</del>' in html and '<ins class="after">2</ins>' in html


def test_a_storages_inline_grants_are_audited_each_with_before_and_after(world, client):
    from apps.accounts.models import Group
    from apps.storage.models import StorageGrant

    readers = Group.objects.create(name="team_a_readers", tenant=world.tenant_a)
    storage = world.storage_a
    client.force_login(world.a_admin)  # a team admin, on her own team's storage
    url = reverse("admin:storage_storageconfig_change", args=[storage.pk])
    form = client.get(url).context["adminform"].form
    data = {name: form[name].value() for name in form.fields if form[name].value() is not None}
    [grant] = StorageGrant.objects.filter(storage=storage)
    data.update(_inline("grants", [{"id": grant.pk, "storage": storage.pk, "group": grant.group_id}],
                        extra=[{"storage": storage.pk, "group": readers.pk, "is_default": "on"}]))
    response = client.post(url, data)  # the team group's grant loses is_default (unticked); readers added
    assert response.status_code == 302, response.context and response.context["adminform"].form.errors

    changed = AuditEntry.objects.get(action="admin.change.storagegrant", object_id=str(grant.pk))
    assert changed.changes["fields"] == {"is_default": [True, False]}
    assert changed.changes["parent"] == "team-a-data" and changed.tenant == world.tenant_a
    assert changed.actor_name == "a_admin"
    added = AuditEntry.objects.get(action="admin.add.storagegrant")
    assert added.changes["fields"]["group"] == [None, "team_a_readers"]
    assert added.changes["fields"]["is_default"] == [None, True]

    data = {k: v for k, v in data.items() if not k.startswith("grants-")}
    new = StorageGrant.objects.get(storage=storage, group=readers)
    data.update(_inline("grants", [
        {"id": grant.pk, "storage": storage.pk, "group": grant.group_id},
        {"id": new.pk, "storage": storage.pk, "group": readers.pk, "is_default": "on", "DELETE": "on"},
    ]))
    assert client.post(url, data).status_code == 302
    deleted = AuditEntry.objects.get(action="admin.delete.storagegrant")
    assert deleted.object_id == str(new.pk) and deleted.changes["fields"]["group"] == ["team_a_readers", None]
