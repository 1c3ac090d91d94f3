"""Home: a signed-in user's jobs, VCs with their cells by type, and the open incidents of
severity 0–1 on the clusters they use; anonymous visitors get the front page."""

import pytest
from django.test import Client

from apps.oncall import services as oncall_services
from tests.jobs.factories import running_attempt, submitted_job


def page(user, path="/"):
    client = Client()
    if user is not None:
        client.force_login(user)
    return client.get(path)


@pytest.mark.django_db
def test_anonymous_visitors_get_the_front_page(world):
    response = page(None)
    assert response.status_code == 200
    body = response.content.decode()
    assert "compatible with OpenPAI" in body
    assert 'href="/jobs/"' not in body


def test_home_lists_my_jobs_by_state_and_not_others(world):
    waiting = submitted_job(world.a_member, name="queued_one", vc="team_a")
    running = submitted_job(world.a_member, name="busy_one", vc="team_a")
    running_attempt(running)
    submitted_job(world.a_admin, name="admins_job", vc="team_a")
    submitted_job(world.b_member, name="other_team_job", vc="team_b")
    body = page(world.a_member).content.decode()
    running_section = body.split('id="running"')[1].split("</section>")[0]
    waiting_section = body.split('id="waiting"')[1].split("</section>")[0]
    assert "busy_one" in running_section and "queued_one" not in running_section
    assert "queued_one" in waiting_section and "Not scheduled yet." in waiting_section
    assert f'href="/jobs/a_member~{waiting.name}/"' in body
    assert "admins_job" not in body and "other_team_job" not in body


def test_home_shows_my_vcs_cells_as_the_scheduler_counts_them(world):
    body = page(world.a_member).content.decode()
    vcs = body.split('id="vcs"')[1]
    assert 'data-vc="team_a"' in vcs and 'data-vc="team_b"' not in vcs
    # team_a is guaranteed 2 A100 nodes and 1 CPU node, nothing used yet.
    row = vcs.split('data-cell-type="A100-NODE"')[1].split("</tr>")[0]
    assert '<td class="guaranteed">2</td>' in row and '<td class="used">0</td>' in row
    assert '<td class="free">2</td>' in row


def test_home_banner_shows_open_severe_incidents_of_my_clusters_only(world):
    from tests import factories as f

    oncall_services.report_incident(world.root, title="Cluster local down", severity=0, cluster=world.cluster)
    oncall_services.report_incident(world.root, title="Slow image pulls", severity=3, cluster=world.cluster)
    oncall_services.report_incident(world.root, title="Elsewhere down", severity=0,
                                    cluster=f.ClusterFactory(name="elsewhere"))
    body = page(world.a_member).content.decode()
    assert 'id="incidents"' in body
    banner = body.split('id="incidents"')[1].split("</section>")[0]
    assert "Cluster local down" in banner
    assert "Slow image pulls" not in banner and "Elsewhere down" not in body


def test_navigation_per_role(world):
    member = page(world.a_member).content.decode()
    assert 'href="/jobs/"' in member and 'href="/admin/"' not in member
    assert 'href="/admin/"' in page(world.root).content.decode()
