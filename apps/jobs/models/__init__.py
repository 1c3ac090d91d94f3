from .attempt import JobAttempt, Task, TaskAttempt
from .event import JobEvent
from .job import Job, JobSecret, JobTag

__all__ = ["Job", "JobSecret", "JobTag", "JobAttempt", "Task", "TaskAttempt", "JobEvent"]
