"""FOCUS 1.2 cost and usage rows from the journal: one row per expense line posted in the
billing period, i.e. per day x model x cost centre x account (adjusting entries included, as
corrections of the closed period they adjust).

- Costs: the ledger has no discounts or commitments, so BilledCost = EffectiveCost =
  ListCost = ContractedCost = the line's amount (debit - credit; negative for a correction
  that lowers a closed month).
- Quantities: ConsumedQuantity is the line's tokens in ConsumedUnit "Tokens"; PricingQuantity
  is tokens / 1,000,000 in PricingUnit "1000000 Tokens" (the price book's unit). Idle-capacity
  lines carry no tokens: their unit is "Hours" (the pool-hours with idle capacity).
- ChargePeriod is the usage day, BillingPeriod the month the line is posted in; both are
  [start, end) in the accounting time zone (a closed month's own zone), written in ISO 8601
  with their offset ('2026-11-01T00:00:00+08:00'; UTC is '+00:00'), so a reader sees both the
  local midnight and the instant. Adjustments are ChargeClass
  "Correction" (null otherwise).
- Currencies: BillingCurrency is the ledger's functional currency (the line's); PricingCurrency
  is the currency the cost was priced in, and PricingCurrencyEffectiveCost the line's amount in
  it, exact as priced (the original amount of a line converted at its day's rate, else the
  amount itself). x_ExchangeRate and x_ExchangeRateSource name the rate that converted it
  (empty when nothing was converted).
- Tags: the dims every usage row of the line shares (user-defined, unprefixed) plus
  provider-defined tags prefixed "costplatform/" (account, cost centre, pool, and the idle
  policy of an idle line when it is not showback: docs/ledger.md, "Idle capacity").
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from apps.common.buckets import iso_local, month_of
from apps.common.csvcells import safe_dict
from apps.ledger import conf
from apps.ledger.models import Account, JournalEntry, JournalLine
from apps.ledger.services.accrual import MonthWindow, month_window

COLUMNS = (
    "BilledCost",
    "BillingAccountId",
    "BillingAccountName",
    "BillingAccountType",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargeFrequency",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ContractedCost",
    "EffectiveCost",
    "InvoiceIssuerName",
    "ListCost",
    "PricingCategory",
    "PricingCurrency",
    "PricingCurrencyEffectiveCost",
    "PricingQuantity",
    "PricingUnit",
    "ProviderName",
    "PublisherName",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "ServiceName",
    "ServiceSubcategory",
    "SubAccountId",
    "SubAccountName",
    "SubAccountType",
    "Tags",
    "x_Account",
    "x_AccountName",
    "x_AdjustsPeriod",
    "x_ExchangeRate",
    "x_ExchangeRateSource",
    "x_JournalLineId",
)
TAG_PREFIX = "costplatform/"
TOKENS_PER_PRICING_UNIT = 1_000_000


def _ts(at: datetime, window: MonthWindow) -> str:
    return iso_local(at, window.zone)


class _Windows(dict[date, MonthWindow]):
    """The month windows the export's lines need (an adjustment's day is in an earlier month)."""

    def __missing__(self, month: date) -> MonthWindow:
        self[month] = month_window(month)
        return self[month]


def _num(value: Decimal | int) -> str:
    """Numeric Format: plain decimal notation, no exponent, sign only when negative."""
    text = format(Decimal(value), "f")
    return "0" if text in ("-0", "-0.0") else text


def _cost(value: Decimal) -> str:
    return _num(value.quantize(Decimal("0.01")) + 0)  # + 0 turns -0.00 into 0.00


def focus_rows(*, month: date, business_lines: list[str] | None = None) -> Iterator[dict[str, str]]:
    """The billing period's rows, in journal order (the values as strings; null is ''); only
    the cost centres in `business_lines` unless it is None."""
    month = month_of(month)
    windows = _Windows()
    billing = windows[month]
    lines = JournalLine.objects.filter(period_id=month, account__kind=Account.Kind.EXPENSE)
    if business_lines is not None:
        lines = lines.filter(cost_centre__in=business_lines)
    lines = (
        lines.select_related("entry", "account", "model", "pool")
        .order_by("day", "entry_id", "id")
        .iterator(chunk_size=5000)
    )
    fixed = {
        "BillingAccountId": conf.get("LEDGER_FOCUS_BILLING_ACCOUNT_ID"),
        "BillingAccountName": conf.get("LEDGER_FOCUS_BILLING_ACCOUNT_NAME"),
        "BillingAccountType": "Internal Recharge",
        "BillingPeriodStart": _ts(billing.start, billing),
        "BillingPeriodEnd": _ts(billing.end, billing),
        "ChargeCategory": "Usage",
        "ChargeFrequency": "Usage-Based",
        "InvoiceIssuerName": conf.get("LEDGER_FOCUS_INVOICE_ISSUER"),
        "PricingCategory": "Standard",
        "ProviderName": conf.get("LEDGER_FOCUS_PROVIDER"),
        "PublisherName": conf.get("LEDGER_FOCUS_PUBLISHER"),
        "ServiceCategory": "AI and Machine Learning",
        "ServiceName": conf.get("LEDGER_FOCUS_SERVICE_NAME"),
        "ServiceSubcategory": "Generative AI",
        "SubAccountType": "Cost Centre",
    }
    for line in lines:
        yield fixed | _line_row(line) | _charge_period(windows[month_of(line.day)], line.day)


def _charge_period(window: MonthWindow, day: date) -> dict[str, str]:
    start, end = window.bounds(day)
    return {"ChargePeriodStart": _ts(start, window), "ChargePeriodEnd": _ts(end, window)}


def _line_row(line: JournalLine) -> dict[str, str]:
    amount = _cost(line.debit - line.credit)
    correction = line_corrects(line)
    if line.model is not None:
        resource, resource_type, unit = str(line.model), "Model", "Tokens"
        consumed, pricing = Decimal(line.tokens), Decimal(line.tokens) / TOKENS_PER_PRICING_UNIT
        pricing_unit = f"{TOKENS_PER_PRICING_UNIT} Tokens"
    else:  # idle capacity of a pool: no tokens, the pool-hours it covers
        hours = Decimal(line.basis.get("idle_hours", 0))
        resource, resource_type, unit = f"pool:{line.pool.name if line.pool else '?'}", "GPU Pool", "Hours"
        consumed, pricing, pricing_unit = hours, hours, "Hours"
    what = f"{line.tokens} tokens of {resource}" if line.model is not None else _idle_what(line, resource)
    return {
        "BilledCost": amount,
        "ChargeDescription": f"{line.account.name} ({line.account.code}): {what} for {line.cost_centre} on {line.day}"
        + (f", correcting {line.entry.adjusts:%Y-%m}" if correction and line.entry.adjusts else ""),
        "ConsumedQuantity": _num(consumed),
        "ConsumedUnit": unit,
        "ContractedCost": amount,
        "EffectiveCost": amount,
        "ListCost": amount,
        **_pricing_currency(line, amount),
        "PricingQuantity": _num(pricing),
        "PricingUnit": pricing_unit,
        "ResourceType": resource_type,
        **line_columns(line, resource),
    }


def line_corrects(line: JournalLine) -> bool:
    """An adjusting entry's line, or a supplier bill's: a correction of the period it adjusts."""
    return line.entry.kind in (JournalEntry.Kind.ADJUSTMENT, JournalEntry.Kind.BILL)


def line_columns(line: JournalLine, resource: str) -> dict[str, str]:
    """The columns that name a journal line, its resource and where it is booked: every FOCUS
    version's the same."""
    return {
        "BillingCurrency": line.currency,
        "ChargeClass": "Correction" if line_corrects(line) else "",
        "ResourceId": resource,
        "ResourceName": resource,
        "SubAccountId": line.cost_centre,
        "SubAccountName": line.cost_centre,
        "Tags": json.dumps(_tags(line), sort_keys=True, ensure_ascii=False),
        "x_Account": line.account.code,
        "x_AccountName": line.account.name,
        "x_AdjustsPeriod": f"{line.entry.adjusts:%Y-%m}" if line.entry.adjusts else "",
        "x_JournalLineId": str(line.pk),
    }


def _idle_what(line: JournalLine, resource: str) -> str:
    policy = line.basis.get("idle_policy")
    if policy is None:  # showback
        return f"idle capacity of {resource}"
    if Decimal(line.basis.get("idle_allocated", 0)):
        return f"allocated idle capacity of {resource} (idle policy {policy})"
    return f"idle capacity of {resource} left to the platform (idle policy {policy})"


def _pricing_currency(line: JournalLine, amount: str) -> dict[str, str]:
    if line.original_currency is None or line.original_amount is None:
        return {
            "PricingCurrency": line.currency,
            "PricingCurrencyEffectiveCost": amount,
            "x_ExchangeRate": "",
            "x_ExchangeRateSource": "",
        }
    return {
        "PricingCurrency": line.original_currency,
        "PricingCurrencyEffectiveCost": _num(line.original_amount.normalize() + 0),
        "x_ExchangeRate": _num((line.rate or Decimal(0)).normalize()),
        "x_ExchangeRateSource": line.rate_source or "",
    }


def _tags(line: JournalLine) -> dict[str, Any]:
    tags: dict[str, Any] = dict(line.basis.get("dims") or {})
    tags[f"{TAG_PREFIX}account"] = line.account.code
    tags[f"{TAG_PREFIX}cost_centre"] = line.cost_centre
    if line.pool is not None:
        tags[f"{TAG_PREFIX}pool"] = line.pool.name
    if "idle_policy" in line.basis:  # idle shared out by a policy other than showback
        tags[f"{TAG_PREFIX}idle_policy"] = line.basis["idle_policy"]
    return tags


def focus_csv(*, month: date, business_lines: list[str] | None = None) -> Iterator[str]:
    """The CSV text of the billing period, a chunk at a time (header first)."""
    return rows_csv(COLUMNS, focus_rows(month=month, business_lines=business_lines))


def rows_csv(columns: tuple[str, ...], rows: Iterator[dict[str, str]]) -> Iterator[str]:
    """Rows as CSV text (header first), a chunk of a thousand rows at a time."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for i, row in enumerate(rows):
        writer.writerow(safe_dict(row))
        if i % 1000 == 999:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()
