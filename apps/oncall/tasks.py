"""django-q2 entry points and the schedules that run them."""

from pai import schedules

from . import services

SCHEDULES = {
    # name: (function, every N minutes)
    "oncall.sla_sweep": ("apps.oncall.tasks.sla_sweep", 1),
    "oncall.rotation_handoffs": ("apps.oncall.tasks.rotation_handoffs", 5),
    "oncall.github_issues": ("apps.oncall.tasks.github_issues", 5),
}


def sla_sweep():
    return services.run_sla_sweep()


def page_incident(pk):
    """Page the DRIs about one incident (queued when it opens or its severity rises)."""
    from django.utils import timezone

    from . import paging
    from .models import Incident

    incident = Incident.objects.filter(pk=pk).select_related("cluster", "rotation").first()
    return paging.page(incident, timezone.now()) if incident is not None else 0


def create_github_issue(pk):
    """Create one follow-up's GitHub issue (queued when someone asks for it)."""
    from . import github

    follow_up = github.create_issue(pk)
    return follow_up.issue_url if follow_up is not None else None


def github_issues():
    """Retry the follow-ups' issues that are due, and close follow-ups whose issue was closed."""
    from . import github

    return github.sweep()


def rotation_handoffs():
    return services.send_handoffs()


def ensure_schedules():
    """Create or correct the on-call schedules by name; running it again changes nothing."""
    schedules.ensure(SCHEDULES)
