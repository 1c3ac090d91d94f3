from apps.accounts.roles import is_platform_admin


class PlatformAdminBackend:
    """Members of `admingroup` hold every permission, as superusers do.

    pai's own admin pages decide access by role; this backend lets the pages of
    third-party apps (django-q's task lists, guardian's object permissions) agree.
    """

    def authenticate(self, request, **credentials):
        return None

    def has_perm(self, user_obj, perm, obj=None):
        return is_platform_admin(user_obj)

    def has_module_perms(self, user_obj, app_label):
        return is_platform_admin(user_obj)
