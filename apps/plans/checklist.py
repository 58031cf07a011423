"""The plans' line of the close checklist (registered with the books' in apps.py): the business
lines budgeted for the month with nothing booked."""

from __future__ import annotations

from datetime import date, datetime

from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from apps.common.buckets import next_month
from apps.ledger.models import Account, JournalLine
from apps.ledger.services.checklist import CheckItem, Entry
from apps.plans.models import Budget


def budgets_unspent(month: date, business_lines: list[str] | None, now: datetime) -> CheckItem:
    budgets = Budget.objects.of_lines().filter(month=month)
    if business_lines is not None:
        budgets = budgets.filter(business_line__in=business_lines)
    booked = set(
        JournalLine.objects.filter(day__gte=month, day__lt=next_month(month), account__kind=Account.Kind.EXPENSE)
        .exclude(debit=0, credit=0, tokens=0)
        .values_list("cost_centre", flat=True)
        .distinct()
    )
    unspent = sorted((b for b in budgets if b.business_line not in booked), key=lambda b: b.business_line)
    lines = [b.business_line for b in unspent]
    detail = (
        _("Budgeted but nothing booked: %(lines)s. A wrong business line in the budget, or records missing?")
        % {"lines": ", ".join(lines[:10])}
        if lines
        else _("Every budgeted business line has booked spend.")
    )
    plans = reverse("finance-plans", kwargs={"month": f"{month:%Y-%m}"})
    items = tuple(Entry(b.business_line, f"{b.amount} {b.currency}", plans) for b in unspent)
    return CheckItem(
        "budgets_unspent", gettext_noop("Budgets without actuals"), len(lines), not lines, detail, items=items
    )
