from django.core.exceptions import PermissionDenied

from apps.accounts import lockout
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


class LoginLockoutBackend:
    """Refuses every password login for a locked-out user name or client address.

    Raising PermissionDenied stops `authenticate()` before the other backends check the
    password, so a locked-out attacker learns nothing, even with the right password.
    """

    def authenticate(self, request, username=None, password=None, **credentials):
        seconds = lockout.retry_after(username, request) if username is not None else 0
        if seconds:
            raise PermissionDenied(lockout.message(seconds))
        return None
