"""The one table the shared leaf owns: the progress of resumable day-runs (apps.common.dayrun)."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class JobRun(models.Model):
    """Progress of one run of a job (`kind`: reclassify, reprice, accrue) over [start, end),
    one step (a day, or a month for accrual) at a time: the steps before `next_day` are done.
    `key` names what else makes the run the same run (the rule set id of a reclassify)."""

    class Status(models.TextChoices):
        RUNNING = "running"
        FAILED = "failed"
        DONE = "done"

    kind = models.CharField(max_length=32)
    key = models.CharField(max_length=64, blank=True)
    start = models.DateField()
    end = models.DateField()
    next_day = models.DateField()
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.RUNNING)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("job run")
        verbose_name_plural = _("job runs")
        ordering = ["-started_at"]
        indexes = [models.Index(fields=["kind", "key", "start", "end"], name="common_jobrun_job")]

    def __str__(self) -> str:
        return f"{self.kind} {self.start}..{self.end} ({self.status}, next {self.next_day})"
