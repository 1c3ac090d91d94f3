"""A team admin's admin pages name nothing of another team: not in the rows, not in the filter
sidebars (tenant, group, user, VC, storage choices), not in a change form's choices."""

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import reverse

from tests.jobs.factories import submitted_job

pytestmark = pytest.mark.django_db

# Team A's names: its tenant, slug, group, VC, storage, members and a job.
TEAM_A_NAMES = ("Team A", "team-a", "team_a", "a_member", "a_admin", "a_secret_job")


@pytest.fixture
def b_admin_client(world):
    submitted_job(world.a_member, name="a_secret_job", vc="team_a")
    client = Client()
    client.force_login(world.b_admin)
    return client


def _changelists():
    for model in admin.site._registry:
        yield model._meta.label_lower, reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")


@pytest.mark.parametrize("label, url", sorted(_changelists()))
def test_a_team_admins_changelist_names_no_other_team(b_admin_client, label, url):
    response = b_admin_client.get(url)
    if response.status_code == 403:
        return
    assert response.status_code == 200
    page = response.content.decode()
    leaked = [name for name in TEAM_A_NAMES if name in page]
    assert not leaked, f"{label}: {leaked}"


@pytest.mark.parametrize("label, url", sorted(_changelists()))
def test_a_team_admins_add_page_offers_no_other_teams_choices(b_admin_client, label, url):
    response = b_admin_client.get(url + "add/")
    if response.status_code == 403:
        return
    assert response.status_code == 200
    page = response.content.decode()
    assert not [name for name in TEAM_A_NAMES if name in page], label


@pytest.mark.parametrize("url, everyone", [
    ("/admin/accounts/group/", ["Team A", "Team B"]),
    ("/admin/auth/user/", ["Team A", "Team B"]),
    ("/admin/virtualclusters/virtualclustergrant/", ["team_a", "team_b"]),
])
def test_a_platform_admins_filters_still_offer_every_team(world, url, everyone):
    root = Client()
    root.force_login(world.root)
    sidebar = root.get(url).content.decode().split('id="changelist-filter"', 1)[1]
    assert all(name in sidebar for name in everyone), sidebar
