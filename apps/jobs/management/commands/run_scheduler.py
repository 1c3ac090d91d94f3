from django.core.management.base import BaseCommand

from apps.jobs.worker.loop import DEFAULT_TICK, run_scheduler


class Command(BaseCommand):
    help = (
        "Run the scheduler and the pod reconciler in the foreground while this process holds the "
        "scheduler lease (others stand by). `manage.py qcluster` runs the same loop as a task."
    )

    def add_arguments(self, parser):
        parser.add_argument("--duration", type=float, default=None, help="Stop after this many seconds.")
        parser.add_argument("--tick", type=float, default=DEFAULT_TICK, help="Seconds between cycles.")
        parser.add_argument("--once", action="store_true", help="Run one pass and stop.")
        parser.add_argument("--holder", default=None, help="This process's name in the lease (default: host:pid).")

    def handle(self, *args, duration, tick, once, holder, **options):
        run_scheduler(duration=duration, tick=tick, once=once, holder=holder)
