"""gunicorn settings of pai's web process: `gunicorn -c python:pai.gunicorn pai.wsgi`.

Only the bookkeeping of prometheus-client's multiprocess mode lives here (every other
setting comes from the command line): with `PROMETHEUS_MULTIPROC_DIR` set, each gunicorn
worker writes its request metrics to files in that directory and `/metrics`, whichever
worker answers it, adds them all up (`apps.monitoring.metrics.exposition`).
"""

import os
from pathlib import Path


def on_starting(server):
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        # Files of a previous run would add that run's counts to this one's.
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        for stale in path.glob("*.db"):
            stale.unlink()


def child_exit(server, worker):
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
