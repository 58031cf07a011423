"""The books: chart of accounts, mapping rules, elastic windows, monthly periods, the journal
(entries and lines), month-end findings and their reviews, cost centres, the close.

The journal tables and the period table are guarded by PostgreSQL triggers
(migrations/ledger/0002_triggers.py, 0004_closed_periods_always.py): rows of a closed period
cannot be inserted, updated or deleted, nor the plans' budgets and revenue of its month
(apps/plans/, whose tables the trigger guards by name), and a closed period opens again only
with a recorded reopen event.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Func, Q
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from apps.classification.engine import CLASSES
from apps.ingest.models import ServedModel
from apps.pricing.models import CostPool, Currency


def validate_month(value: date) -> None:
    if value.day != 1:
        raise ValidationError("a period is a month: give its first day")


class Account(models.Model):
    """An account of the chart. `role` ties an account to what the ledger books there (the
    month-end checks and the credit side read it), so codes and names stay editable."""

    class Kind(models.TextChoices):
        EXPENSE = "expense"
        LIABILITY = "liability"

    class Role(models.TextChoices):
        EFFECTIVE = "effective"
        STRUCTURAL = "structural"
        ELASTIC = "elastic"
        WASTE = "waste"
        SHADOW = "shadow"
        IDLE = "idle"
        PAYABLE = "payable"
        BILL_DIFFERENCE = "bill_diff"

    code = models.CharField(max_length=20, unique=True)
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    role = models.CharField(max_length=12, choices=Role.choices, blank=True)
    description = models.TextField(blank=True)
    active = models.BooleanField(default=True)

    class Meta:
        verbose_name = _("account")
        verbose_name_plural = _("accounts")
        ordering = ["code"]
        constraints = [
            models.UniqueConstraint(fields=["role"], condition=~Q(role=""), name="ledger_account_one_per_role"),
            models.CheckConstraint(
                condition=~Q(role="payable") | Q(kind="liability"), name="ledger_account_payable_is_liability"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.code} {self.name}"


class MappingRule(models.Model):
    """Priced rows matching every condition set here are booked to `account`; the first active
    rule by priority wins. Each change is kept as a revision (by a database trigger), and
    journal lines name the rule revisions behind them."""

    class AppliesTo(models.TextChoices):
        USAGE = "usage", "priced usage"
        IDLE = "idle", "pool idle capacity"

    class Elastic(models.TextChoices):
        ANY = "any"
        INSIDE = "inside", "inside an elastic window"
        OUTSIDE = "outside", "outside elastic windows"

    priority = models.PositiveIntegerField(help_text="Lower first.")
    name = models.CharField(max_length=100)
    applies_to = models.CharField(max_length=5, choices=AppliesTo.choices, default=AppliesTo.USAGE)
    token_class = models.CharField(max_length=10, blank=True, choices=[(c, c) for c in CLASSES])
    reason = models.CharField(max_length=48, blank=True, help_text="class.reason, e.g. effective.structural")
    dims = models.JSONField(default=dict, blank=True, help_text='Rollup dims that must all equal, e.g. {"team": "x"}')
    elastic = models.CharField(max_length=7, choices=Elastic.choices, default=Elastic.ANY)
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="+")
    active = models.BooleanField(default=True)
    revision = models.PositiveIntegerField(default=1, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("mapping rule")
        verbose_name_plural = _("mapping rules")
        ordering = ["priority", "id"]

    def __str__(self) -> str:
        return f"{self.priority} {self.name} -> {self.account.code}"

    def clean(self) -> None:
        if not isinstance(self.dims, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.dims.items()
        ):
            raise ValidationError({"dims": "an object of dim name to value, both strings"})
        if self.reason and self.token_class and not self.reason.startswith(f"{self.token_class}."):
            raise ValidationError({"reason": "a reason of another class than token_class never matches"})


class MappingRuleRevision(models.Model):
    """A mapping rule as it was at a revision (written by a trigger on every insert and update)."""

    rule_id = models.BigIntegerField(db_index=True)
    revision = models.PositiveIntegerField()
    snapshot = models.JSONField()
    changed_at = models.DateTimeField(db_default=Now())

    class Meta:
        verbose_name = _("mapping rule revision")
        verbose_name_plural = _("mapping rule revisions")
        constraints = [models.UniqueConstraint(fields=["rule_id", "revision"], name="ledger_rulerevision_key")]


class ElasticWindow(models.Model):
    """A declared campaign or peak period of a business line: its tokens go to elastic expense."""

    class Kind(models.TextChoices):
        CAMPAIGN = "campaign"
        PEAK = "peak"

    business_line = models.CharField(max_length=256)
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.CAMPAIGN)
    start = models.DateTimeField()
    end = models.DateTimeField()
    note = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("elastic window")
        verbose_name_plural = _("elastic windows")
        ordering = ["-start"]
        indexes = [models.Index(fields=["business_line", "start"], name="ledger_window_bl_start")]
        constraints = [models.CheckConstraint(condition=Q(end__gt=F("start")), name="ledger_window_range")]

    def __str__(self) -> str:
        return f"{self.business_line}: {self.name} ({self.start:%Y-%m-%d %H:%M} .. {self.end:%Y-%m-%d %H:%M})"


class ConfigVersion(models.Model):
    """One row; bumped by triggers whenever mapping rules, windows or accounts change, so the
    accrual job knows every day must be looked at again."""

    id = models.SmallIntegerField(primary_key=True, default=1)
    version = models.BigIntegerField(default=1)


class Period(models.Model):
    """A month. Closed periods are locked in the database (see the module docstring)."""

    class Status(models.TextChoices):
        OPEN = "open"
        CLOSED = "closed"

    month = models.DateField(unique=True, validators=[validate_month])
    status = models.CharField(max_length=6, choices=Status.choices, default=Status.OPEN)
    # The accounting zone its days were last accrued in: an open month takes the current one
    # (a change marks it for re-accrual), a closed month keeps the one it was closed in.
    tz = models.CharField(max_length=64, default="UTC")
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT)

    class Meta:
        verbose_name = _("period")
        verbose_name_plural = _("periods")
        ordering = ["-month"]
        constraints = [models.CheckConstraint(condition=Q(month__day=1), name="ledger_period_first_day")]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} ({self.status})"

    @property
    def label(self) -> str:
        return f"{self.month:%Y-%m}"

    @classmethod
    def first_closed(cls, months: Iterable[date | None]) -> date | None:
        """The earliest of these months that is closed, if any."""
        firsts = {date(m.year, m.month, 1) for m in months if m is not None}
        closed = cls.objects.filter(month__in=firsts, status=cls.Status.CLOSED).order_by("month")
        return closed.values_list("month", flat=True).first()


class PeriodEvent(models.Model):
    """A close or reopen, append-only. The period trigger lets a closed period open again only
    in a transaction that recorded a reopen event for it (same `txid`)."""

    class Action(models.TextChoices):
        CLOSE = "close"
        REOPEN = "reopen"

    period = models.ForeignKey(Period, on_delete=models.PROTECT, related_name="events")
    action = models.CharField(max_length=6, choices=Action.choices)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT)
    note = models.TextField(blank=True)
    at = models.DateTimeField(db_default=Now())
    txid = models.BigIntegerField(
        db_default=Func(function="txid_current", output_field=models.BigIntegerField()), editable=False
    )

    class Meta:
        ordering = ["-at", "-id"]


class JournalEntry(models.Model):
    """A balanced entry: the accrual of one day in one currency (in the day's month), or an
    adjustment of a day of a closed month, posted in a later open month."""

    class Kind(models.TextChoices):
        ACCRUAL = "accrual"
        ADJUSTMENT = "adjustment"
        # A supplier bill's difference, posted on approval (apps/reconciliation/): accrual
        # never moves or replaces these, and several may share a day.
        BILL = "bill", "bill adjustment"

    kind = models.CharField(max_length=10, choices=Kind.choices)
    period = models.ForeignKey(Period, to_field="month", db_column="period", on_delete=models.PROTECT, related_name="+")
    day = models.DateField(help_text="The usage day the entry books.")
    adjusts = models.DateField(null=True, blank=True, help_text="For an adjustment: the closed month it adjusts.")
    currency = models.CharField(max_length=3, choices=Currency.choices)
    memo = models.CharField(max_length=300, blank=True)
    basis = models.JSONField(default=dict, help_text="What the entry was computed from (config version, fingerprint).")
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        verbose_name = _("journal entry")
        verbose_name_plural = _("journal entries")
        ordering = ["period", "day", "kind", "currency"]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "period", "day", "currency"], condition=~Q(kind="bill"), name="ledger_entry_key"
            ),
            # Lines reference (entry, period), so a line's period is its entry's.
            models.UniqueConstraint(fields=["id", "period"], name="ledger_entry_id_period"),
            models.CheckConstraint(
                condition=Q(kind="accrual", adjusts__isnull=True)
                | Q(kind="adjustment", adjusts__isnull=False)
                | Q(kind="bill"),
                name="ledger_entry_adjusts",
            ),
        ]
        indexes = [models.Index(fields=["day"], name="ledger_entry_day")]

    def __str__(self) -> str:
        label = f"adjusting {self.adjusts:%Y-%m} " if self.adjusts else ""
        return f"{self.kind} {label}{self.day} {self.currency} in {self.period_id:%Y-%m}"


class JournalLine(models.Model):
    """One side of an entry for (account, cost centre, model or pool). `period` and `day` repeat
    the entry's so the lock trigger and period reports need no join."""

    entry = models.ForeignKey(JournalEntry, on_delete=models.CASCADE, related_name="lines")
    period = models.ForeignKey(Period, to_field="month", db_column="period", on_delete=models.PROTECT, related_name="+")
    day = models.DateField()
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="+")
    cost_centre = models.CharField(max_length=256)
    model = models.ForeignKey(ServedModel, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    pool = models.ForeignKey(CostPool, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    currency = models.CharField(max_length=3, choices=Currency.choices)
    debit = models.DecimalField(max_digits=20, decimal_places=2, default=0)
    credit = models.DecimalField(max_digits=20, decimal_places=2, default=0)
    tokens = models.BigIntegerField(default=0)
    basis = models.JSONField(default=dict, help_text="Reasons, price versions, pools, rule revisions, exact amount.")
    # A cost priced in another currency than the functional one (a USD price book): the amount
    # as priced (signed, debit > 0, exact), its currency, and the day's rate that converted it
    # with the rate's source. Null on lines priced in the functional currency.
    original_currency = models.CharField(max_length=3, choices=Currency.choices, null=True, blank=True)
    original_amount = models.DecimalField(max_digits=30, decimal_places=12, null=True, blank=True)
    rate = models.DecimalField(max_digits=20, decimal_places=10, null=True, blank=True)
    rate_source = models.CharField(max_length=200, null=True, blank=True)

    class Meta:
        ordering = ["entry", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(debit__gte=0, credit__gte=0) & (Q(debit=0) | Q(credit=0)), name="ledger_line_one_side"
            ),
            models.CheckConstraint(
                condition=Q(original_currency__isnull=True, original_amount__isnull=True, rate__isnull=True)
                | Q(original_currency__isnull=False, original_amount__isnull=False, rate__gt=0),
                name="ledger_line_original",
            ),
        ]
        indexes = [
            models.Index(fields=["period", "account", "cost_centre"], name="ledger_line_period_acct_cc"),
            models.Index(fields=["day", "currency"], name="ledger_line_day"),
        ]


class AccrualDay(models.Model):
    """What the accrual job last booked a day from: a fingerprint of its priced rows and the
    mapping config, and its exact totals per currency (the rounding carry of later days)."""

    day = models.DateField(primary_key=True)
    fingerprint = models.CharField(max_length=200)
    exact = models.JSONField(default=dict, help_text="currency -> exact total (string)")
    booked_at = models.DateTimeField(auto_now=True)


class DirtyDay(models.Model):
    """A day whose priced rows changed: the UTC date of an hour a statement on pricing_hourlycost
    or pricing_poolidlehour touched (the trigger declared as accrual.DIRTY_TRIGGER, committed with
    the change), or a day `books_zone_sync` or a rate change marked. Append-only for writers (no
    unique key, so pricing never waits on it); `recent_accrue` books the months around each and
    deletes what it read. Read and written through accrual.DIRTY."""

    day = models.DateField(db_index=True)


class DayReading(models.Model):
    """A reading of one accounting day's rows that a page would otherwise read again at every view
    (apps/ledger/readings.py): the waste reconciliation's, the tokens figure's. Kept under `key`
    (the zone, the day's accrual fingerprint and its unpriced hours) for a day the journal holds as
    its priced rows stand, and read back only while the key is the day's key now."""

    day = models.DateField()
    kind = models.CharField(max_length=16)
    key = models.CharField(max_length=400)
    rows = models.JSONField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["day", "kind", "key"], name="ledger_dayreading_key")]


class Finding(models.Model):
    """A month-end check's result, stored at close; the alerts app delivers undelivered ones."""

    class Kind(models.TextChoices):
        EFFECTIVE_SHARE_LOW = "effective_share_low"
        ELASTIC_OVER_REVENUE = "elastic_over_revenue"
        REVENUE_MISSING = "revenue_missing"
        STRUCTURAL_ZERO = "structural_zero"
        BILL_UNRECONCILED = "bill_unreconciled"

    class Action(models.TextChoices):
        NOTIFY_PRODUCT_OWNER = "notify_product_owner"
        DEGRADATION_AUDIT = "degradation_audit"
        ENTER_REVENUE = "enter_revenue"
        TECH_DEBT_WARNING = "tech_debt_warning"
        RECONCILE_BILL = "reconcile_bill"

    kind = models.CharField(max_length=24, choices=Kind.choices)
    action = models.CharField(max_length=24, choices=Action.choices)
    period = models.DateField()
    business_line = models.CharField(max_length=256, help_text="A cost centre; empty for the whole company.")
    figures = models.JSONField(default=dict)
    message = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("finding")
        verbose_name_plural = _("findings")
        ordering = ["-period", "kind", "business_line"]
        constraints = [
            models.UniqueConstraint(fields=["kind", "period", "business_line"], name="ledger_finding_key"),
        ]

    def __str__(self) -> str:
        return f"{self.period:%Y-%m} {self.kind} {self.business_line or '(all)'}"


class FindingReview(models.Model):
    """A named person's word on a month-end finding: resolved (the action was taken) or accepted
    as it stands, with a reason. Kept by the finding's key (month, kind, business line), apart
    from the finding itself: before the close a finding is computed live, not stored, and the
    close stores it anew. A month is submitted for closing only once each of its findings has one."""

    class Decision(models.TextChoices):
        RESOLVED = "resolved"
        ACCEPTED = "accepted"

    period = models.DateField(validators=[validate_month])
    kind = models.CharField(max_length=24, choices=Finding.Kind.choices)
    business_line = models.CharField(max_length=256, blank=True, help_text="Empty for the whole company.")
    decision = models.CharField(max_length=8, choices=Decision.choices)
    note = models.TextField(blank=True, help_text="What was done, or why the finding is accepted.")
    figures = models.JSONField(default=dict, help_text="The finding's figures as the reviewer saw them.")
    reviewed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    reviewed_at = models.DateTimeField(db_default=Now())

    class Meta:
        ordering = ["-period", "kind", "business_line"]
        constraints = [
            models.UniqueConstraint(fields=["period", "kind", "business_line"], name="ledger_finding_review_key"),
            models.CheckConstraint(condition=Q(period__day=1), name="ledger_finding_review_month"),
            # Accepting a finding as it stands needs a reason.
            models.CheckConstraint(condition=Q(decision="resolved") | ~Q(note=""), name="ledger_finding_review_reason"),
        ]

    def __str__(self) -> str:
        return f"{self.period:%Y-%m} {self.kind} {self.business_line or '(all)'}: {self.decision}"


class CostCentre(models.Model):
    """A business line as finance knows it: its cost-centre code and name. Journal lines carry
    the business line's key in `cost_centre`; pages and spreadsheets show the code and name
    (the key itself where none is set)."""

    business_line = models.CharField(max_length=256, unique=True, help_text="The business line's key in records.")
    code = models.CharField(max_length=20, blank=True, help_text="Finance's cost-centre code, e.g. CC-1001.")
    name = models.CharField(max_length=200)
    active = models.BooleanField(default=True)

    class Meta:
        verbose_name = _("cost centre")
        verbose_name_plural = _("cost centres")
        ordering = ["code", "business_line"]

    def __str__(self) -> str:
        return f"{self.code} {self.name}".strip()


class CloseRequest(models.Model):
    """A month's close as prepared by one finance user and approved by another: the checklist
    as it stood when submitted, the preparer's note, then the approver's decision. Approval
    closes the period (`period_close`); a rejected or withdrawn request leaves it open."""

    class State(models.TextChoices):
        SUBMITTED = "submitted"
        APPROVED = "approved"
        REJECTED = "rejected"
        WITHDRAWN = "withdrawn"

    month = models.DateField(validators=[validate_month])
    state = models.CharField(max_length=9, choices=State.choices, default=State.SUBMITTED)
    checklist = models.JSONField(default=list, help_text="The checklist's items as submitted.")
    prepared_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    note = models.TextField(blank=True)
    submitted_at = models.DateTimeField(db_default=Now())
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decision_note = models.TextField(blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("close request")
        verbose_name_plural = _("close requests")
        ordering = ["-submitted_at", "-id"]
        constraints = [
            # At most one request of a month waits for a decision.
            models.UniqueConstraint(
                fields=["month"], condition=Q(state="submitted"), name="ledger_close_request_one_open"
            ),
            models.CheckConstraint(condition=Q(month__day=1), name="ledger_close_request_month"),
        ]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} close ({self.state})"


# Models of the ledger's rooms, loaded with the ledger's (their app is the ledger): who pays for
# idle capacity (apps/ledger/idle/).
from apps.ledger.idle.models import IdlePolicy, ReservedShare  # noqa: E402, F401
