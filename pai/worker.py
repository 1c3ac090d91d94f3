"""The worker process: django-q2's cluster, as `manage.py qcluster` runs it, stopping
cleanly whenever it is told to (`python -m pai.worker`).

`qcluster` installs its signal handlers only once Django has loaded, which takes seconds
on a busy machine: a Ctrl-C or SIGTERM before that kills it without a word, and one
before its sentinel process exists fails in django-q2 (`'NoneType' object has no
attribute 'is_alive'`). Here a stop is noted from the first moment and acted on as soon
as the cluster can act on it: before the cluster starts, it does not start; while it
starts, it stops once started, as qcluster stops (`stopping.`, `has stopped.`, once
however many signals come).
"""

import os
import signal
import sys

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def main():
    asked = []

    def note(signum, frame):
        asked.append(signum)

    for signum in STOP_SIGNALS:
        signal.signal(signum, note)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pai.settings")
    import django

    django.setup()
    if asked:
        print("pai worker: stopped before it started.", flush=True)
        return 0
    from django_q.cluster import Cluster

    cluster = Cluster()
    # The cluster's handlers (installed just now) would stop a sentinel that is not there yet.
    for signum in STOP_SIGNALS:
        signal.signal(signum, note)
    cluster.start()
    stopped = []

    def stop_once(signum, frame):
        # A second signal while stopping (a second Ctrl-C) would log "stopping." again.
        if not stopped:
            stopped.append(signum)
            cluster.stop()

    for signum in STOP_SIGNALS:
        signal.signal(signum, stop_once)
    if asked:
        stop_once(asked[0], None)
    cluster.sentinel.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
