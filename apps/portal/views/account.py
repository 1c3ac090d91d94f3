"""My account: application and expiring tokens, password and e-mail (basic mode), the
default VC.

Each action goes through the same services as the API, so the rules are the API's:
an expiring token is a login token (`issue_login_token`: at most
`PAI_LOGIN_TOKEN_MAX_SECONDS`, shortened to it), an application token never expires,
both are revocable; a new password needs the old one and revokes every token of the
user (`apps.accounts.signals`); password and e-mail changes exist in basic mode only
(in OIDC mode the identity provider owns them, and these routes answer 404).
Refused input re-renders the page with a 400 and the error beside its field.
"""

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import update_session_auth_hash
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from apps.accounts import services
from apps.accounts.models import ApiToken, UserProfile
from apps.accounts.tokens import digest_of
from apps.jobs.services import default_virtual_cluster
from apps.virtualclusters.models import VirtualCluster

HOUR, DAY = 3600, 24 * 3600
APPLICATION = "application"
# How long a new expiring token lives, offered up to PAI_LOGIN_TOKEN_MAX_SECONDS.
EXPIRY_CHOICES = ((HOUR, "1 hour"), (DAY, "1 day"), (7 * DAY, "7 days"), (30 * DAY, "30 days"), (90 * DAY, "90 days"))


def _expiry_choices():
    most = settings.PAI_LOGIN_TOKEN_MAX_SECONDS
    choices = [(str(s), label) for s, label in EXPIRY_CHOICES if s <= most]
    if not any(int(s) == most for s, _ in choices):
        choices.append((str(most), f"{most // DAY} days" if most % DAY == 0 else f"{most} seconds"))
    return [(APPLICATION, "never (application token: runs jobs, cannot manage tokens or the account)")] + choices


class TokenForm(forms.Form):
    expires = forms.ChoiceField(label="Expires", choices=())

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["expires"].choices = _expiry_choices()


class PasswordForm(forms.Form):
    old_password = forms.CharField(label="Current password", widget=forms.PasswordInput(
        attrs={"autocomplete": "current-password"}), max_length=256)
    new_password = forms.CharField(label="New password", widget=forms.PasswordInput(
        attrs={"autocomplete": "new-password"}), max_length=256)
    new_password_again = forms.CharField(label="New password, again", widget=forms.PasswordInput(
        attrs={"autocomplete": "new-password"}), max_length=256)

    def clean(self):
        data = super().clean()
        if data.get("new_password") and data.get("new_password") != data.get("new_password_again"):
            self.add_error("new_password_again", "The two new passwords differ.")
        return data


class EmailForm(forms.Form):
    email = forms.EmailField(label="E-mail", max_length=254)


class PreferencesForm(forms.Form):
    default_virtual_cluster = forms.ModelChoiceField(
        label="Default VC", queryset=VirtualCluster.objects.none(), required=False,
        empty_label="(automatic: the first VC granted to your groups)",
        help_text="Where a job that names no VC goes: the submit page's default, and the API's.",
    )

    def __init__(self, user, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["default_virtual_cluster"].queryset = VirtualCluster.objects.usable_by(user).order_by("name")
        self.fields["default_virtual_cluster"].to_field_name = "name"


def _basic():
    return settings.PAI_AUTH_MODE == "basic"


def _page(request, status=200, **forms_and_extra):
    user = request.user
    profile = UserProfile.objects.filter(user=user).select_related("default_virtual_cluster").first()
    chosen = profile.default_virtual_cluster if profile else None
    context = {
        "basic": _basic(),
        "tokens": ApiToken.objects.live().filter(user=user),
        "token_form": TokenForm(),
        "password_form": PasswordForm(),
        "email_form": EmailForm(initial={"email": user.email}),
        "preferences_form": PreferencesForm(user, initial={"default_virtual_cluster": chosen.name if chosen else None}),
        "default_vc": default_virtual_cluster(user),
        "max_days": settings.PAI_LOGIN_TOKEN_MAX_SECONDS / DAY,
    }
    context.update(forms_and_extra)
    return render(request, "portal/account.html", context, status=status)


@login_required
@require_GET
def account(request):
    return _page(request)


@login_required
@require_POST
def token_create(request):
    form = TokenForm(request.POST)
    if not form.is_valid():
        return _page(request, status=400, token_form=form)
    if form.cleaned_data["expires"] == APPLICATION:
        row, token = services.issue_application_token(request.user)
    else:
        row, token = services.issue_login_token(request.user, int(form.cleaned_data["expires"]))
    return _page(request, new_token=token, new_token_row=row)


@login_required
@require_POST
def token_revoke(request, token):
    """Revoke one of the user's tokens, named by itself or its identifier (as the API's DELETE)."""
    mine = ApiToken.objects.filter(user=request.user)
    row = mine.filter(digest=digest_of(token)).first()
    if row is None and len(token) == ApiToken.PREFIX_LENGTH:
        row = mine.filter(prefix=token).first()
    if row is None:
        raise Http404("No such token.")
    services.revoke_token(request.user, row)
    messages.success(request, f"Token {row.prefix}… is revoked.")
    return redirect("portal:account")


def _apply(request, form, form_key, change, done):
    """Run `change(cleaned_data)`; a service's ValidationError lands on the form's fields."""
    if form.is_valid():
        try:
            change(form.cleaned_data)
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            messages.success(request, done)
            return redirect("portal:account")
    return _page(request, status=400, **{form_key: form})


# The services name the API's fields; the page's fields are these.
_PASSWORD_FIELDS = {"oldPassword": "old_password", "newPassword": "new_password"}


@login_required
@require_POST
def password_change(request):
    if not _basic():
        raise Http404("Passwords are the identity provider's in OIDC mode.")
    form = PasswordForm(request.POST)

    def change(data):
        try:
            services.change_own_profile(request.user, new_password=data["new_password"],
                                        old_password=data["old_password"])
        except ValidationError as exc:
            raise ValidationError({_PASSWORD_FIELDS.get(k, k): v for k, v in exc.message_dict.items()}) from None
        update_session_auth_hash(request, request.user)

    return _apply(request, form, "password_form", change,
                  "Your password is changed. Every token of yours is revoked: create new ones for your scripts.")


@login_required
@require_POST
def email_change(request):
    if not _basic():
        raise Http404("E-mail addresses are the identity provider's in OIDC mode.")
    form = EmailForm(request.POST)
    return _apply(request, form, "email_form",
                  lambda data: services.change_own_profile(request.user, email=data["email"]), "Your e-mail is saved.")


@login_required
@require_POST
def preferences(request):
    form = PreferencesForm(request.user, request.POST)

    def change(data):
        services.set_default_virtual_cluster(request.user, data["default_virtual_cluster"])

    return _apply(request, form, "preferences_form", change, "Your default VC is saved.")
