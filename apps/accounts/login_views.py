"""pai's sign-in page for members, DRIs and admins alike (the admin's own form takes staff only)."""

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.views.decorators.http import require_http_methods

from pai.links import public_url

from .forms import SignInForm


class SignInView(auth_views.LoginView):
    form_class = SignInForm

    def dispatch(self, request, *args, **kwargs):
        if settings.PAI_AUTH_MODE == "oidc":
            # Passwords are the provider's business in OIDC mode.
            query = {"next": request.GET["next"]} if request.GET.get("next") else {}
            return HttpResponseRedirect(reverse("oidc_authentication_init") + (f"?{urlencode(query)}" if query else ""))
        return super().dispatch(request, *args, **kwargs)

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if form.retry_after:
            response.status_code = 429
            response["Retry-After"] = str(form.retry_after)
        return response


class ForgotPasswordView(auth_views.PasswordResetView):
    """"Forgot your password?": pai's own e-mail, its link at pai's public address (as the
    onboarding e-mail's), not at whatever host name the request came in with."""

    email_template_name = "registration/password_reset_email.txt"
    subject_template_name = "registration/password_reset_subject.txt"

    def form_valid(self, form):
        self.extra_email_context = {
            "public_url": public_url(self.request),
            "link_days": max(1, settings.PASSWORD_RESET_TIMEOUT // 86400),
        }
        return super().form_valid(form)


class SignOutView(auth_views.LogoutView):
    """GET asks to confirm, POST signs out (a link elsewhere cannot sign anyone out); in
    OIDC mode the POST ends the provider's session too."""

    http_method_names = ["get", "post", "options"]

    def get(self, request, *args, **kwargs):
        return render(request, "registration/logout_confirm.html")

    def post(self, request, *args, **kwargs):
        if settings.PAI_AUTH_MODE == "oidc":
            from .oidc_views import logout

            return logout(request)
        return super().post(request, *args, **kwargs)


class TimeZoneForm(forms.Form):
    time_zone = forms.ChoiceField(label="Your time zone", required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        from zoneinfo import available_timezones

        platform = settings.TIME_ZONE
        self.fields["time_zone"].choices = [("", f"The platform's ({platform})")] + [
            (name, name) for name in sorted(available_timezones()) if "/" in name or name == "UTC"
        ]


@login_required
@require_http_methods(["GET", "POST"])
def time_zone(request):
    """The signed-in user's time zone: the on-call deadlines and other pages' times show in it."""
    from . import timezones

    form = TimeZoneForm(request.POST or None, initial={"time_zone": timezones.zone_of(request.user)})
    if request.method == "POST" and form.is_valid():
        timezones.set_zone(request, request.user, form.cleaned_data["time_zone"])
        messages.success(request, f"Times now show in {form.cleaned_data['time_zone'] or settings.TIME_ZONE}.")
        target = request.POST.get("next", "")
        if target and url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure()):
            return HttpResponseRedirect(target)
        return HttpResponseRedirect(reverse("time-zone"))
    return render(request, "accounts/time_zone.html", {"form": form, "now": timezone.now(),
                                                        "next": request.GET.get("next", "")})
