"""FOCUS 1.4 cost and usage rows from the journal (docs/ledger.md, "FOCUS export").

The grain is the 1.2 export's (an expense line posted in the billing period: day x model or
pool x cost centre x account), with each usage line split into its priced parts: token kind x
class.reason x caller x what priced it (a price version or a cost pool), read from the priced
rows the line was booked from, through the same mapping rules (apps.ledger.mapping). The line's
amount is shared out over its parts in proportion to their exact cost, to the cent, so the rows
of a line sum to it exactly and the export to the books.

- SkuId is the model, SkuPriceId the model, the token kind and what priced it
  ('gpt-4o/uncached_prompt/pv3', 'qwen/output/pool2', 'claude/cache_write/pv3'), SkuMeter the kind
  of token ('Input Tokens', 'Cached Input Tokens', 'Cache Write Input Tokens', 'Output Tokens').
- ListUnitPrice = ContractedUnitPrice: the price of a million tokens in the billing currency
  (no discounts, no commitments); PricingCurrency*UnitPrice the same as priced. PricingCategory
  is Standard for a price version's price, Dynamic for a cost pool's (it follows the pool's
  hours and use) and idle capacity, Other for a line's mean price.
- Idle capacity: SkuId 'pool:<name>', priced per pool-hour. Lines that are not split (corrections,
  supplier bill differences, a line whose priced rows the mapping no longer finds) are one row.
- class, reason and caller: x_TokenClass, x_Reason, x_Caller (null where a line is not split).
- Date/times are UTC with 'Z' (the Date/Time Format); the accounting day and month, whose
  bounds they are, are x_ChargeDay and x_BillingPeriod.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import ROUND_FLOOR, Decimal
from typing import Any

from apps.classification.engine import COMPONENT_KIND, COMPONENTS
from apps.common.buckets import month_of
from apps.common.composed import SQL, text
from apps.exports.focus import COLUMNS as COLUMNS_12
from apps.exports.focus import (
    TOKENS_PER_PRICING_UNIT,
    _cost,
    _idle_what,
    _num,
    _Windows,
    line_columns,
    line_corrects,
    rows_csv,
)
from apps.ledger import conf
from apps.ledger.idle.allocation import SHOWBACK as IDLE
from apps.ledger.mapping import mapping_load
from apps.ledger.models import Account, JournalLine
from apps.ledger.services.accrual import PRICED_HOURS_FROM, analytic_cursor

# FOCUS 1.4's columns are 1.2's less the two it renamed (ProviderName: ServiceProviderName and
# HostProviderName; PublisherName: gone), plus its unit prices and SKUs and this export's own x_
# columns; in the order of their names, as 1.2's are.
COLUMNS = tuple(
    sorted(
        set(COLUMNS_12) - {"ProviderName", "PublisherName"}
        | {"ContractedUnitPrice", "HostProviderName", "ListUnitPrice", "ServiceProviderName"}
        | {"PricingCurrencyContractedUnitPrice", "PricingCurrencyListUnitPrice"}
        | {"SkuId", "SkuMeter", "SkuPriceDetails", "SkuPriceId"}
        | {"x_BillingPeriod", "x_Caller", "x_ChargeDay", "x_Reason", "x_TokenClass", "x_TokenKind"}
    )
)
CENT = Decimal("0.01")
# A price version's price is the list's (Standard); a cost pool's follows the pool's hours and use.
STANDARD, DYNAMIC = "Standard", "Dynamic"
EXACT = Decimal(1).scaleb(-12)  # the priced rows' precision
METERS = {
    "input": "Input Tokens",
    "cached_input": "Cached Input Tokens",
    "output": "Output Tokens",
    "cache_write": "Cache Write Input Tokens",
}
TOKEN_UNIT = f"{TOKENS_PER_PRICING_UNIT} Tokens"

# A day's priced rows at the grain a line is split by, with the mapping rule that books them.
# {rule}: the mapping's rule of a row (Mapping.usage_sql); {priced}: PRICED_HOURS_FROM.
_PARTS_SQL = SQL(
    """
SELECT c.currency, COALESCE(NULLIF(d.business_line, ''), %s), c.model_id, {rule} AS rule_id, r.name,
       c.component, COALESCE(d.dims->>'caller', ''), c.price_version_id, c.pool_id, SUM(c.tokens)::bigint, SUM(c.cost)
{priced}WHERE c.hour >= %s AND c.hour < %s
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9
"""
)
PartKey = tuple[str, int, int, str]  # (cost centre, model, account, currency as priced)


@dataclass(frozen=True)
class Part:
    """Priced rows of a line that share a token kind, reason, caller and price."""

    reason: str
    component: int
    caller: str
    price_version: int | None
    pool: int | None
    tokens: int
    cost: Decimal  # exact, as priced

    def order(self) -> tuple[str, int, str, int, int]:
        return (self.reason, self.component, self.caller, self.price_version or 0, self.pool or 0)

    @property
    def price_ref(self) -> str:
        return f"pv{self.price_version}" if self.price_version is not None else f"pool{self.pool}"


def utc(at: datetime) -> str:
    """Date/Time Format: ISO 8601 in UTC with 'Z' ('2026-10-31T16:00:00Z')."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def share_out(total: Decimal, weights: list[Decimal], quantum: Decimal) -> list[Decimal]:
    """`total` in proportion to `weights`, each a multiple of `quantum`, summing to `total`
    exactly (largest remainder)."""
    whole = sum(weights, Decimal(0))
    raw = [total * w / whole for w in weights]
    shares = [r.quantize(quantum, ROUND_FLOOR) for r in raw]
    left = int((total - sum(shares, Decimal(0))) / quantum)
    for i in sorted(range(len(raw)), key=lambda i: raw[i] - shares[i], reverse=True)[:left]:
        shares[i] += quantum
    return shares


class _DayParts:
    """The priced parts of the lines of one day at a time (lines come in day order), so a month
    of parts never sits in memory."""

    def __init__(self, windows: _Windows) -> None:
        self.windows, self.mapping = windows, mapping_load()
        self.day: date | None = None
        self.parts: dict[PartKey, list[Part]] = {}

    def of(self, line: JournalLine) -> list[Part]:
        if line.day != self.day:
            self.day, self.parts = line.day, self._load(line.day)
        return self.parts.get((line.cost_centre, line.model_id or 0, line.account_id, _priced_in(line)), [])

    def _load(self, day: date) -> dict[PartKey, list[Part]]:
        start, end = self.windows[month_of(day)].bounds(day)  # the day as the accrual booked it
        parts: dict[PartKey, list[Part]] = defaultdict(list)
        with analytic_cursor() as cursor:  # one large aggregate: no JIT, room to sort
            cursor.execute(
                text(_PARTS_SQL.format(rule=self.mapping.usage_sql, priced=PRICED_HOURS_FROM)),
                [conf.get("LEDGER_UNASSIGNED"), *self.mapping.usage_params, start, end],
            )
            for currency, cc, model, rule, reason, component, caller, version, pool, tokens, cost in cursor:
                if tokens:
                    key = (cc, model, self.mapping.account_of(rule), currency)
                    parts[key].append(Part(reason, component, caller, version, pool, int(tokens), cost))
        for found in parts.values():  # hashed, not sorted, in the database: a fixed order here
            found.sort(key=Part.order)
        return parts


def _priced_in(line: JournalLine) -> str:
    return line.original_currency or line.currency


def focus14_rows(*, month: date, business_lines: list[str] | None = None) -> Iterator[dict[str, str]]:
    """The billing period's FOCUS 1.4 cost and usage rows, in journal order (values as strings;
    null is ''); only the cost centres in `business_lines` unless it is None."""
    month = month_of(month)
    windows = _Windows()
    billing = windows[month]
    parts = _DayParts(windows)
    lines = JournalLine.objects.filter(period_id=month, account__kind=Account.Kind.EXPENSE)
    if business_lines is not None:
        lines = lines.filter(cost_centre__in=business_lines)
    lines = lines.select_related("entry", "account", "model", "pool").order_by("day", "entry_id", "id")
    provider = conf.get("LEDGER_FOCUS_PROVIDER")
    fixed = {
        "BillingAccountId": conf.get("LEDGER_FOCUS_BILLING_ACCOUNT_ID"),
        "BillingAccountName": conf.get("LEDGER_FOCUS_BILLING_ACCOUNT_NAME"),
        "BillingAccountType": "Internal Recharge",
        "BillingPeriodStart": utc(billing.start),
        "BillingPeriodEnd": utc(billing.end),
        "x_BillingPeriod": f"{month:%Y-%m}",
        "ChargeCategory": "Usage",
        "ChargeFrequency": "Usage-Based",
        "HostProviderName": provider,
        "InvoiceIssuerName": conf.get("LEDGER_FOCUS_INVOICE_ISSUER"),
        "PricingCategory": STANDARD,
        "ServiceCategory": "AI and Machine Learning",
        "ServiceName": conf.get("LEDGER_FOCUS_SERVICE_NAME"),
        "ServiceProviderName": provider,
        "ServiceSubcategory": "Generative AI",
        "SubAccountType": "Cost Centre",
    }
    for line in lines.iterator(chunk_size=5000):
        window = windows[month_of(line.day)]
        start, end = window.bounds(line.day)
        charge = {"ChargePeriodStart": utc(start), "ChargePeriodEnd": utc(end), "x_ChargeDay": line.day.isoformat()}
        shared = fixed | _line_columns(line) | charge
        for row in _line_rows(line, parts):
            yield shared | row


def _line_columns(line: JournalLine) -> dict[str, str]:
    """What every row of a line shares."""
    resource = str(line.model) if line.model is not None else f"pool:{line.pool.name}" if line.pool else ""
    return {
        **line_columns(line, resource),
        "ResourceType": "Model" if line.model is not None else "GPU Pool" if line.pool is not None else "",
        "x_ExchangeRate": _num(line.rate.normalize()) if line.rate is not None else "",
        "x_ExchangeRateSource": (line.rate_source or "") if line.rate is not None else "",
    }


def _line_rows(line: JournalLine, parts: _DayParts) -> list[dict[str, str]]:
    amount = line.debit - line.credit
    if line_corrects(line):
        return [_correction_row(line, amount)]
    if line.model is None:
        return [_idle_row(line, amount)]
    found = parts.of(line)
    weights = [p.cost for p in found or ()]
    if not found or sum(weights, Decimal(0)) <= 0 or any(w < 0 for w in weights):
        return [_unsplit_row(line, amount)]
    billed = share_out(amount, weights, CENT)
    priced = share_out(line.original_amount, weights, EXACT) if line.original_amount is not None else billed
    return [_part_row(line, p, b, o) for p, b, o in zip(found, billed, priced, strict=True)]


def _money(billed: Decimal, priced: Decimal, line: JournalLine) -> dict[str, str]:
    cost = _cost(billed)
    return {
        "BilledCost": cost,
        "ContractedCost": cost,
        "EffectiveCost": cost,
        "ListCost": cost,
        "PricingCurrency": line.original_currency or line.currency,
        "PricingCurrencyEffectiveCost": _num(priced.normalize() + 0) if line.original_amount is not None else cost,
    }


def _prices(as_priced: Decimal | None, line: JournalLine) -> dict[str, str]:
    """Unit prices: as priced, and in the billing currency (at the line's rate when converted)."""
    if as_priced is None:
        return dict.fromkeys(_PRICE_COLUMNS, "")
    billed = as_priced * line.rate if line.rate is not None else as_priced
    out = _num(billed.quantize(EXACT).normalize() + 0)
    priced = _num(as_priced.quantize(EXACT).normalize() + 0)
    return {
        "ContractedUnitPrice": out,
        "ListUnitPrice": out,
        "PricingCurrencyContractedUnitPrice": priced,
        "PricingCurrencyListUnitPrice": priced,
    }


_PRICE_COLUMNS = (
    "ContractedUnitPrice",
    "ListUnitPrice",
    "PricingCurrencyContractedUnitPrice",
    "PricingCurrencyListUnitPrice",
)


def _tokens(tokens: int) -> dict[str, str]:
    return {
        "ConsumedQuantity": _num(tokens),
        "ConsumedUnit": "Tokens",
        "PricingQuantity": _num(Decimal(tokens) / TOKENS_PER_PRICING_UNIT),
        "PricingUnit": TOKEN_UNIT,
    }


def _part_row(line: JournalLine, part: Part, billed: Decimal, priced: Decimal) -> dict[str, str]:
    assert line.model is not None
    kind = COMPONENTS[part.component]
    price = part.cost * TOKENS_PER_PRICING_UNIT / part.tokens  # as priced, per million tokens
    details: dict[str, Any] = {"x_TokenKind": kind, "x_PricedBy": part.price_ref}
    return {
        **_money(billed, priced, line),
        **_prices(price, line),
        **_tokens(part.tokens),
        "ChargeDescription": f"{part.tokens} {kind} tokens of {line.model} ({part.reason}) for {line.cost_centre} "
        f"on {line.day}",
        "PricingCategory": STANDARD if part.price_version is not None else DYNAMIC,
        "SkuId": line.model.name,
        "SkuMeter": METERS[COMPONENT_KIND[part.component]],
        "SkuPriceDetails": json.dumps(details, sort_keys=True),
        "SkuPriceId": f"{line.model.name}/{kind}/{part.price_ref}",
        "x_Caller": part.caller,
        "x_Reason": part.reason,
        "x_TokenClass": part.reason.split(".", 1)[0],
        "x_TokenKind": kind,
    }


def _unsplit_row(line: JournalLine, amount: Decimal) -> dict[str, str]:
    """A usage line whose priced rows are not found as booked: one row, its mean price."""
    assert line.model is not None
    as_priced = line.original_amount if line.original_amount is not None else amount
    price = as_priced * TOKENS_PER_PRICING_UNIT / line.tokens if line.tokens > 0 else None
    return {
        **_money(amount, as_priced, line),
        **_prices(price, line),
        **_tokens(line.tokens),
        "ChargeDescription": f"{line.tokens} tokens of {line.model} for {line.cost_centre} on {line.day}",
        "PricingCategory": "Other",  # a mean over token kinds, not a price of the list
        **_sku(line.model.name, f"{line.model.name}/all", "Tokens", {}),
        **_unsplit_custom(),
    }


def _idle_row(line: JournalLine, amount: Decimal) -> dict[str, str]:
    hours = Decimal(line.basis.get("idle_hours", 0))
    as_priced = line.original_amount if line.original_amount is not None else amount
    resource = f"pool:{line.pool.name if line.pool else '?'}"
    return {
        **_money(amount, as_priced, line),
        **_prices(as_priced / hours if hours else None, line),
        "ChargeDescription": f"{line.account.name} ({line.account.code}): {_idle_what(line, resource)} "
        f"for {line.cost_centre} on {line.day}",
        "ConsumedQuantity": _num(hours),
        "ConsumedUnit": "Hours",
        "PricingCategory": DYNAMIC,
        "PricingQuantity": _num(hours),
        "PricingUnit": "Hours",
        **_sku(resource, f"{resource}/idle", "Idle Capacity", {"x_IdlePolicy": line.basis.get("idle_policy", IDLE)}),
        **_unsplit_custom(),
    }


def _correction_row(line: JournalLine, amount: Decimal) -> dict[str, str]:
    """An adjusting entry or a supplier bill's difference: tokens as corrected, no unit price."""
    what = str(line.model) if line.model is not None else f"pool:{line.pool.name}" if line.pool else "the platform"
    as_priced = line.original_amount if line.original_amount is not None else amount
    adjusts = f", correcting {line.entry.adjusts:%Y-%m}" if line.entry.adjusts else ""
    return {
        **_money(amount, as_priced, line),
        **_prices(None, line),
        **(_tokens(line.tokens) if line.model is not None else dict.fromkeys(_tokens(0), "")),
        "ChargeDescription": f"{line.account.name} ({line.account.code}): {what} for {line.cost_centre} "
        f"on {line.day}{adjusts}",
        **_sku(line.model.name if line.model is not None else "", "", "", None),
        **_unsplit_custom(),
    }


def _sku(sku: str, price_id: str, meter: str, details: dict[str, Any] | None) -> dict[str, str]:
    return {
        "SkuId": sku,
        "SkuMeter": meter if sku else "",
        "SkuPriceDetails": json.dumps(details, sort_keys=True) if price_id and details is not None else "",
        "SkuPriceId": price_id,
    }


def _unsplit_custom() -> dict[str, str]:
    return {"x_Caller": "", "x_Reason": "", "x_TokenClass": "", "x_TokenKind": ""}


def focus14_csv(*, month: date, business_lines: list[str] | None = None) -> Iterator[str]:
    """The CSV text of the billing period's FOCUS 1.4 cost and usage, a chunk at a time."""
    return rows_csv(COLUMNS, focus14_rows(month=month, business_lines=business_lines))
