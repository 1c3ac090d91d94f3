from .attempt import JobAttempt, Task, TaskAttempt, TaskLog
from .event import JobEvent
from .job import Job, JobSecret, JobTag
from .lease import WorkerLease
from .notification import JobNotification
from .sharing import JobGroupObjectPermission, JobUserObjectPermission
from .usage import JobUsage

__all__ = ["Job", "JobSecret", "JobTag", "JobAttempt", "Task", "TaskAttempt", "TaskLog", "JobEvent", "WorkerLease", "JobUsage",
           "JobNotification",
           "JobUserObjectPermission", "JobGroupObjectPermission"]
