"""OpenPAI's job routes under /api/v2/. `{user}~{job}` names a job; user names hold no `~`.

Each route also answers with a trailing slash, as OpenPAI's REST server did (see
`pai.api.routing`); the schema describes it once.
"""

from django.urls import path, re_path

from . import sharing, views

JOB = r"^jobs/(?P<username>[^/~]+)~(?P<name>[^/]+)"
TASK = JOB + r"/attempts/(?P<attempt_index>\d+)/taskRoles/(?P<task_role>[^/]+)/taskIndex/(?P<task_index>\d+)/attempts"


def _route(pattern, view, name):
    return [re_path(pattern + "$", view, name=name), re_path(pattern + "/$", view)]


urlpatterns = [
    path("jobs", views.JobListView.as_view(), name="job-list"),
    path("jobs/", views.JobListView.as_view()),
    *_route(r"^job-attempts/healthz", views.JobAttemptsHealthView.as_view(), "job-attempts-healthz"),
    *_route(JOB, views.JobDetailView.as_view(), "job-detail"),
    *_route(JOB + r"/attempts/(?P<attempt_index>\d+)", views.JobAttemptStatusView.as_view(), "job-detail-attempt"),
    *_route(JOB + r"/ssh", views.JobSshView.as_view(), "job-ssh"),
    *_route(JOB + r"/config", views.JobConfigView.as_view(), "job-config"),
    *_route(JOB + r"/executionType", views.JobExecutionTypeView.as_view(), "job-execution-type"),
    *_route(JOB + r"/tag", views.JobTagView.as_view(), "job-tag"),
    *_route(JOB + r"/shares", sharing.JobSharesView.as_view(), "job-shares"),
    *_route(JOB + r"/events", views.JobEventsView.as_view(), "job-events"),
    *_route(JOB + r"/job-attempts", views.JobAttemptListView.as_view(), "job-attempts"),
    *_route(JOB + r"/job-attempts/healthz", views.JobAttemptsHealthOfJobView.as_view(), "job-attempts-healthz-of-job"),
    *_route(JOB + r"/job-attempts/(?P<attempt_index>\d+)", views.JobAttemptDetailView.as_view(), "job-attempt"),
    *_route(TASK, views.TaskAttemptsView.as_view(), "task-attempts"),
    *_route(TASK + r"/(?P<task_attempt_index>\d+)/logs", views.TaskAttemptLogsView.as_view(), "task-logs"),
    *_route(TASK + r"/(?P<task_attempt_index>\d+)/logs/all", views.TaskAttemptLogView.as_view(), "task-log"),
]
