from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError

from . import lockout


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
