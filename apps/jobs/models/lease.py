from django.db import models


class WorkerLease(models.Model):
    """Who runs the scheduler right now: one row per lease name, held until `expires_at`.

    A holder renews its lease every cycle; another worker may take it over only once it
    has expired, so at most one process schedules and reconciles at a time.
    """

    name = models.CharField(max_length=64, primary_key=True)
    holder = models.CharField(max_length=128)
    acquired_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    def __str__(self):
        return f"{self.name} held by {self.holder} until {self.expires_at:%H:%M:%S}"
