"""Exchange rates: the ledger's functional currency and the day's rate of every other one.

The currencies app owns the rate table, not pricing: pricing prices in the price book's currency (a USD
price book for hosted APIs stays USD in the cost rollup, which bill reconciliation compares
with the supplier's USD bill), and converting is a booking decision, made once, when accrual
books a day. A rate is per accounting day (apps/common/buckets.py) and pair (USD/CNY: CNY per
one USD); a day's costs in a currency without that day's rate are left unbooked and noted as a
MissingRate (never booked at zero) until the rate is entered.

Rates come from the admin, the finance rates page (one rate, or a CSV upload) and
`manage.py import_rates FILE`; each save goes through the model, so the audit log records it.
Entering or changing a rate sends `rate_changed`: the books mark the day dirty for the next accrual.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.currencies.models import ExchangeRate, MissingRate
from apps.currencies.signals import rate_changed
from apps.pricing.models import Currency

# The currency the journal is kept in unless LEDGER_FUNCTIONAL_CURRENCY says another.
FUNCTIONAL_DEFAULT = "CNY"
COLUMNS = ("date", "currency", "rate", "source")  # required; `to` is optional (the functional currency)
NOT_POSITIVE = "the rate must be a positive number, got {value!r}"
TOO_LARGE = "the rate must be a positive number below 10,000,000,000, got {value!r}"
TOO_OLD = "{day} is older than the platform keeps records ({days} days): no cost of it needs a rate"
TOO_NEW = "{day} is too far ahead: a rate is for a day up to a year from today"
NUL_SOURCE = "the source holds a NUL character"
LONG_SOURCE = "the source is longer than {limit} characters"
MAX_RATE = Decimal(10) ** 10  # ExchangeRate.rate: 20 digits, 10 of them after the point
MAX_SOURCE = 200  # ExchangeRate.source
DAYS_AHEAD = 366
SAME_PAIR = "a rate converts one currency into another: {currency}/{to}"
UNKNOWN_CURRENCY = "unknown currency {value!r}: one of {known}"
BAD_DATE = "the date must be YYYY-MM-DD, got {value!r}"
NO_SOURCE = "say where the rate comes from (source), e.g. PBOC central parity"
MISSING_COLUMNS = "the CSV needs the columns {columns}; it has {found}"
TWICE = "{day} {pair} is given twice (rows {first} and {row})"
EMPTY = "the file holds no rates"


class RateError(ValueError):
    """A rate, or a file of rates, that cannot be taken; nothing of it was saved."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


@dataclass(frozen=True)
class DayRate:
    rate: Decimal
    source: str


def functional_currency() -> str:
    """The currency the journal is kept in (LEDGER_FUNCTIONAL_CURRENCY, CNY by default)."""
    return str(getattr(settings, "LEDGER_FUNCTIONAL_CURRENCY", FUNCTIONAL_DEFAULT))


def rates_between(*, start: date, end: date, to: str | None = None) -> dict[date, dict[str, DayRate]]:
    """Per day in [start, end), the rate of each currency into `to` (the functional one)."""
    rows = ExchangeRate.objects.filter(day__gte=start, day__lt=end, to=to or functional_currency())
    found: dict[date, dict[str, DayRate]] = {}
    for day, currency, rate, source in rows.values_list("day", "currency", "rate", "source"):
        found.setdefault(day, {})[currency] = DayRate(rate, source)
    return found


def rate_of_day(day: date, currency: str, to: str) -> Decimal | None:
    """A unit of `currency` in `to` on the accounting `day`: the rate kept for the pair, or the
    inverse of the one kept the other way round; None when neither is."""
    pairs = ExchangeRate.objects.filter(day=day).values_list("currency", "to", "rate")
    found = {
        (source, target): rate
        for source, target, rate in pairs.filter(currency__in=[currency, to], to__in=[currency, to])
    }
    if (currency, to) in found:
        return found[(currency, to)]
    return 1 / found[(to, currency)] if (to, currency) in found else None


def _currency(value: str) -> str:
    code = value.strip().upper()
    if code not in Currency.values:
        raise ValueError(UNKNOWN_CURRENCY.format(value=value, known=", ".join(Currency.values)))
    return code


def _rate(value: Any) -> Decimal:
    try:
        rate = Decimal(str(value).strip())
    except InvalidOperation:
        raise ValueError(NOT_POSITIVE.format(value=value)) from None
    if not rate.is_finite() or rate <= 0:
        raise ValueError(NOT_POSITIVE.format(value=value))
    if rate >= MAX_RATE or rate.quantize(Decimal("1E-10")) >= MAX_RATE:
        raise ValueError(TOO_LARGE.format(value=value))
    return rate


def _day(value: Any) -> date:
    """The day, within what the books can hold: no older than the oldest record the platform
    takes (COSTPLATFORM_INGEST_MAX_AGE_DAYS), no more than a year ahead (9999-12-31 made every
    accrual after it overflow)."""
    if isinstance(value, date):
        day = value
    else:
        try:
            day = date.fromisoformat(str(value).strip())
        except ValueError:
            raise ValueError(BAD_DATE.format(value=value)) from None
    today = timezone.now().date()
    if day < today - timedelta(days=settings.INGEST_MAX_AGE_DAYS):
        raise ValueError(TOO_OLD.format(day=day, days=settings.INGEST_MAX_AGE_DAYS))
    if day > today + timedelta(days=DAYS_AHEAD):
        raise ValueError(TOO_NEW.format(day=day))
    return day


def _source(value: str) -> str:
    source = value.strip()
    if not source:
        raise ValueError(NO_SOURCE)
    if "\x00" in source:
        raise ValueError(NUL_SOURCE)
    if len(source) > MAX_SOURCE:
        raise ValueError(LONG_SOURCE.format(limit=MAX_SOURCE))
    return source


@dataclass(frozen=True)
class RateInput:
    day: date
    currency: str
    to: str
    rate: Decimal
    source: str

    @property
    def pair(self) -> str:
        return f"{self.currency}/{self.to}"


def rate_parse(*, day: Any, currency: str, rate: Any, source: str, to: str = "") -> RateInput:
    """A rate checked field by field; ValueError names what is wrong."""
    parsed = RateInput(
        day=_day(day),
        currency=_currency(currency),
        to=_currency(to) if to.strip() else functional_currency(),
        rate=_rate(rate),
        source=_source(source),
    )
    if parsed.currency == parsed.to:
        raise ValueError(SAME_PAIR.format(currency=parsed.currency, to=parsed.to))
    return parsed


def _save(item: RateInput, user: Any) -> ExchangeRate:
    """Save row by row through the model (the audit log's signals see each change)."""
    found = ExchangeRate.objects.filter(day=item.day, currency=item.currency, to=item.to).first()
    obj = found or ExchangeRate(day=item.day, currency=item.currency, to=item.to)
    if found is not None and (found.rate, found.source) == (item.rate, item.source):
        return found
    obj.rate, obj.source, obj.entered_by = item.rate, item.source, user
    obj.save()
    rate_changed.send(sender=ExchangeRate, day=item.day)  # the next accrual books the day at this rate
    return obj


def rate_set(*, day: Any, currency: str, rate: Any, source: str, to: str = "", user: Any = None) -> ExchangeRate:
    """Enter or change one day's rate of a pair."""
    try:
        item = rate_parse(day=day, currency=currency, rate=rate, source=source, to=to)
    except ValueError as e:
        raise RateError([str(e)]) from None
    with transaction.atomic():
        return _save(item, user)


def rates_parse(*, text: str) -> list[RateInput]:
    """Every row of a rates CSV (date,currency,rate,source[,to]), or RateError listing each bad
    row with its number (the header is row 1) and reason."""
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    header = [(h or "").strip().lower() for h in reader.fieldnames or []]
    if not set(COLUMNS) <= set(header):
        raise RateError([MISSING_COLUMNS.format(columns=", ".join(COLUMNS), found=", ".join(header) or "none")])
    reader.fieldnames = header
    items: list[RateInput] = []
    errors: list[str] = []
    seen: dict[tuple[date, str], int] = {}
    for number, row in enumerate(reader, start=2):
        cells = {k: (v or "") for k, v in row.items() if k}
        try:
            item = rate_parse(
                day=cells["date"],
                currency=cells["currency"],
                rate=cells["rate"],
                source=cells["source"],
                to=cells.get("to", ""),
            )
        except ValueError as e:
            errors.append(f"row {number}: {e}")
            continue
        first = seen.setdefault((item.day, item.pair), number)
        if first != number:
            errors.append(f"row {number}: " + TWICE.format(day=item.day, pair=item.pair, first=first, row=number))
        items.append(item)
    if errors:
        raise RateError(errors)
    if not items:
        raise RateError([EMPTY])
    return items


def rates_import(*, text: str, user: Any = None) -> list[ExchangeRate]:
    """Import a rates CSV whole or not at all: one bad row refuses the file, with its reason."""
    items = rates_parse(text=text)
    with transaction.atomic():
        return [_save(item, user) for item in items]


def missing_rates(*, start: date, end: date) -> list[MissingRate]:
    """Days in [start, end) whose foreign-currency costs wait for a rate."""
    return list(MissingRate.objects.filter(day__gte=start, day__lt=end).order_by("day", "currency"))
