"""Issue 13, item 13: user names are one name whatever their case, at every way in, and the
refusal says the same whoever holds the name — the creator's own team or another.

`Carol` beside `carol` is refused by the API, the admin (new user and rename), onboarding one
by one and by CSV (the OIDC login: tests/identity), and by the database itself; the migration
that adds the database's rule stops on names that already clash."""

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import IntegrityError, connection, transaction
from django.test import Client

from apps.tenants import services as tenant_services
from tests.api.test_users import NEW_PASSWORD

pytestmark = pytest.mark.django_db

User = get_user_model()


def _create(client, username):
    return client.post("/api/v2/users", {"username": username, "password": NEW_PASSWORD,
                                         "email": "x@example.com", "virtualCluster": ["team_a"]}, format="json")


@pytest.mark.parametrize("username", ["A_MEMBER", "B_Member", "a_member", "b_member"])
def test_the_api_refuses_a_name_held_in_any_case_and_any_team_with_the_same_words(world, clients, username):
    # a_admin creates into Team A: a_member is their own member, b_member another team's.
    response = _create(clients["a_admin"], username)
    assert response.status_code == 409
    assert response.json() == {"code": "ConflictUserError", "message": f"User name {username} is taken."}
    assert User.objects.filter(username__iexact=username).count() == 1


def test_another_teams_user_is_as_unknown_to_get_as_a_name_nobody_holds(world, clients):
    hidden, missing = (clients["a_admin"].get(f"/api/v2/users/{name}") for name in ("b_member", "nobody"))
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["message"].replace("b_member", "nobody") == missing.json()["message"]


def _admin(user):
    client = Client()
    client.force_login(user)
    return client


def test_the_admins_new_user_form_refuses_a_name_in_another_case(world):
    response = _admin(world.root).post("/admin/auth/user/add/", {
        "username": "B_MEMBER", "password1": NEW_PASSWORD, "password2": NEW_PASSWORD, "usable_password": "true"})
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["username"] == ["User name B_MEMBER is taken."]
    assert not User.objects.filter(username="B_MEMBER").exists()


def test_the_admin_refuses_to_rename_a_user_onto_a_name_in_another_case(world):
    response = _admin(world.root).post(f"/admin/auth/user/{world.a_member.pk}/change/", {
        "username": "B_member", "email": "", "is_active": "on", "date_joined_0": "2026-01-01",
        "date_joined_1": "10:00:00", "memberships-TOTAL_FORMS": "0", "memberships-INITIAL_FORMS": "0"})
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["username"] == ["User name B_member is taken."]
    world.a_member.refresh_from_db()
    assert world.a_member.username == "a_member"


def test_onboarding_one_user_refuses_a_name_in_another_case(world):
    with pytest.raises(tenant_services.OnboardingError) as refused:
        tenant_services.onboard_user(world.a_admin, world.tenant_a, username="B_Member", email="b@example.com")
    assert refused.value.errors == ["username: 'B_Member' is taken"]


def test_a_csv_refuses_names_held_in_another_case_or_repeated_in_another_case(world):
    upload = SimpleUploadedFile("people.csv", b"username,email\nB_MEMBER,b@example.com\ncarol,c@example.com\n"
                                              b"CAROL,c2@example.com\n")
    response = _admin(world.a_admin).post(f"/admin/tenants/tenant/{world.tenant_a.pk}/bulk-onboard/",
                                          {"csv_file": upload})
    assert response.status_code == 200
    assert response.context["problems"] == [
        "line 2: username: 'B_MEMBER' is taken", "line 4: username: 'CAROL' repeats line 3"]
    assert not User.objects.filter(username__iexact="carol").exists()


def test_the_database_refuses_a_name_in_another_case_whoever_writes_it(world):
    with pytest.raises(IntegrityError), transaction.atomic():
        User.objects.create(username="A_Member")
    with pytest.raises(IntegrityError), transaction.atomic():
        User.objects.filter(pk=world.b_member.pk).update(username="A_MEMBER")


def test_the_migration_stops_on_names_that_already_clash(world):
    from importlib import import_module

    from django.apps import apps

    migration = import_module("apps.accounts.migrations.0005_username_case_insensitive")
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f"DROP INDEX {connection.ops.quote_name(migration.INDEX)}")
        User.objects.create(username="Carol")
        User.objects.create(username="CAROL")
        User.objects.create(username="carol")
        with pytest.raises(RuntimeError) as stopped:
            migration.refuse_case_twins(apps, None)
        transaction.set_rollback(True)
    assert str(stopped.value).endswith("before migrating (user names become unique whatever their case): "
                                       "CAROL / Carol / carol")
    # The index is back with the rollback.
    with pytest.raises(IntegrityError), transaction.atomic():
        User.objects.create(username="A_MEMBER")
