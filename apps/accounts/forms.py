from django.contrib.auth.forms import AdminUserCreationForm, AuthenticationForm, UserChangeForm
from django.core.exceptions import ValidationError

from . import lockout, usernames


class SignInForm(AuthenticationForm):
    """Django's sign-in form for every active account (not only staff), behind the lockout."""

    retry_after = 0

    def clean(self):
        username = self.cleaned_data.get("username")
        if username:
            self.retry_after = lockout.retry_after(username, self.request)
            if self.retry_after:
                raise ValidationError(lockout.message(self.retry_after), code="locked_out")
        return super().clean()


def _clean_username(form):
    username = form.cleaned_data.get("username")
    if username and usernames.is_taken(username, exclude=form.instance):
        raise ValidationError(f"User name {username} {usernames.TAKEN}.", code="unique")
    return username


class PaiUserCreationForm(AdminUserCreationForm):
    """The admin's new-user form: the name must be free whatever its case (`usernames`)."""

    def clean_username(self):
        return _clean_username(self)


class PaiUserChangeForm(UserChangeForm):
    """The admin's user form: a renamed user's new name must be free whatever its case."""

    def clean_username(self):
        return _clean_username(self)
