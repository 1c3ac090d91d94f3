"""A leader lease in the database, portable across SQLite and PostgreSQL.

Taking the lease is one conditional UPDATE (held by me, or expired) or, the first time,
one INSERT guarded by the primary key; renewing is the same UPDATE. Whoever's statement
changed the row holds the lease until `expires_at`. A holder that dies is replaced once
its lease expires. The holder renews at the start of every cycle and stops working as
soon as a renewal fails.
"""

import os
import socket
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Case, F, Q, Value, When
from django.utils import timezone

from ..models import WorkerLease

SCHEDULER_LEASE = "scheduler"


def default_ttl():
    return timedelta(seconds=settings.PAI_SCHEDULER_LEASE_SECONDS)


def new_holder_id():
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def acquire(holder, name=SCHEDULER_LEASE, ttl=None):
    """Take or renew the lease. True when `holder` holds it for `ttl` from now."""
    ttl = ttl or default_ttl()
    now = timezone.now()
    taken = WorkerLease.objects.filter(Q(holder=holder) | Q(expires_at__lt=now), name=name).update(
        acquired_at=Case(When(holder=holder, then=F("acquired_at")), default=Value(now)),
        holder=holder,
        expires_at=now + ttl,
    )
    if taken:
        return True
    try:
        with transaction.atomic():
            WorkerLease.objects.create(name=name, holder=holder, acquired_at=now, expires_at=now + ttl)
        return True
    except IntegrityError:
        return False


def release(holder, name=SCHEDULER_LEASE):
    """Give the lease up at once (a clean shutdown), so a standby need not wait for expiry."""
    WorkerLease.objects.filter(name=name, holder=holder).update(expires_at=timezone.now() - timedelta(seconds=1))


def current_holder(name=SCHEDULER_LEASE):
    lease = WorkerLease.objects.filter(name=name, expires_at__gte=timezone.now()).first()
    return lease.holder if lease else None
