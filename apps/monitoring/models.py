from django.db import models


class WorkerFigures(models.Model):
    """What the scheduler loop counted, published for every web process's `/metrics`.

    One row per publisher (`scheduler`), rewritten under a row lock by the process that
    holds the scheduler lease. `data` holds cumulative counters, histograms and gauges
    by metric name and label set (see `apps.monitoring.figures`).
    """

    key = models.CharField(max_length=64, primary_key=True)
    data = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "worker figures"

    def __str__(self):
        return self.key
