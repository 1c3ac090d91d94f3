from django.urls import path

from . import views

app_name = "oncall"
urlpatterns = [
    path("", views.incident_list, name="incident-list"),
    path("status/", views.status_page, name="status"),
    path("incidents/new/", views.incident_new, name="incident-new"),
    path("incidents/<int:pk>/", views.incident_detail, name="incident-detail"),
    path("incidents/<int:pk>/<str:action>/", views.incident_action, name="incident-action"),
    path("follow-ups/<int:pk>/done/", views.follow_up_done, name="follow-up-done"),
    path("follow-ups/<int:pk>/github-issue/", views.follow_up_github_issue, name="follow-up-github-issue"),
    path("rotations/", views.rotation_calendar, name="rotations"),
    path("rotations/<int:pk>/overrides/", views.rotation_override, name="rotation-override"),
    path("dashboard/", views.sla_dashboard, name="dashboard"),
]
