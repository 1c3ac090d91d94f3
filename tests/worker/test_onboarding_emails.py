"""Bulk onboarding as deployed (issue 13 #9): a hundred rows and more commit at once, and the
welcome e-mails reach each address exactly once through `manage.py qcluster`'s task queue."""

import email
import os
import subprocess
import sys
import time

import pytest

from apps.tenants.models import OnboardingEmail
from apps.tenants.services import bulk_onboard
from tests.conftest import requires_postgres

from .conftest import stop_qcluster
from .test_crashes import ROOT, wait_for, worker_env

# Worker processes need a database other processes can reach: PostgreSQL.
pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True, serialized_rollback=True)]

# What is proved here does not depend on the size (all rows commit, nothing is sent in the
# request, qcluster sends each e-mail once); qcluster sends the 120 in 2-3 s on 2 cores.
ROWS = 120


def test_a_hundred_rows_commit_at_once_and_each_email_is_sent_once_by_the_worker(world, tmp_path):
    csv_text = "username,email,groups\n" + "\n".join(f"u{i:04d},u{i:04d}@example.com,team_a" for i in range(ROWS))
    started = time.monotonic()
    users = bulk_onboard(world.a_admin, world.tenant_a, csv_text, base_url="https://pai.example.com")
    elapsed = time.monotonic() - started
    assert len(users) == ROWS
    # No mail server is waited for in the request: every e-mail is queued, none sent yet.
    assert OnboardingEmail.objects.filter(status=OnboardingEmail.Status.QUEUED).count() == ROWS
    print(f"bulk onboarding of {ROWS} rows: {elapsed:.2f} s, load {os.getloadavg()[0]:.1f}")

    outbox = tmp_path / "outbox"
    env = worker_env(
        tmp_path,
        EMAIL_BACKEND="django.core.mail.backends.filebased.EmailBackend", EMAIL_FILE_PATH=str(outbox),
    )
    env.pop("REDIS_URL", None)  # the tasks wait on the database broker (its queue is named after the cluster)
    qcluster = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"], cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        assert wait_for(
            lambda: OnboardingEmail.objects.filter(status=OnboardingEmail.Status.SENT).count() == ROWS, timeout=240
        ), OnboardingEmail.objects.exclude(status=OnboardingEmail.Status.SENT).values_list("status", "last_error")[:5]
    finally:
        stop_qcluster(qcluster, timeout=30)

    recipients = []
    for path in outbox.iterdir():
        # The file backend appends each message to the connection's file, separated by dashes.
        for chunk in path.read_text().split("-" * 79):
            if chunk.strip():
                recipients.append(email.message_from_string(chunk.strip())["To"])
    assert sorted(recipients) == sorted(f"u{i:04d}@example.com" for i in range(ROWS))
