"""Bugs the fuzzers found, kept as plain examples so that they stay fixed on both databases."""

import pytest

from apps.oncall.models import Rotation, RotationMember


@pytest.mark.parametrize("route, body", [
    ("swap", {"first_user": "a_member\x00", "second_user": "a_admin", "first_shift_start": "2027-01-04T10:00:00Z",
              "second_shift_start": "2027-01-11T10:00:00Z"}),
    ("overrides", {"user": "a\x00", "start": "2027-01-04T10:00:00Z", "end": "2027-01-05T10:00:00Z"}),
])
def test_a_name_with_a_nul_character_is_a_400_not_a_500(world, clients, route, body):
    rotation = Rotation.objects.create(name="team-a-rota", tenant=world.tenant_a)
    RotationMember.objects.create(rotation=rotation, user=world.a_member, position=0)
    response = clients["a_admin"].post(f"/api/v2/rotations/{rotation.pk}/{route}/", body, format="json")
    assert response.status_code == 400, response.content
    assert "Null characters are not allowed." in response.content.decode()
