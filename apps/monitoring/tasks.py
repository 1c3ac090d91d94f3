"""django-q2 entry points of monitoring: the idle-GPU rule's e-mails, and the schedule
that hands out again what a lost task left unsent."""

from pai import schedules

from . import idle

SCHEDULES = {
    "monitoring.idle_gpu_notices": ("apps.monitoring.tasks.resend_idle_gpu_notices", 5),
}


def send_idle_gpu_notice(pk):
    return idle.send(pk)


def resend_idle_gpu_notices():
    return idle.resend_unsent()


def ensure_schedules():
    """Create or correct the monitoring schedules by name; running it again changes nothing."""
    schedules.ensure(SCHEDULES)
