from __future__ import annotations

from django.core.validators import MaxValueValidator, RegexValidator
from django.db import models

from apps.accounts.models import CollectorKey
from apps.ingest.contract import ENDPOINTS, FINISH_REASONS, MAX_COUNT, QUALITY_TIERS, STATUSES


def _choices(names: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(name, name) for name in names]


def _count(**kwargs: object) -> models.PositiveIntegerField:
    return models.PositiveIntegerField(validators=[MaxValueValidator(MAX_COUNT)], **kwargs)  # type: ignore[arg-type]


class NaiveRecord(models.Model):
    """One token record as a plain model: flat columns, dims as JSON. Table made by syncdb."""

    source = models.ForeignKey(CollectorKey, on_delete=models.PROTECT, related_name="+")
    record_id = models.CharField(max_length=128)
    ts = models.DateTimeField()
    model = models.CharField(max_length=200)
    model_version = models.CharField(max_length=100, null=True, blank=True)
    endpoint = models.CharField(max_length=32, choices=_choices(ENDPOINTS), null=True, blank=True)
    dims = models.JSONField(default=dict, blank=True)
    prompt = _count()
    completion = _count()
    prompt_cached = _count(default=0)
    system = _count(default=0)
    tool = _count(default=0)
    structural = _count(default=0)
    padding = _count(default=0)
    draft = _count(default=0)
    draft_accepted = _count(default=0)
    recomputed = _count(default=0)
    reasoning = _count(default=0)
    prompt_cache_write = _count(default=0)
    status = models.CharField(max_length=16, choices=_choices(STATUSES))
    finish_reason = models.CharField(max_length=16, choices=_choices(FINISH_REASONS), null=True, blank=True)
    queued = _count(null=True, blank=True)
    ttft = _count(null=True, blank=True)
    prefill = _count(null=True, blank=True)
    decode = _count(null=True, blank=True)
    e2e = _count(null=True, blank=True)
    attempt = models.PositiveSmallIntegerField(default=1, validators=[MaxValueValidator(1000)])
    retry_of = models.CharField(max_length=128, null=True, blank=True)
    prompt_hash = models.CharField(
        max_length=128, null=True, blank=True, validators=[RegexValidator(r"^[0-9a-f]{16,128}$")]
    )
    quality_tier = models.CharField(max_length=8, choices=_choices(QUALITY_TIERS), null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["record_id", "ts"], name="bench_naive_record_once")]
