"""The portal's routes, mounted at the site root (pai/urls.py). Names live in the `portal`
namespace: `{% url 'portal:job-list' %}`. A job is `<username>~<name>`, as in the API: user
names hold no `~`, job names neither."""

from django.urls import path, re_path

from .views import account, cluster, jobs, submit, vcs

app_name = "portal"

JOB = r"^jobs/(?P<username>[^/~]+)~(?P<name>[^/~]+)"

urlpatterns = [
    # Home, job list, job detail and logs (apps/portal/views/jobs.py).
    path("", jobs.home, name="home"),
    path("jobs/", jobs.job_list, name="job-list"),
    path("jobs/bulk", jobs.job_bulk, name="job-bulk"),
    path("jobs/abnormal/", jobs.abnormal_job_list, name="abnormal-jobs"),
    re_path(JOB + r"/$", jobs.job_detail, name="job-detail"),
    re_path(JOB + r"/stop$", jobs.job_stop, name="job-stop"),
    re_path(JOB + r"/resubmit$", jobs.job_resubmit, name="job-resubmit"),
    re_path(
        JOB + r"/attempts/(?P<attempt>\d+)/tasks/(?P<role>[^/]+)/(?P<index>\d+)/log$",
        jobs.task_log, name="task-log",
    ),
    # Submission, clone, templates (apps/portal/views/submit.py).
    path("submit/", submit.SubmitView.as_view(), name="submit"),
    path("submit/check", submit.SubmitCheckView.as_view(), name="submit-check"),
    re_path(JOB + r"/clone$", submit.CloneView.as_view(), name="job-clone"),
    # Virtual clusters, the cluster, the account (apps/portal/views/vcs.py, cluster.py, account.py).
    path("vcs/", vcs.vc_list, name="vc-list"),
    path("vcs/<str:name>/", vcs.vc_detail, name="vc-detail"),
    path("cluster/", cluster.cluster_page, name="cluster"),
    path("account/", account.account, name="account"),
    path("account/tokens/", account.token_create, name="account-token-create"),
    path("account/tokens/<str:token>/revoke/", account.token_revoke, name="account-token-revoke"),
    path("account/password/", account.password_change, name="account-password"),
    path("account/email/", account.email_change, name="account-email"),
    path("account/preferences/", account.preferences, name="account-preferences"),
]
