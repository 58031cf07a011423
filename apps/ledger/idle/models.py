"""Who pays for idle capacity (docs/ledger.md, "Idle capacity"): the policy in force and the
lines' reserved shares of the pools. Each setting holds from its month until the next one's, so a
month's books keep the policy they were made with; a closed month's settings do not change."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from apps.ledger.models import Period, validate_month
from apps.pricing.models import CostPool

CLOSED_POLICY_MONTH = "{month} is closed and this {what} applies to it; reopen it (admin, with a reason) first"


def validate_months_open(first: date, until: date | None, what: str) -> None:
    """Refuse a change to a setting that applies from `first` until `until` (excluded; None: on)
    when a month it applies to is closed."""
    closed = Period.objects.filter(month__gte=first, status=Period.Status.CLOSED)
    if until is not None:
        closed = closed.filter(month__lt=until)
    month = closed.order_by("month").values_list("month", flat=True).first()
    if month is not None:
        raise ValidationError(CLOSED_POLICY_MONTH.format(month=f"{month:%Y-%m}", what=what))


class MonthSetting(models.Model):
    """A setting that holds from `month` until the next setting of its series (a later row's
    month). A change to one, or its removal, changes the months from its old and its new month
    until the next setting: refused while one of them is closed."""

    WHAT = "setting"
    month = models.DateField(validators=[validate_month], help_text="The first month it applies to.")

    class Meta:
        abstract = True

    def series(self) -> models.QuerySet[Any]:
        raise NotImplementedError

    def months_open_check(self) -> None:
        stored = type(self)._default_manager.filter(pk=self.pk).first() if self.pk else None
        for row in (self, stored):
            if row is None or row.month is None:
                continue
            later = row.series().filter(month__gt=row.month).exclude(pk=self.pk).order_by("month")
            validate_months_open(row.month, later.values_list("month", flat=True).first(), self.WHAT)


class IdlePolicy(MonthSetting):
    """Who pays for the self-hosted pools' idle capacity, from `month` until the next row's month
    (before the first row: showback). The accrual books each pool-hour's idle by the policy of
    its month; a month's policy is fixed once the month is closed. Audit-logged."""

    class Policy(models.TextChoices):
        SHOWBACK = "showback", "showback: idle stays a platform cost"
        BY_USE = "by_use", "by use: the lines that used the pool in the hour, in proportion"
        RESERVED = "reserved", "by reserved share: each line's reserved share of the pool"

    WHAT = "idle policy"
    month = models.DateField(unique=True, validators=[validate_month], help_text="The first month it applies to.")
    policy = models.CharField(max_length=8, choices=Policy.choices)
    note = models.TextField(blank=True, help_text="Why, e.g. the decision that set it.")
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    changed_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("idle policy")
        verbose_name_plural = _("idle policies")
        ordering = ["-month"]
        constraints = [models.CheckConstraint(condition=Q(month__day=1), name="ledger_idlepolicy_month")]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} on: {self.policy}"

    def series(self) -> models.QuerySet[Any]:
        return IdlePolicy.objects.all()

    def clean(self) -> None:
        self.months_open_check()


class ReservedShare(MonthSetting):
    """A business line's reserved share of a pool, from `month` until the line's next row for the
    pool (a share of 0 ends it). Under the reserved-share idle policy each pool-hour's idle is
    shared by these; what the shares leave of 100 % stays a platform cost. Audit-logged."""

    pool = models.ForeignKey(CostPool, on_delete=models.PROTECT, related_name="+")
    WHAT = "reserved share"
    business_line = models.CharField(max_length=256)
    percent = models.DecimalField(
        max_digits=7, decimal_places=4, help_text="0 to 100; a pool's shares add up to 100 at most."
    )
    note = models.TextField(blank=True)
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    changed_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("reserved share")
        verbose_name_plural = _("reserved shares")
        ordering = ["pool", "-month", "business_line"]
        constraints = [
            models.UniqueConstraint(fields=["pool", "business_line", "month"], name="ledger_reservedshare_key"),
            models.CheckConstraint(condition=Q(month__day=1), name="ledger_reservedshare_month"),
            models.CheckConstraint(condition=Q(percent__gte=0, percent__lte=100), name="ledger_reservedshare_percent"),
        ]

    def __str__(self) -> str:
        return f"{self.business_line} {self.percent} % of {self.pool_id} from {self.month:%Y-%m}"

    def clean(self) -> None:
        if self.percent is not None and not 0 <= self.percent <= 100:
            raise ValidationError({"percent": "a share is 0 to 100 %"})
        if self.pool_id is None or self.month is None:
            return
        self.months_open_check()
        self._check_sums()

    def series(self) -> models.QuerySet[Any]:
        return ReservedShare.objects.filter(pool_id=self.pool_id, business_line=self.business_line)

    def _check_sums(self) -> None:
        """The pool's shares, with this one, add up to 100 % at most in every month it applies to."""
        rows = [*ReservedShare.objects.filter(pool_id=self.pool_id).exclude(pk=self.pk), self]
        for month in sorted({r.month for r in rows if r.month >= self.month}):
            total = sum(reserved_in_force(rows, month).values(), start=0)
            if total > 100:
                raise ValidationError(f"the pool's reserved shares add up to {total} % from {month:%Y-%m}: 100 at most")


def reserved_in_force(rows: Iterable[ReservedShare], month: date) -> dict[str, Decimal]:
    """Each line's share in force in `month`: its latest row not after it (zero shares left out)."""
    latest: dict[str, ReservedShare] = {}
    for row in rows:
        if row.month <= month and (row.business_line not in latest or row.month > latest[row.business_line].month):
            latest[row.business_line] = row
    return {line: row.percent for line, row in latest.items() if row.percent}
