"""The scheduler lease by the database's clock, and the fence that stops a deposed leader."""

import threading
import time
from datetime import timedelta

import pytest
from django.db.models.functions import Now

from apps.jobs.models import WorkerLease
from apps.jobs.worker import lease

pytestmark = pytest.mark.django_db

TTL = timedelta(seconds=2)


def test_one_holder_at_a_time_and_a_standby_takes_over_once_it_expires():
    assert lease.acquire("a", ttl=TTL)
    assert not lease.acquire("b", ttl=TTL)
    assert lease.acquire("a", ttl=TTL)  # renewing
    assert lease.current_holder() == "a"
    # Expiry is judged by the database's clock: move the row's expiry into its past.
    WorkerLease.objects.update(expires_at=Now() - timedelta(seconds=1))
    assert lease.current_holder() is None
    assert lease.acquire("b", ttl=TTL)
    assert not lease.acquire("a", ttl=TTL)
    lease.release("b")
    assert lease.current_holder() is None and lease.acquire("a", ttl=TTL)


def test_the_fence_renews_once_half_the_lease_is_spent(settings):
    settings.PAI_SCHEDULER_LEASE_SECONDS = 2
    fence = lease.Fence("a")
    assert fence.hold()
    first = WorkerLease.objects.get().expires_at
    fence.check()  # plenty left: no query, no renewal
    assert WorkerLease.objects.get().expires_at == first
    time.sleep(1.05)
    fence.check()
    assert WorkerLease.objects.get().expires_at > first


def test_a_fence_whose_lease_was_taken_refuses_once_it_can_no_longer_be_sure(settings):
    settings.PAI_SCHEDULER_LEASE_SECONDS = 2
    fence = lease.Fence("a")
    assert fence.hold()
    WorkerLease.objects.update(holder="b", expires_at=Now() + timedelta(seconds=60))
    fence.check()  # within what the database granted it, the holder may still act
    refused = []

    def write_from_another_thread():
        try:
            fence.check(write=True)
        except lease.LeaseLost as exc:
            refused.append(exc)

    fence.lapse()  # as after a pause past the lease: the local deadline has passed
    with pytest.raises(lease.LeaseLost, match="lost the scheduler lease to b"):
        fence.check(write=False)
    thread = threading.Thread(target=write_from_another_thread)
    thread.start()
    thread.join()
    assert refused
    assert WorkerLease.objects.get().holder == "b"
