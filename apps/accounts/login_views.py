"""pai's sign-in page for members, DRIs and admins alike (the admin's own form takes staff only)."""

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import urlencode

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
