"""A registry password shown in a job's config is only ever a reference to a secret: any
literal beside the reference is part of the password and is masked."""

import pytest

from tests.jobs.conftest import job_document, submit

pytestmark = pytest.mark.django_db


def _config_of(client, password):
    document = job_document("private_image_secrets.yaml", name="masked")
    document["prerequisites"][0]["auth"]["password"] = password
    assert submit(client, document).status_code == 202
    response = client.get("/api/v2/jobs/a_member~masked/config", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.parametrize("password", [
    "<% $secrets.registry_password %>LIT-Pa55<% $secrets.registry_password %>",
    "LIT-Pa55<% $secrets.registry_password %>",
    "<% $secrets.registry_password %> LIT-Pa55 <% $secrets.registry_password %>",
    "<% $parameters.LIT-Pa55 %>",  # not a secret: the image auth uses it as written
])
def test_a_literal_beside_a_secret_reference_is_masked_in_the_config(world, clients, password):
    config = _config_of(clients["a_member"], password)
    assert "LIT-Pa55" not in config
    assert "******" in config


def test_a_password_that_is_only_a_secret_reference_is_shown_as_the_reference(world, clients):
    config = _config_of(clients["a_member"], "<% $secrets.registry_password %>")
    assert "<% $secrets.registry_password %>" in config
    assert "s3cr3t-Pa55w0rd" not in config
