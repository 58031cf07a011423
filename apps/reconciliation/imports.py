"""Importing a supplier's month: the CSV read through the supplier's column mapping, all or
nothing. Every row is checked; if any is bad, the import is kept as `refused` with each bad
row's text and reason (the first MAX_ERROR_ROWS of them, and one more row counting the rest),
and the month's accepted bill stays as it was. A good file replaces the month's accepted bill
(re-importing the same file gives the same lines). A closed month's bill is accepted as well (bills
usually come after the close): it is reconciled against the closed month, whose books stay as they
are, and the adjustment that explains its differences is posted into the first open month
(apps/reconciliation/adjustments.py), the entry and the bill each linking to the other."""

from __future__ import annotations

import csv
import hashlib
import io
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import transaction
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from apps.common.buckets import month_of, next_month
from apps.common.csvcells import csv_text
from apps.reconciliation.models import Bill, BillLine, BillRowError, Supplier

NOT_TEXT = gettext_noop("the file is neither UTF-8 nor GB18030 text")
NO_ROWS = gettext_noop("the file has a header but no data rows")
MISSING_COLUMNS = gettext_noop("columns {columns} (from the supplier's mapping) are not in the header: {header}")
BAD_DAY = gettext_noop("{column} {value!r} is not a day in the format {format}")
OUTSIDE = gettext_noop("day {day} is outside the bill's month {month}")
NO_MODEL = gettext_noop("{column} is empty: every row names its model")
BAD_TOKENS = gettext_noop("{column} {value!r} is not a whole number of tokens (0 or more)")
BAD_AMOUNT = gettext_noop("{column} {value!r} is not an amount (decimal separator {separator!r})")
BAD_CURRENCY = gettext_noop("{column} {value!r} is not the supplier's currency {currency}")
SHORT_ROW = gettext_noop("the row has {found} cells, the header {expected}")
TOO_LARGE = gettext_noop("{column} {value!r} is not an amount the books can hold (under 10^14)")
TOO_MANY_TOKENS = gettext_noop("{column} {value!r} is more tokens than the books can hold")
NUL = gettext_noop("{column} holds a NUL character")
TOO_LONG = gettext_noop("{column} is longer than {limit} characters")
MORE_ERRORS = gettext_noop("{count:,} more bad rows from this line on are not listed (the first {kept:,} are)")


MAX_ERROR_ROWS = 1000  # bad rows kept with their text and reason; the rest are counted
MAX_AMOUNT = Decimal(10) ** 14  # BillLine.amount: 20 digits, 6 of them after the point
MAX_TOKENS = 2**63 - 1  # BillLine.*_tokens: bigint
MAX_MODEL, MAX_KEY = 200, 256  # BillLine.model, BillLine.key
SHOWN = 200  # characters of a cell quoted in a reason


class BillImportError(ValueError):
    """A bill that cannot be imported at all (a file that is not text)."""


@dataclass
class ImportResult:
    bill: Bill
    errors: list[BillRowError] = field(default_factory=list)
    replaced: Bill | None = None
    refused_rows: int = 0  # bad rows in all, listed in `errors` or not

    @property
    def accepted(self) -> bool:
        return self.bill.state == Bill.State.ACCEPTED


def _text(content: bytes) -> str:
    text = csv_text(content)
    if text is None:
        raise BillImportError(_(NOT_TEXT))
    return text


def _mapped(supplier: Supplier) -> dict[str, str]:
    """Role -> header name, for the columns the supplier's mapping sets."""
    roles = {
        "day": supplier.col_day,
        "model": supplier.col_model,
        "input_tokens": supplier.col_input_tokens,
        "output_tokens": supplier.col_output_tokens,
        "amount": supplier.col_amount,
        "currency": supplier.col_currency,
        "key": supplier.col_key,
    }
    return {role: name for role, name in roles.items() if name}


def _number(value: str, separator: str) -> str:
    """'1.234,56' with separator ',' -> '1234.56'; spaces and the thousands mark dropped."""
    thousands = "." if separator == "," else ","
    cleaned = value.strip().replace(" ", "").replace("\u00a0", "").replace(thousands, "")
    return cleaned.replace(",", ".") if separator == "," else cleaned


class RowError(ValueError):
    pass


def _day(supplier: Supplier, value: str, month: date) -> date:
    try:
        day = datetime.strptime(value.strip(), supplier.date_format).date()
    except ValueError as exc:
        shown = _shown(value)
        raise RowError(_(BAD_DAY).format(column=supplier.col_day, value=shown, format=supplier.date_format)) from exc
    if not month <= day < next_month(month):
        raise RowError(_(OUTSIDE).format(day=day, month=f"{month:%Y-%m}"))
    return day


def _tokens(supplier: Supplier, column: str, value: str) -> int | None:
    if not value.strip():
        return 0
    text = _number(value, supplier.decimal_separator)
    if not text.isdigit():
        raise RowError(_(BAD_TOKENS).format(column=column, value=_shown(value)))
    if len(text) > 19 or int(text) > MAX_TOKENS:
        raise RowError(_(TOO_MANY_TOKENS).format(column=column, value=_shown(value)))
    return int(text)


def _amount(supplier: Supplier, value: str) -> Decimal:
    text = _number(value, supplier.decimal_separator)
    try:
        amount = Decimal(text)
    except InvalidOperation as exc:
        raise RowError(
            _(BAD_AMOUNT).format(column=supplier.col_amount, value=value, separator=supplier.decimal_separator)
        ) from exc
    if not amount.is_finite():
        raise RowError(_(BAD_AMOUNT).format(column=supplier.col_amount, value=_shown(value), separator="."))
    if abs(amount) >= MAX_AMOUNT or abs(amount.quantize(Decimal("1E-6"))) >= MAX_AMOUNT:
        raise RowError(_(TOO_LARGE).format(column=supplier.col_amount, value=_shown(value)))
    return amount


def _shown(value: str) -> str:
    """A cell as a reason quotes it: its first SHOWN characters."""
    return value[:SHOWN]


def _storable(text: str) -> str:
    """Text PostgreSQL can hold: a NUL shown as \\x00, and 2,000 characters at most."""
    return text.replace("\x00", "\\x00")[:2000]


def _text_cell(column: str, value: str, limit: int) -> str:
    if "\x00" in value:
        raise RowError(_(NUL).format(column=column))
    if len(value) > limit:
        raise RowError(_(TOO_LONG).format(column=column, limit=limit))
    return value


def _model(supplier: Supplier, value: str) -> str:
    name = _text_cell(supplier.col_model, value.strip(), MAX_MODEL)
    if supplier.kind == Supplier.Kind.POOL:
        # A GPU cloud bills the pool (instances), whatever its model column says.
        return str(supplier.model_aliases.get(name, supplier.pool.name if supplier.pool else name))
    if not name:
        raise RowError(_(NO_MODEL).format(column=supplier.col_model))
    return str(supplier.model_aliases.get(name, name))


def row_read(supplier: Supplier, month: date, cells: dict[str, str], number: int) -> BillLine:
    """One data row as a bill line; RowError says what is wrong with it."""
    columns = _mapped(supplier)
    got = {role: cells.get(name) or "" for role, name in columns.items()}
    currency = got.get("currency", "").strip()
    if currency and currency.upper() != supplier.currency:
        shown = _shown(currency)
        raise RowError(_(BAD_CURRENCY).format(column=columns["currency"], value=shown, currency=supplier.currency))
    return BillLine(
        row=number,
        day=_day(supplier, got["day"], month),
        model=_model(supplier, got.get("model", "")),
        key=_text_cell(columns.get("key", ""), got.get("key", "").strip(), MAX_KEY),
        input_tokens=_tokens(supplier, columns["input_tokens"], got["input_tokens"]) if "input_tokens" in got else None,
        output_tokens=_tokens(supplier, columns["output_tokens"], got["output_tokens"])
        if "output_tokens" in got
        else None,
        amount=_amount(supplier, got["amount"]),
    )


@dataclass
class _Parsed:
    rows: int = 0
    lines: list[BillLine] = field(default_factory=list)
    errors: list[BillRowError] = field(default_factory=list)
    refused: int = 0  # bad rows in all
    rest_from: int = 0  # the first bad row not kept in `errors`

    def refuse(self, error: BillRowError) -> None:
        """Keep a bad row, while fewer than MAX_ERROR_ROWS are kept; count it always."""
        error.raw, error.reason = _storable(error.raw), _storable(error.reason)
        self.refused += 1
        if len(self.errors) < MAX_ERROR_ROWS:
            self.errors.append(error)
        elif not self.rest_from:
            self.rest_from = error.row

    def rest(self) -> None:
        """One more row saying how many bad rows were not kept, from which line on."""
        if self.refused > len(self.errors):
            count, kept = self.refused - len(self.errors), len(self.errors)
            self.errors.append(
                BillRowError(row=self.rest_from, raw="", reason=_(MORE_ERRORS).format(count=count, kept=kept))
            )


def bill_parse(*, supplier: Supplier, month: date, content: bytes) -> _Parsed:
    """Every row of the file read or refused, nothing stored."""
    reader = csv.reader(io.StringIO(_text(content)), delimiter=supplier.delimiter or ",")
    parsed = _Parsed()
    header = [h.strip() for h in next(reader, [])]
    missing = [name for name in _mapped(supplier).values() if name not in header]
    if missing:
        reason = _(MISSING_COLUMNS).format(columns=", ".join(missing), header=", ".join(header) or "-")
        parsed.refuse(BillRowError(row=1, raw=",".join(header)[:2000], reason=reason))
        return parsed
    for number, cells in enumerate(reader, start=2):
        if not any(c.strip() for c in cells):
            continue
        parsed.rows += 1
        raw = (supplier.delimiter or ",").join(cells)[:2000]
        try:
            if len(cells) != len(header):
                raise RowError(_(SHORT_ROW).format(found=len(cells), expected=len(header)))
            parsed.lines.append(row_read(supplier, month, dict(zip(header, cells, strict=True)), number))
        except RowError as exc:
            parsed.refuse(BillRowError(row=number, raw=raw[:2000], reason=str(exc)))
    if not parsed.rows and not parsed.errors:
        parsed.refuse(BillRowError(row=2, raw="", reason=_(NO_ROWS)))
    parsed.rest()
    return parsed


def bill_import(
    *, supplier: Supplier, month: date, content: bytes, filename: str = "", user: Any = None
) -> ImportResult:
    """Import `content` as `supplier`'s bill of `month` (see the module docstring)."""
    month = month_of(month)
    parsed = bill_parse(supplier=supplier, month=month, content=content)
    with transaction.atomic():
        Supplier.objects.select_for_update().get(pk=supplier.pk)  # one import of a supplier at a time
        bill = Bill(
            supplier=supplier,
            month=month,
            filename=filename.replace("\x00", "")[:300],
            sha256=hashlib.sha256(content).hexdigest(),
            rows=parsed.rows,
            currency=supplier.currency,
            imported_by=user if getattr(user, "pk", None) else None,
        )
        if parsed.errors:
            bill.state = Bill.State.REFUSED
            bill.save()
            for error in parsed.errors:
                error.bill = bill
            BillRowError.objects.bulk_create(parsed.errors)
            return ImportResult(bill, parsed.errors, refused_rows=parsed.refused)
        replaced = _replace(supplier, month)
        bill.state, bill.total = Bill.State.ACCEPTED, sum((line.amount for line in parsed.lines), Decimal(0))
        bill.save()
        for line in parsed.lines:
            line.bill = bill
        BillLine.objects.bulk_create(parsed.lines)
        return ImportResult(bill, [], replaced)


def _replace(supplier: Supplier, month: date) -> Bill | None:
    """The month's accepted bill becomes `replaced`; its lines go (the new file has them all)."""
    current = Bill.objects.select_for_update().filter(supplier=supplier, month=month, state=Bill.State.ACCEPTED).first()
    if current is None:
        return None
    current.lines.all().delete()
    current.state = Bill.State.REPLACED
    current.save(update_fields=["state"])
    return current
