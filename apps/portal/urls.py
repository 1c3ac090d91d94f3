"""The portal's routes, mounted at the site root (pai/urls.py). Names live in the `portal`
namespace: `{% url 'portal:job-list' %}`."""

from django.urls import path  # noqa: F401  (each page family adds its routes below)

app_name = "portal"

urlpatterns = [
    # Home, job list, job detail and logs (apps/portal/views/jobs.py).
    # Submission, clone, templates (apps/portal/views/submit.py).
    # Virtual clusters, the cluster, the account (apps/portal/views/vcs.py, cluster.py, account.py).
]
