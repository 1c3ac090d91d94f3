"""OpenPAI's job routes under /api/v2/. `{user}~{job}` names a job; user names hold no `~`."""

from django.urls import path, re_path

from . import views

JOB = r"^jobs/(?P<username>[^/~]+)~(?P<name>[^/]+)"
TASK = JOB + r"/attempts/(?P<attempt_index>\d+)/taskRoles/(?P<task_role>[^/]+)/taskIndex/(?P<task_index>\d+)/attempts"

urlpatterns = [
    path("jobs", views.JobListView.as_view(), name="job-list"),
    re_path(JOB + r"$", views.JobDetailView.as_view(), name="job-detail"),
    re_path(JOB + r"/config$", views.JobConfigView.as_view(), name="job-config"),
    re_path(JOB + r"/executionType$", views.JobExecutionTypeView.as_view(), name="job-execution-type"),
    re_path(JOB + r"/tag$", views.JobTagView.as_view(), name="job-tag"),
    re_path(JOB + r"/events$", views.JobEventsView.as_view(), name="job-events"),
    re_path(JOB + r"/job-attempts$", views.JobAttemptListView.as_view(), name="job-attempts"),
    re_path(JOB + r"/job-attempts/(?P<attempt_index>\d+)$", views.JobAttemptDetailView.as_view(), name="job-attempt"),
    re_path(TASK + r"$", views.TaskAttemptsView.as_view(), name="task-attempts"),
    re_path(TASK + r"/(?P<task_attempt_index>\d+)/logs$", views.TaskAttemptLogsView.as_view(), name="task-logs"),
    re_path(TASK + r"/(?P<task_attempt_index>\d+)/logs/all$", views.TaskAttemptLogView.as_view(), name="task-log"),
]
