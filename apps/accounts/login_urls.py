"""The sign-in and sign-out pages, ahead of django.contrib.auth's other account pages under /accounts/."""

from django.urls import path

from . import login_views

urlpatterns = [
    path("login/", login_views.SignInView.as_view(), name="login"),
    path("logout/", login_views.SignOutView.as_view(), name="logout"),
    path("password_reset/", login_views.ForgotPasswordView.as_view(), name="password_reset"),
    path("time-zone/", login_views.time_zone, name="time-zone"),
]
