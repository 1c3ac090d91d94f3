from apps.accounts.roles import DEFAULT_GROUP, is_platform_admin, is_tenant_admin


def test_world_users_have_their_roles(world):
    assert is_platform_admin(world.root)
    assert not is_platform_admin(world.a_admin)
    assert is_tenant_admin(world.a_admin, world.tenant_a)
    assert not is_tenant_admin(world.a_admin, world.tenant_b)
    assert not is_tenant_admin(world.a_member)


def test_every_user_is_in_the_default_group(world):
    for user in world.users().values():
        assert user.groups.filter(name=DEFAULT_GROUP).exists()
