"""Exchange rates into the functional currency, a day and a pair at a time, and the days whose
costs found no rate (apps/currencies/rates.py). The tables keep the names they had in the ledger."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from apps.pricing.models import Currency


class ExchangeRate(models.Model):
    """What one unit of `currency` was worth in `to` on an accounting day, and who says so.
    Accrual converts a day's costs priced in another currency than the functional one at that
    day's rate (apps/currencies/rates.py, docs/currencies.md). Audit-logged."""

    day = models.DateField(help_text="The accounting day (in the accounting time zone).")
    currency = models.CharField(max_length=3, choices=Currency.choices, help_text="The priced currency, e.g. USD.")
    to = models.CharField(max_length=3, choices=Currency.choices, help_text="The functional currency, e.g. CNY.")
    rate = models.DecimalField(max_digits=20, decimal_places=10, help_text="Units of `to` per one unit of `currency`.")
    source = models.CharField(max_length=200, help_text="Where the rate comes from, e.g. PBOC central parity.")
    entered_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    entered_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("exchange rate")
        verbose_name_plural = _("exchange rates")
        db_table = "ledger_exchangerate"  # kept from when the ledger held it
        ordering = ["-day", "currency", "to"]
        constraints = [
            models.UniqueConstraint(fields=["day", "currency", "to"], name="ledger_rate_key"),
            models.CheckConstraint(condition=Q(rate__gt=0), name="ledger_rate_positive"),
            models.CheckConstraint(condition=~Q(currency=F("to")), name="ledger_rate_pair"),
            models.CheckConstraint(condition=~Q(source=""), name="ledger_rate_source"),
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.pair} {self.rate}"

    @property
    def pair(self) -> str:
        return f"{self.currency}/{self.to}"


class MissingRate(models.Model):
    """A day whose costs priced in `currency` found no rate into the functional currency `to`:
    accrual left them unbooked (never booked as zero) and noted them here, with what is waiting;
    the next accrual after the rate is entered books them and removes the row."""

    day = models.DateField()
    currency = models.CharField(max_length=3, choices=Currency.choices)
    to = models.CharField(max_length=3, choices=Currency.choices)
    amount = models.DecimalField(max_digits=30, decimal_places=12, help_text="The unbooked cost, in `currency`.")
    tokens = models.BigIntegerField(default=0)
    noted_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "ledger_missingrate"  # kept from when the ledger held it
        ordering = ["day", "currency"]
        constraints = [models.UniqueConstraint(fields=["day", "currency", "to"], name="ledger_missingrate_key")]

    def __str__(self) -> str:
        return f"{self.day} {self.currency}/{self.to} missing"
