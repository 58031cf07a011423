from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from apps.accounts.models import CollectorKey
from apps.classification.engine import COMPONENTS
from apps.classification.models import Reason
from apps.common.buckets import hour_floor, hour_origin
from apps.ingest.models import ROLLUP_REF, DimSet, ServedModel


class Currency(models.TextChoices):
    CNY = "CNY"
    USD = "USD"


# Digits after the point of each currency's smallest unit (fen, cent): pool costs round to it.
MINOR_UNITS = {Currency.CNY: 2, Currency.USD: 2}


class Kind(models.TextChoices):
    INPUT = "input"
    CACHED_INPUT = "cached_input"
    OUTPUT = "output"
    # Optional: reasoning tokens are priced as output unless a version sets this (book.component_price).
    REASONING = "reasoning"
    # Optional: prompt-cache writes are priced as input unless a version sets this.
    CACHE_WRITE = "cache_write"


def validate_whole_hour(value: datetime) -> None:
    """The start of an hour of the books: a whole UTC hour in a whole-hour zone (10:00+05:30 is
    04:30 UTC: not whole), a local hour in a zone of half hours (buckets.hour_origin)."""
    utc = value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    if hour_floor(utc) != utc:
        minutes = hour_origin() // timedelta(minutes=1)
        raise ValidationError(f"must start an hour of the books: {minutes:02d} minutes past a UTC hour, seconds 0")


def validate_pattern(value: str) -> None:
    if not value or value != value.strip():
        raise ValidationError("a model name or a glob such as qwen2.5-*, without surrounding spaces")
    if "[" in value or "]" in value:
        raise ValidationError("patterns use * and ? only; [ and ] are not supported")


class PriceVersion(models.Model):
    """A complete price list, in force from `effective_from` until the next version's."""

    name = models.CharField(max_length=200, blank=True)
    effective_from = models.DateTimeField(unique=True, validators=[validate_whole_hour])
    currency = models.CharField(max_length=3, choices=Currency.choices, default=Currency.CNY)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("price version")
        verbose_name_plural = _("price versions")
        ordering = ["-effective_from"]

    def __str__(self) -> str:
        label = f"{self.effective_from:%Y-%m-%d %H:%M} {self.currency}"
        return f"{self.name} ({label})" if self.name else label


class Price(models.Model):
    """The price of one token kind per million tokens, for a model name or a glob of names."""

    version = models.ForeignKey(PriceVersion, on_delete=models.CASCADE, related_name="prices")
    model_pattern = models.CharField(max_length=200, validators=[validate_pattern])
    kind = models.CharField(max_length=12, choices=Kind.choices)
    per_million = models.DecimalField(max_digits=18, decimal_places=6, validators=[MinValueValidator(0)])

    class Meta:
        ordering = ["version", "model_pattern", "kind"]
        constraints = [
            models.UniqueConstraint(fields=["version", "model_pattern", "kind"], name="pricing_price_key"),
            models.CheckConstraint(condition=Q(per_million__gte=0), name="pricing_price_not_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.model_pattern} {self.kind} {self.per_million}/M"


class CostPool(models.Model):
    """A self-hosted cluster: its GPU-hours are shared among the models it serves by
    compute-weighted tokens; what the tokens do not use is idle capacity."""

    name = models.CharField(max_length=200, unique=True)
    currency = models.CharField(max_length=3, choices=Currency.choices, default=Currency.CNY)
    gpus = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    cost_per_gpu_hour = models.DecimalField(max_digits=18, decimal_places=6, validators=[MinValueValidator(0)])
    model_patterns = ArrayField(
        models.CharField(max_length=200, validators=[validate_pattern]),
        help_text="Model names or globs (qwen2.5-*), comma separated.",
    )
    capacity = models.PositiveBigIntegerField(
        validators=[MinValueValidator(1)],
        help_text="Compute-weighted tokens the cluster serves in an hour at 100 % utilisation.",
    )
    w_uncached_prompt = models.DecimalField(max_digits=12, decimal_places=6, default=1)
    w_cached_prompt = models.DecimalField(max_digits=12, decimal_places=6, default="0.1")
    w_output = models.DecimalField(max_digits=12, decimal_places=6, default=4)
    effective_from = models.DateTimeField(validators=[validate_whole_hour])
    effective_to = models.DateTimeField(null=True, blank=True, validators=[validate_whole_hour])
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("cost pool")
        verbose_name_plural = _("cost pools")
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(gpus__gte=1), name="pricing_costpool_gpus"),
            models.CheckConstraint(condition=Q(capacity__gte=1), name="pricing_costpool_capacity"),
            models.CheckConstraint(
                condition=Q(
                    cost_per_gpu_hour__gte=0, w_uncached_prompt__gte=0, w_cached_prompt__gte=0, w_output__gte=0
                ),
                name="pricing_costpool_not_negative",
            ),
            models.CheckConstraint(
                condition=Q(effective_to__isnull=True) | Q(effective_to__gt=models.F("effective_from")),
                name="pricing_costpool_range",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.effective_to is not None and self.effective_from and self.effective_to <= self.effective_from:
            raise ValidationError({"effective_to": "must be after effective_from"})


_ONE_BASIS = Q(price_version__isnull=False, pool__isnull=True) | Q(price_version__isnull=True, pool__isnull=False)


class HourlyCost(models.Model):
    """The cost of an HourlyClass row (summed over rule sets) and what priced it: a price
    version or a cost pool. Hours without a price have no row here (see UnpricedHour)."""

    # Derived rows, written by the hundred thousand on a reprice: like the rollups they price
    # (see HourlyUsage), no foreign-key checks or single-column indexes on what they share with
    # HourlyClass; the price version and the pool, which say what priced a row, keep theirs.
    hour = models.DateTimeField()
    source = models.ForeignKey(CollectorKey, related_name="+", **ROLLUP_REF)
    model = models.ForeignKey(ServedModel, related_name="+", **ROLLUP_REF)
    dims = models.ForeignKey(DimSet, related_name="+", **ROLLUP_REF)
    reason = models.ForeignKey(Reason, related_name="+", **ROLLUP_REF)
    component = models.SmallIntegerField(choices=list(enumerate(COMPONENTS)))
    tokens = models.BigIntegerField()
    # Exact for price-book rows: tokens * per_million (6 places) * 10^-6 has 12 places.
    cost = models.DecimalField(max_digits=30, decimal_places=12)
    currency = models.CharField(max_length=3, choices=Currency.choices)
    price_version = models.ForeignKey(PriceVersion, null=True, on_delete=models.PROTECT, related_name="+")
    pool = models.ForeignKey(CostPool, null=True, on_delete=models.PROTECT, related_name="+")

    class Meta:
        verbose_name = _("hourly cost")
        verbose_name_plural = _("hourly costs")
        constraints = [
            models.UniqueConstraint(
                fields=["hour", "source", "model", "dims", "reason", "component"], name="pricing_hourlycost_key"
            ),
            models.CheckConstraint(condition=_ONE_BASIS, name="pricing_hourlycost_one_basis"),
        ]


class PoolIdleHour(models.Model):
    """One pool-hour once it has ended: its cost, the part allocated to tokens and the idle
    remainder (allocated + idle = pool_cost exactly)."""

    pool = models.ForeignKey(CostPool, on_delete=models.PROTECT, related_name="hours")
    hour = models.DateTimeField()
    currency = models.CharField(max_length=3, choices=Currency.choices)
    pool_cost = models.DecimalField(max_digits=20, decimal_places=2)
    allocated = models.DecimalField(max_digits=20, decimal_places=2)
    idle = models.DecimalField(max_digits=20, decimal_places=2)
    weighted_tokens = models.DecimalField(max_digits=36, decimal_places=6)
    utilisation = models.DecimalField(max_digits=30, decimal_places=6, help_text="weighted tokens / capacity")

    class Meta:
        verbose_name = _("pool idle hour")
        verbose_name_plural = _("pool idle hours")
        ordering = ["-hour", "pool"]
        constraints = [
            models.UniqueConstraint(fields=["pool", "hour"], name="pricing_poolidlehour_key"),
            models.CheckConstraint(condition=Q(allocated__gte=0, idle__gte=0), name="pricing_poolidlehour_parts"),
        ]


class UnpricedHour(models.Model):
    """Tokens of a model and kind in an hour that neither a price nor a pool covered."""

    hour = models.DateTimeField()
    model = models.ForeignKey(ServedModel, on_delete=models.PROTECT, related_name="+")
    kind = models.CharField(max_length=12, choices=Kind.choices)
    tokens = models.BigIntegerField()

    class Meta:
        verbose_name = _("unpriced hour")
        verbose_name_plural = _("unpriced hours")
        constraints = [models.UniqueConstraint(fields=["hour", "model", "kind"], name="pricing_unpricedhour_key")]


class DirtyHour(models.Model):
    """An hour to price again: its classified tokens changed (marked by the statement-level
    trigger on classification_hourlyclass, services.DIRTY_TRIGGER, committed with the change)
    or a price changed from it (`hours_mark_dirty`). Append-only for writers (no unique key, so
    ingest never waits on it); the pricing job deletes what it priced."""

    hour = models.DateTimeField(db_index=True)
