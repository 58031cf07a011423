"""Adjusting entries that explain a bill's differences: one finance user proposes them (one
difference, or every open difference of a supplier's month), a different one approves, which
posts one balanced entry (kind `bill`) into the first open month from the bill's month on, never
a closed one. Bill above the platform debits the bill-difference expense account and credits
the accrued payable; below, the reverse. Token differences travel as the lines' tokens.

A bill in another currency than the ledger's functional one is reconciled in its own currency
and posted converted at the rate of the entry's day, each line keeping the bill's amount, its
currency, the rate and its source, as accrual does (apps/currencies/rates.py); without that
day's rate the approval is refused, naming the day and pair.

Like the close, proposing and deciding are company-wide acts: they need the finance or admin role
and a user who sees every business line. Proposals and decisions are audit-logged (the model is
audited: apps.reconciliation.apps)."""

from __future__ import annotations

from collections import defaultdict
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from apps.accounts.scopes import finance_act_check
from apps.common.buckets import month_days, month_of, next_month
from apps.currencies.rates import DayRate, functional_currency, rates_between
from apps.ingest.models import ServedModel
from apps.ledger.models import Account, JournalEntry, JournalLine, Period
from apps.ledger.rounding import round_half_up
from apps.pricing.models import MINOR_UNITS
from apps.reconciliation.matching import Difference, Key, supplier_reconcile
from apps.reconciliation.models import BillAdjustment, Supplier

NEEDS_FINANCE = gettext_noop("bill adjustments need the finance or admin role")
COMPANY_ACT = gettext_noop(
    "bill adjustments are a company-wide act: they need a user who sees every business line "
    "(yours is limited to some lines)"
)
NOTHING_OPEN = gettext_noop("{supplier} {month} has no open difference to adjust")
NO_SUCH_DIFFERENCE = gettext_noop("{supplier} {month} has no open difference on {day} for {model}")
ALREADY_WAITING = gettext_noop("{supplier} {month} already has an adjustment waiting for approval")
NOT_WAITING = gettext_noop("this adjustment is not waiting for approval (it is {state})")
OWN_PROPOSAL = gettext_noop("you proposed this adjustment: a different finance user (or an admin) approves it")
REJECT_NEEDS_NOTE = gettext_noop("say why the adjustment is rejected (the proposer reads it)")
NO_RATE = gettext_noop("no {pair} rate for {day}: enter it (finance, exchange rates) before posting this adjustment")

DIFFERENCE_ACCOUNT = ("6401.09", "Supplier bill differences")


class AdjustmentError(ValueError):
    pass


def _lines(differences: list[Difference]) -> list[dict[str, Any]]:
    """One line per (day, model, key): the money and tokens its open differences leave."""
    by_key: dict[Key, dict[str, Any]] = {}
    for diff in differences:
        line = by_key.setdefault(
            (diff.day, diff.model, diff.key),
            {
                "day": diff.day.isoformat(),
                "model": diff.model,
                "key": diff.key,
                "business_line": diff.business_line,
                "amount": Decimal(0),
                "tokens": 0,
            },
        )
        if diff.kind != "tokens":
            line["amount"] = diff.amount_diff - diff.adjusted_amount
        if diff.kind != "amount" and diff.tokens_diff is not None:
            line["tokens"] = diff.tokens_diff - diff.adjusted_tokens
    places = MINOR_UNITS.get(differences[0].currency, 2) if differences else 2  # type: ignore[call-overload]
    return [{**line, "amount": str(round_half_up(line["amount"], places))} for line in by_key.values()]


def adjustment_propose(
    *,
    supplier: Supplier,
    month: date,
    user: Any,
    day: date | None = None,
    model: str | None = None,
    key: str = "",
    note: str = "",
) -> BillAdjustment:
    """Propose the entry that explains the open differences of `supplier`'s month, or only the
    one of (day, model, key) when `day` is given."""
    finance_act_check(user, refused=NEEDS_FINANCE, company_wide=COMPANY_ACT)
    month, label = month_of(month), f"{month_of(month):%Y-%m}"
    with transaction.atomic():
        Supplier.objects.select_for_update().get(pk=supplier.pk)
        waiting = BillAdjustment.objects.filter(supplier=supplier, month=month, state=BillAdjustment.State.PROPOSED)
        if waiting.exists():
            raise AdjustmentError(_(ALREADY_WAITING).format(supplier=supplier.name, month=label))
        found = supplier_reconcile(supplier=supplier, month=month).open
        if day is not None:
            found = [d for d in found if (d.day, d.model, d.key) == (day, model, key)]
            if not found:
                raise AdjustmentError(
                    _(NO_SUCH_DIFFERENCE).format(supplier=supplier.name, month=label, day=day, model=model)
                )
        if not found:
            raise AdjustmentError(_(NOTHING_OPEN).format(supplier=supplier.name, month=label))
        lines = _lines(found)
        return BillAdjustment.objects.create(
            supplier=supplier,
            month=month,
            currency=supplier.currency,
            amount=sum((Decimal(line["amount"]) for line in lines), Decimal(0)),
            lines=lines,
            note=note.strip(),
            proposed_by=user,
        )


def _waiting(adjustment_id: int) -> BillAdjustment:
    found = BillAdjustment.objects.select_for_update(of=("self",)).select_related("supplier__pool")
    adjustment = found.get(pk=adjustment_id)
    if adjustment.state != BillAdjustment.State.PROPOSED:
        raise AdjustmentError(_(NOT_WAITING).format(state=adjustment.state))
    return adjustment


def adjustment_approve(*, adjustment_id: int, user: Any, note: str = "") -> BillAdjustment:
    """Post the proposed adjustment (see the module docstring), by a user other than its proposer."""
    finance_act_check(user, refused=NEEDS_FINANCE, company_wide=COMPANY_ACT)
    with transaction.atomic():
        adjustment = _waiting(adjustment_id)
        if adjustment.proposed_by_id == user.pk:
            raise PermissionDenied(_(OWN_PROPOSAL))
        adjustment.entry = _post(adjustment)
        return _decide(adjustment, BillAdjustment.State.POSTED, user, note)


def adjustment_reject(*, adjustment_id: int, user: Any, note: str) -> BillAdjustment:
    finance_act_check(user, refused=NEEDS_FINANCE, company_wide=COMPANY_ACT)
    if not note.strip():
        raise AdjustmentError(_(REJECT_NEEDS_NOTE))
    with transaction.atomic():
        adjustment = _waiting(adjustment_id)
        if adjustment.proposed_by_id == user.pk:
            raise PermissionDenied(_(OWN_PROPOSAL))
        return _decide(adjustment, BillAdjustment.State.REJECTED, user, note)


def _decide(adjustment: BillAdjustment, state: str, user: Any, note: str) -> BillAdjustment:
    adjustment.state, adjustment.decided_by, adjustment.decision_note = state, user, note.strip()
    adjustment.decided_at = timezone.now()
    adjustment.save()
    return adjustment


# --- posting -------------------------------------------------------------------------------------


def first_open_month(month: date) -> date:
    """The first month from `month` on whose period is open (made open where it has none),
    its row locked so a close waits for the posting."""
    while True:
        Period.objects.get_or_create(month=month)
        period = Period.objects.select_for_update().get(month=month)
        if period.status == Period.Status.OPEN:
            return month
        month = next_month(month)


def open_month_from(month: date) -> date:
    """The first month from `month` on that is not closed, read without a lock (for saying where
    an adjustment will go; posting locks it with `first_open_month`)."""
    closed = set(Period.objects.filter(month__gte=month, status=Period.Status.CLOSED).values_list("month", flat=True))
    while month in closed:
        month = next_month(month)
    return month


def difference_account() -> Account:
    """The expense account of bill differences (made on first use: its role finds it after a rename)."""
    found = Account.objects.filter(role=Account.Role.BILL_DIFFERENCE).first()
    if found is not None:
        return found
    code, name = DIFFERENCE_ACCOUNT
    return Account.objects.create(
        code=code,
        name=name,
        kind=Account.Kind.EXPENSE,
        role=Account.Role.BILL_DIFFERENCE,
        description="What suppliers billed beyond (or below) the platform's priced usage, posted on approval.",
    )


def _post(adjustment: BillAdjustment) -> JournalEntry:
    month = adjustment.month
    home = first_open_month(month)
    days = {line["day"] for line in adjustment.lines}
    day = date.fromisoformat(days.pop()) if len(days) == 1 else month_days(month)[-1]
    rate = _rate(adjustment.currency, day)
    entry = JournalEntry.objects.create(
        kind=JournalEntry.Kind.BILL,
        period_id=home,
        day=day,
        adjusts=month if home != month else None,
        currency=functional_currency() if rate else adjustment.currency,
        memo=f"Bill adjustment {adjustment.pk}: {adjustment.supplier.name} {month:%Y-%m}"[:300],
        basis={"bill_adjustment": adjustment.pk, "supplier": adjustment.supplier.name, "month": f"{month:%Y-%m}"},
    )
    JournalLine.objects.bulk_create(_journal_lines(adjustment, entry, rate))
    return entry


def _rate(currency: str, day: date) -> DayRate | None:
    """The day's rate of a bill in a foreign currency; None for one in the functional currency."""
    functional = functional_currency()
    if currency == functional:
        return None
    found = rates_between(start=day, end=day + timedelta(days=1)).get(day, {}).get(currency)
    if found is None:
        raise AdjustmentError(_(NO_RATE).format(pair=f"{currency}/{functional}", day=day))
    return found


def _converted(amount: Decimal, currency: str, rate: DayRate | None) -> dict[str, Any]:
    """A line's signed amount in the entry's currency, with the original when converted."""
    if rate is None:
        return {"amount": amount}
    money = round_half_up(amount * rate.rate, MINOR_UNITS.get(functional_currency(), 2))  # type: ignore[call-overload]
    original = {"original_currency": currency, "original_amount": amount, "rate": rate.rate}
    return {"amount": money, **original, "rate_source": rate.source}


def _journal_lines(adjustment: BillAdjustment, entry: JournalEntry, rate: DayRate | None) -> list[JournalLine]:
    expense, payable = difference_account(), Account.objects.get(role=Account.Role.PAYABLE)
    pool = adjustment.supplier.pool if adjustment.supplier.kind == Supplier.Kind.POOL else None
    models = {m.name: m for m in ServedModel.objects.filter(name__in={ln["model"] for ln in adjustment.lines})}
    parts: dict[tuple[str, str], list[Any]] = defaultdict(lambda: [Decimal(0), 0, []])
    for line in adjustment.lines:
        part = parts[(line["business_line"], line["model"])]
        part[0] += Decimal(line["amount"])
        part[1] += int(line["tokens"])
        part[2].append({k: line[k] for k in ("day", "model", "key", "amount", "tokens")})
    made = []
    for (cc, model), (priced, tokens, basis) in sorted(parts.items()):
        served = None if pool is not None else models.get(model)
        common = {"entry": entry, "period_id": entry.period_id, "day": entry.day, "cost_centre": cc}
        common |= {"model": served, "pool": pool, "currency": entry.currency}
        converted = _converted(priced, adjustment.currency, rate)
        amount = converted.pop("amount")
        debit, credit = (amount, Decimal(0)) if amount > 0 else (Decimal(0), -amount)
        basis_json = {"bill": basis}
        made.append(
            JournalLine(
                account=expense, debit=debit, credit=credit, tokens=tokens, basis=basis_json, **common, **converted
            )
        )
        if amount:
            owed = converted | ({"original_amount": -priced} if converted else {})
            made.append(JournalLine(account=payable, debit=credit, credit=debit, tokens=0, basis={}, **common, **owed))
    return made
