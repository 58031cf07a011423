"""Suppliers and their column mappings, imported bills with their lines and refused rows, and
the adjusting entries proposed to explain a bill's differences."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from apps.pricing.models import CostPool, Currency


class Supplier(models.Model):
    """Who sends a bill, and how to read it: the column mapping is set once, so each month's
    import is just the file. A hosted supplier is matched against the priced rollup of the
    models it serves (`model_patterns`); a GPU pool supplier against its pool's hourly cost."""

    class Kind(models.TextChoices):
        HOSTED = "hosted", "hosted API (priced usage)"
        POOL = "pool", "GPU pool (pool cost)"

    class DecimalSeparator(models.TextChoices):
        POINT = ".", "1,234.56"
        COMMA = ",", "1.234,56"

    name = models.CharField(max_length=100, unique=True, help_text="Used on the command line: import_bill NAME ...")
    kind = models.CharField(max_length=6, choices=Kind.choices, default=Kind.HOSTED)
    currency = models.CharField(max_length=3, choices=Currency.choices, default=Currency.CNY)
    model_patterns = ArrayField(
        models.CharField(max_length=200),
        default=list,
        blank=True,
        help_text="Hosted: the platform's model names or globs this supplier serves (gpt-4o*).",
    )
    model_aliases = models.JSONField(
        default=dict, blank=True, help_text='The bill\'s model name -> the platform\'s, e.g. {"GPT-4o": "gpt-4o"}.'
    )
    pool = models.ForeignKey(
        CostPool, null=True, blank=True, on_delete=models.PROTECT, related_name="+", help_text="GPU pool suppliers."
    )
    key_dim = models.CharField(
        max_length=64, blank=True, help_text="The record dimension the bill's key/project column matches (project)."
    )
    cost_centre = models.CharField(
        max_length=256, blank=True, help_text="Cost centre of differences no single business line explains."
    )
    # The column mapping: header names in the bill's CSV.
    col_day = models.CharField(max_length=100, default="date")
    col_model = models.CharField(max_length=100, blank=True, default="model")
    col_input_tokens = models.CharField(max_length=100, blank=True)
    col_output_tokens = models.CharField(max_length=100, blank=True)
    col_amount = models.CharField(max_length=100, default="amount")
    col_currency = models.CharField(max_length=100, blank=True)
    col_key = models.CharField(max_length=100, blank=True, help_text="The key or project column, if matched by key.")
    date_format = models.CharField(max_length=40, default="%Y-%m-%d", help_text="strptime format of the day column.")
    decimal_separator = models.CharField(max_length=1, choices=DecimalSeparator.choices, default=".")
    delimiter = models.CharField(max_length=1, default=",")
    # Tolerances: a difference is reported when it passes both the absolute and the relative one.
    amount_abs = models.DecimalField(max_digits=20, decimal_places=6, default=Decimal("0.01"))
    amount_rel = models.DecimalField(max_digits=9, decimal_places=6, default=Decimal(0))
    tokens_abs = models.BigIntegerField(default=0)
    tokens_rel = models.DecimalField(max_digits=9, decimal_places=6, default=Decimal(0))
    finding_threshold = models.DecimalField(
        max_digits=20, decimal_places=2, default=Decimal("100.00"), help_text="Unreconciled amount raising a finding."
    )
    active = models.BooleanField(default=True)

    class Meta:
        verbose_name = _("supplier")
        verbose_name_plural = _("suppliers")
        db_table = "ledger_supplier"  # kept from when the ledger held it
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind="hosted") | Q(pool__isnull=False), name="ledger_supplier_pool_has_pool"
            ),
            models.CheckConstraint(
                condition=Q(amount_abs__gte=0, amount_rel__gte=0, tokens_abs__gte=0, tokens_rel__gte=0),
                name="ledger_supplier_tolerances",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.kind == self.Kind.POOL and self.pool_id is None:
            raise ValidationError({"pool": "a GPU pool supplier names its cost pool"})
        if self.kind == self.Kind.HOSTED and not self.model_patterns:
            raise ValidationError({"model_patterns": "a hosted supplier names the models it serves"})


class Bill(models.Model):
    """One import of a supplier's month. An accepted import holds the month's lines and replaces
    the one before it (kept as `replaced`, without lines); a refused one holds only its refused
    rows, each with the reason, and changes nothing."""

    class State(models.TextChoices):
        ACCEPTED = "accepted"
        REFUSED = "refused"
        REPLACED = "replaced"

    supplier = models.ForeignKey(Supplier, on_delete=models.PROTECT, related_name="bills")
    month = models.DateField()
    state = models.CharField(max_length=8, choices=State.choices)
    filename = models.CharField(max_length=300, blank=True)
    sha256 = models.CharField(max_length=64)
    rows = models.PositiveIntegerField(default=0, help_text="Data rows in the file.")
    currency = models.CharField(max_length=3, choices=Currency.choices)
    total = models.DecimalField(max_digits=20, decimal_places=2, default=Decimal(0))
    imported_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT)
    imported_at = models.DateTimeField(db_default=Now())

    class Meta:
        verbose_name = _("bill")
        verbose_name_plural = _("bills")
        db_table = "ledger_bill"  # kept from when the ledger held it
        ordering = ["-imported_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["supplier", "month"], condition=Q(state="accepted"), name="ledger_bill_one_accepted"
            ),
            models.CheckConstraint(condition=Q(month__day=1), name="ledger_bill_month"),
        ]

    def __str__(self) -> str:
        return f"{self.supplier} {self.month:%Y-%m} ({self.state})"


class BillLine(models.Model):
    """A row of an accepted bill, as read through the supplier's mapping (the model already
    translated by its aliases; tokens None when the bill has no such column)."""

    bill = models.ForeignKey(Bill, on_delete=models.CASCADE, related_name="lines")
    row = models.PositiveIntegerField(help_text="Line number in the file (the header is line 1).")
    day = models.DateField()
    model = models.CharField(max_length=200)
    key = models.CharField(max_length=256, blank=True)
    input_tokens = models.BigIntegerField(null=True)
    output_tokens = models.BigIntegerField(null=True)
    amount = models.DecimalField(max_digits=20, decimal_places=6)

    class Meta:
        db_table = "ledger_billline"  # kept from when the ledger held it
        ordering = ["bill", "row"]


class BillRowError(models.Model):
    """A row of a refused import: its text as it was in the file and why it was refused."""

    bill = models.ForeignKey(Bill, on_delete=models.CASCADE, related_name="errors")
    row = models.PositiveIntegerField()
    raw = models.TextField()
    reason = models.TextField()

    class Meta:
        db_table = "ledger_billrowerror"  # kept from when the ledger held it
        ordering = ["bill", "row"]


class BillAdjustment(models.Model):
    """An adjusting entry proposed to explain differences of a supplier's month (one difference
    or all of them), posted when a second finance user approves it: into the first open month
    from the bill's month on, as one balanced journal entry."""

    class State(models.TextChoices):
        PROPOSED = "proposed"
        POSTED = "posted"
        REJECTED = "rejected"

    supplier = models.ForeignKey(Supplier, on_delete=models.PROTECT, related_name="adjustments")
    month = models.DateField(help_text="The bill's month.")
    state = models.CharField(max_length=8, choices=State.choices, default=State.PROPOSED)
    currency = models.CharField(max_length=3, choices=Currency.choices)
    amount = models.DecimalField(max_digits=20, decimal_places=2, help_text="Bill minus platform, summed.")
    lines = models.JSONField(
        default=list, help_text="[{day, model, key, business_line, amount, tokens}]: what each difference adds."
    )
    note = models.TextField(blank=True)
    proposed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    proposed_at = models.DateTimeField(db_default=Now())
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.TextField(blank=True)
    entry = models.ForeignKey("ledger.JournalEntry", null=True, blank=True, on_delete=models.PROTECT, related_name="+")

    class Meta:
        verbose_name = _("bill adjustment")
        verbose_name_plural = _("bill adjustments")
        db_table = "ledger_billadjustment"  # kept from when the ledger held it
        ordering = ["-proposed_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(month__day=1), name="ledger_billadjustment_month"),
            models.CheckConstraint(
                condition=Q(state="posted", entry__isnull=False) | (~Q(state="posted") & Q(entry__isnull=True)),
                name="ledger_billadjustment_entry",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.supplier} {self.month:%Y-%m} {self.amount} {self.currency} ({self.state})"
