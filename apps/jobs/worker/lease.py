"""A leader lease in the database, portable across SQLite and PostgreSQL, and the fence
that keeps a deposed leader from writing to any cluster.

Taking the lease is one conditional UPDATE (held by me, or expired) or, the first time,
one INSERT guarded by the primary key; renewing is the same UPDATE. Whoever's statement
changed the row holds the lease until `expires_at`. Every comparison and every new
expiry is computed by the database's clock (`Now()`), never by a worker's own: two
workers whose clocks disagree still agree on who holds the lease.

A holder renews at the start of every loop and, through its :class:`Fence`, while a
cycle runs: before each write to a cluster the fence checks that the lease is surely
still held (and renews it when half of it is spent), and every batch of writes
(``PAI_SCHEDULER_LEASE_CHECK_WRITES`` of them, or a tenth of the lease's time) first
asks the database, which renews the lease by its own clock or answers that another
worker holds it. A process paused past its lease (a long GC, SIGSTOP, a VM migration)
finds on waking that its fence has lapsed, asks the database, learns that another
worker took over, and writes nothing more.
"""

import math
import os
import socket
import threading
import time
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Case, F, Q, Value, When
from django.db.models.functions import Now

from ..models import WorkerLease

SCHEDULER_LEASE = "scheduler"


class LeaseLost(Exception):
    """This process does not hold the scheduler lease (any more): it must not touch a cluster."""


def default_ttl():
    return timedelta(seconds=settings.PAI_SCHEDULER_LEASE_SECONDS)


def new_holder_id():
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def acquire(holder, name=SCHEDULER_LEASE, ttl=None):
    """Take or renew the lease. True when `holder` holds it for `ttl` from now (the database's now)."""
    ttl = ttl or default_ttl()
    taken = WorkerLease.objects.filter(Q(holder=holder) | Q(expires_at__lt=Now()), name=name).update(
        acquired_at=Case(When(holder=holder, then=F("acquired_at")), default=Now()),
        holder=holder,
        expires_at=Now() + Value(ttl),
    )
    if taken:
        return True
    try:
        with transaction.atomic():
            WorkerLease.objects.create(name=name, holder=holder, acquired_at=Now(), expires_at=Now() + Value(ttl))
        return True
    except IntegrityError:
        return False


def release(holder, name=SCHEDULER_LEASE):
    """Give the lease up at once (a clean shutdown), so a standby need not wait for expiry."""
    WorkerLease.objects.filter(name=name, holder=holder).update(expires_at=Now() - Value(timedelta(seconds=1)))


def current_holder(name=SCHEDULER_LEASE):
    lease = WorkerLease.objects.filter(name=name, expires_at__gte=Now()).first()
    return lease.holder if lease else None


class Fence:
    """The lease of one holder, as a guard of writes.

    `hold()` takes or renews the lease. `check(write)` raises :class:`LeaseLost` unless
    the lease is surely still held: after a renewal the database gave it `ttl` from the
    statement's start, so it surely lasts until the local monotonic time taken before
    the statement was sent plus `ttl`, less a margin; past that, the fence asks the
    database again. On the thread that made the fence (the loop's) a check renews the
    lease once half of it is spent, and a write is the first of a batch — the
    database is asked before it — once `batch` writes were checked or `margin` seconds
    passed since the database last confirmed the lease; other threads only read the
    deadline, and only writes are refused there.
    """

    def __init__(self, holder, name=SCHEDULER_LEASE, ttl=None, batch=None):
        self.holder, self.name = holder, name
        self.ttl = (ttl or default_ttl()).total_seconds()
        self.margin = max(0.5, self.ttl / 10)
        self.batch = batch or settings.PAI_SCHEDULER_LEASE_CHECK_WRITES
        self._valid_until = -math.inf
        self._confirmed_at = -math.inf
        self._writes = 0  # writes checked since the database last confirmed the lease
        self.confirmations = 0  # how often the database was asked (for tests and metrics)
        self._owner = threading.get_ident()

    def hold(self):
        """Take or renew the lease now; True when held."""
        started = time.monotonic()
        self.confirmations += 1
        if acquire(self.holder, self.name, timedelta(seconds=self.ttl)):
            self._valid_until = started + self.ttl - self.margin
            self._confirmed_at, self._writes = started, 0
            return True
        self._valid_until = -math.inf
        return False

    def lapse(self):
        """Forget the lease locally: the next check asks the database."""
        self._valid_until = -math.inf

    def check(self, write=True):
        left = self._valid_until - time.monotonic()
        if threading.get_ident() != self._owner:
            if write and left <= 0:
                raise LeaseLost(f"{self.holder} cannot confirm it still holds the {self.name} lease")
            return
        batch_done = write and (self._writes >= self.batch or time.monotonic() - self._confirmed_at > self.margin)
        if left > self.ttl / 2 and not batch_done:
            self._writes += write
            return
        if not self.hold():
            raise LeaseLost(f"{self.holder} lost the {self.name} lease to {current_holder(self.name)}")
        self._writes = int(write)

    __call__ = check
