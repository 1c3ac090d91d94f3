"""The job vocabularies OpenPAI clients read: states, FrameworkController sub-states, priorities."""

from django.db import models

from scheduler import PRIORITY_CLASSES


class JobState(models.TextChoices):
    WAITING = "WAITING"
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    UNKNOWN = "UNKNOWN"


COMPLETED_STATES = frozenset({JobState.STOPPED, JobState.SUCCEEDED, JobState.FAILED})


class JobSubState(models.TextChoices):
    """FrameworkController's framework/attempt states, which OpenPAI reports as `subState`."""

    ATTEMPT_CREATION_PENDING = "AttemptCreationPending"
    ATTEMPT_CREATION_REQUESTED = "AttemptCreationRequested"
    ATTEMPT_PREPARING = "AttemptPreparing"
    ATTEMPT_RUNNING = "AttemptRunning"
    ATTEMPT_DELETION_PENDING = "AttemptDeletionPending"
    ATTEMPT_DELETION_REQUESTED = "AttemptDeletionRequested"
    ATTEMPT_DELETING = "AttemptDeleting"
    ATTEMPT_COMPLETED = "AttemptCompleted"
    COMPLETED = "Completed"


class ExecutionType(models.TextChoices):
    START = "START"
    STOP = "STOP"


class PriorityClass(models.TextChoices):
    PROD = "prod"
    TEST = "test"
    OPPO = "oppo"


# HiveD's job priorities for OpenPAI's priority classes (the engine's table); `test` is the default.
PRIORITY_OF_CLASS = {PriorityClass(name): priority for name, priority in PRIORITY_CLASSES.items()}
DEFAULT_PRIORITY_CLASS = PriorityClass.TEST


class NotificationEvent(models.TextChoices):
    """The transitions `extras.jobStatusChangeNotification` may ask an e-mail for."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"
    RETRIED = "retried"


class EventType(models.TextChoices):
    NORMAL = "Normal"
    WARNING = "Warning"


# FrameworkController's exit code for a user stop (scheduler/exitspec.yaml).
STOP_REQUESTED_EXIT_CODE = -210
