"""Currencies, end to end: records of a hosted model through the collector API, classified and
priced by a USD price book, booked by accrual in the functional CNY at each accounting day's
rate, each line keeping the amount as priced, its currency, the rate and its source. A day
without a rate is left unbooked and flagged (the close checklist, the rates page), never booked
as zero, and booked once the rate is entered. Plus: the trial balance, the FOCUS columns, the
rates CSV import (a bad row refuses the file), and the audit log of a rate change."""

from __future__ import annotations

import csv
import io
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import Sum
from django.test import Client

from apps.auditlog.models import AuditEntry
from apps.currencies.checks import functional_currency_check
from apps.currencies.models import ExchangeRate, MissingRate
from apps.currencies.rates import RateError, rate_set, rates_import
from apps.ledger.models import DirtyDay, JournalLine
from apps.ledger.selectors import trial_balance
from apps.ledger.services.accrual import month_accrue, recent_accrue
from apps.ledger.services.closing import close_checklist
from apps.ledger.services.periods import period_close
from apps.pricing.models import HourlyCost
from apps.pricing.services import hours_price, price_set
from apps.reconciliation.adjustments import AdjustmentError, adjustment_approve, adjustment_propose
from apps.reconciliation.imports import bill_import
from apps.reconciliation.matching import supplier_reconcile
from apps.reconciliation.models import Supplier
from tests import factories
from tests.conftest import Collector
from tests.ledger.helpers import OCT, SEP, balanced

pytestmark = [pytest.mark.django_db, pytest.mark.books_in("UTC")]

# Per record (factories.record's tokens): prompt 1200 (512 cached), completion 180. At 2000 /
# 500 / 8000 USD per million: 688 x 0.002 + 512 x 0.0005 + 180 x 0.008 = 3.072 USD.
PER_RECORD = Decimal("3.072")
SENT = {3: 2, 4: 1, 5: 1}  # day of October -> records
RATES = {3: ("7.1", "PBOC central parity"), 4: ("7.2", "PBOC central parity")}  # no rate on the 5th


def d(day: int) -> date:
    return date(2026, 10, day)


@pytest.fixture
def usd_usage(collector: Collector) -> None:
    usd_usage_build(collector)


def usd_usage_build(collector: Collector) -> None:
    """October's gpt-4o records through ingest, classification and a USD price book."""
    records = [
        factories.record(
            ts=datetime(2026, 10, day, 2 + i, 5, tzinfo=UTC).isoformat(),
            model="gpt-4o",
            dims={"business_line": "support"},
            prompt_hash=None,
        )
        for day, n in SENT.items()
        for i in range(n)
    ]
    response = collector.send(records, on_time=True)
    assert response.status_code == 200 and response.json()["accepted"] == len(records), response.content
    prices = {"input": Decimal("2000"), "cached_input": Decimal("500"), "output": Decimal("8000")}
    price_set(model_pattern="gpt-4o*", prices=prices, effective_from=datetime(2026, 9, 1, tzinfo=UTC), currency="USD")
    hours_price(start=datetime(2026, 10, 1, tzinfo=UTC), end=datetime(2026, 11, 1, tzinfo=UTC))
    for day, (rate, source) in RATES.items():
        rate_set(day=d(day), currency="USD", rate=rate, source=source)


def _expense(day: int) -> Any:
    return JournalLine.objects.filter(day=d(day), account__kind="expense")


def _booked(day: int) -> Decimal:
    sums = _expense(day).aggregate(debit=Sum("debit"), credit=Sum("credit"))
    return (sums["debit"] or Decimal(0)) - (sums["credit"] or Decimal(0))


def test_usd_priced_usage_is_booked_in_cny_at_the_rate_of_its_day(usd_usage: None) -> None:
    assert set(HourlyCost.objects.values_list("currency", flat=True)) == {"USD"}  # priced as the book says

    month_accrue(month=OCT)

    for day, (rate, source) in RATES.items():
        lines = list(_expense(day))
        assert lines and {(ln.currency, ln.original_currency, ln.rate, ln.rate_source) for ln in lines} == {
            ("CNY", "USD", Decimal(rate), source)
        }
        assert sum(ln.original_amount for ln in lines) == PER_RECORD * SENT[day]
    # 6.144 USD x 7.1 = 43.6224 and 3.072 x 7.2 = 22.1184 CNY, rounded with the month's carry.
    assert (_booked(3), _booked(4)) == (Decimal("43.62"), Decimal("22.12"))
    # The payable owes what was priced: its lines keep the original too, credit-signed.
    payable = JournalLine.objects.filter(day=d(3), account__role="payable")
    assert sum(ln.original_amount for ln in payable) == -PER_RECORD * 2
    assert sum(ln.credit for ln in payable) == Decimal("43.62")
    assert balanced()


def test_the_trial_balance_balances_in_cny_with_the_usd_originals(usd_usage: None) -> None:
    month_accrue(month=OCT)

    balance = trial_balance(month=OCT)

    (book,) = balance["currencies"]
    assert (book["currency"], book["balanced"], book["debits"]) == ("CNY", True, Decimal("65.74"))
    expense_usd = sum(a["originals"].get("USD", 0) for a in book["accounts"] if a["kind"] == "expense")
    assert expense_usd == PER_RECORD * 3  # the 3rd and the 4th, as priced


def test_a_day_without_a_rate_is_flagged_not_booked_as_zero_until_the_rate_is_entered(usd_usage: None) -> None:
    month_accrue(month=OCT)

    assert not _expense(5).exists()  # not a zero line: no line at all
    missing = MissingRate.objects.get()
    assert (missing.day, missing.currency, missing.to, missing.amount) == (d(5), "USD", "CNY", PER_RECORD)
    items = {i.key: i for i in close_checklist(month=OCT, now=datetime(2026, 11, 2, tzinfo=UTC))}
    assert not items["missing_rates"].ok and items["missing_rates"].value == 1
    assert "2026-10-05 USD/CNY (3.07 USD)" in items["missing_rates"].detail

    rate_set(day=d(5), currency="USD", rate="7.0", source="PBOC central parity")
    assert DirtyDay.objects.filter(day=d(5)).exists()
    recent_accrue(now=datetime(2026, 10, 6, 12, tzinfo=UTC))

    assert not MissingRate.objects.exists()
    # 3.072 x 7.0 = 21.504: the month's exact 87.2448 rounds to 87.24, less 65.74 booked before.
    assert _booked(5) == Decimal("21.50")
    assert {ln.rate for ln in _expense(5)} == {Decimal("7.0")}
    items = {i.key: i for i in close_checklist(month=OCT, now=datetime(2026, 11, 2, tzinfo=UTC))}
    assert items["missing_rates"].ok


def test_the_close_page_shows_the_missing_rate(usd_usage: None, as_role: Any) -> None:
    month_accrue(month=OCT)

    page = as_role("finance").get("/finance/close/2026-10/")

    assert page.status_code == 200
    assert "2026-10-05 USD/CNY" in page.content.decode()


def test_a_changed_rate_rebooks_the_day_and_is_audit_logged(usd_usage: None, as_role: Any) -> None:
    month_accrue(month=OCT)
    browser: Client = as_role("finance")

    answer = browser.post(
        "/finance/rates/act/",
        {"action": "set", "day": "2026-10-03", "currency": "USD", "rate": "7.15", "source": "bank quote"},
        follow=True,
    )
    assert answer.status_code == 200 and "saved" in answer.content.decode()
    month_accrue(month=OCT)

    rate = ExchangeRate.objects.get(day=d(3), currency="USD")
    entry = AuditEntry.objects.filter(model="currencies.ExchangeRate", object_id=str(rate.pk), action="update").get()
    assert entry.changes["rate"][0].startswith("7.1") and entry.changes["rate"][1].startswith("7.15")
    assert entry.changes["source"] == ["PBOC central parity", "bank quote"]
    assert entry.actor_name.startswith("user-finance")
    assert {(ln.rate, ln.rate_source) for ln in _expense(3)} == {(Decimal("7.15"), "bank quote")}
    assert _booked(3) == Decimal("43.93")  # 6.144 x 7.15 = 43.9296


def test_the_focus_export_bills_in_cny_and_prices_in_usd(usd_usage: None, as_role: Any) -> None:
    month_accrue(month=OCT)

    response = as_role("finance").get("/api/v1/exports/focus?period=2026-10")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))

    assert rows and {(r["BillingCurrency"], r["PricingCurrency"]) for r in rows} == {("CNY", "USD")}
    of_day = [r for r in rows if r["ChargePeriodStart"].startswith("2026-10-03")]
    assert sum(Decimal(r["PricingCurrencyEffectiveCost"]) for r in of_day) == PER_RECORD * 2
    assert sum(Decimal(r["BilledCost"]) for r in of_day) == Decimal("43.62")
    assert {(r["x_ExchangeRate"], r["x_ExchangeRateSource"]) for r in of_day} == {("7.1", "PBOC central parity")}


def test_a_cny_line_prices_in_cny_in_focus(as_role: Any) -> None:
    factories.hourly_cost(hour=datetime(2026, 10, 3, 1, tzinfo=UTC), cost="1.00")
    month_accrue(month=OCT)

    response = as_role("finance").get("/api/v1/exports/focus?period=2026-10")
    (row,) = csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode()))

    assert (row["BillingCurrency"], row["PricingCurrency"], row["PricingCurrencyEffectiveCost"]) == (
        "CNY",
        "CNY",
        "1.00",
    )
    assert row["x_ExchangeRate"] == ""


RATES_CSV = "date,currency,rate,source\n2026-10-06,USD,7.21,PBOC central parity\n2026-10-07,usd,7.22,PBOC\n"


def test_a_rates_csv_imports_whole() -> None:
    saved = rates_import(text=RATES_CSV)

    assert [(r.day, r.currency, r.to, r.rate) for r in saved] == [
        (d(6), "USD", "CNY", Decimal("7.21")),
        (d(7), "USD", "CNY", Decimal("7.22")),
    ]


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ("2026-10-08,USD,-7.1,PBOC", "row 4: the rate must be a positive number, got '-7.1'"),
        ("2026-10-08,USD,0,PBOC", "row 4: the rate must be a positive number, got '0'"),
        ("2026-10-08,USD,abc,PBOC", "row 4: the rate must be a positive number, got 'abc'"),
        ("08/10/2026,USD,7.1,PBOC", "row 4: the date must be YYYY-MM-DD, got '08/10/2026'"),
        ("2026-10-08,XYZ,7.1,PBOC", "row 4: unknown currency 'XYZ': one of CNY, USD"),
        ("2026-10-08,CNY,1,PBOC", "row 4: a rate converts one currency into another: CNY/CNY"),
        ("2026-10-08,USD,7.1,", "row 4: say where the rate comes from"),
        ("2026-10-06,USD,7.3,PBOC", "row 4: 2026-10-06 USD/CNY is given twice (rows 2 and 4)"),
    ],
)
def test_a_rates_csv_with_a_bad_row_is_refused_with_its_reason(row: str, reason: str) -> None:
    with pytest.raises(RateError) as refused:
        rates_import(text=RATES_CSV + row + "\n")

    assert len(refused.value.errors) == 1 and refused.value.errors[0].startswith(reason)
    assert not ExchangeRate.objects.exists()  # nothing of the file was saved


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ("9999-12-31,USD,7.1,PBOC", "row 4: 9999-12-31 is too far ahead: a rate is for a day up to a year from today"),
        ("0001-01-01,USD,7.1,PBOC", "row 4: 0001-01-01 is older than the platform keeps records"),
        ("2026-10-08,USD,1E+999999,PBOC", "row 4: the rate must be a positive number below 10,000,000,000"),
        ("2026-10-08,USD,12345678901,PBOC", "row 4: the rate must be a positive number below 10,000,000,000"),
        ("2026-10-08,USD,7.1,PBOC\x00", "row 4: the source holds a NUL character"),
        ("2026-10-08,USD,7.1," + "P" * 201, "row 4: the source is longer than 200 characters"),
    ],
)
def test_a_rate_the_books_cannot_hold_is_refused_with_its_reason_not_a_500(row: str, reason: str) -> None:
    """Issue 31, finding 9 (and the Lows of the rates import): a rate dated 9999-12-31 made every
    later accrual raise OverflowError; 1E+999999, a NUL or a long source were 500s."""
    with pytest.raises(RateError) as refused:
        rates_import(text=RATES_CSV + row + "\n")

    assert len(refused.value.errors) == 1 and refused.value.errors[0].startswith(reason), refused.value.errors
    assert not ExchangeRate.objects.exists()
    with pytest.raises(RateError):
        rate_set(day=row.split(",")[0], currency="USD", rate=row.split(",")[2], source=row.split(",", 3)[3])


def test_import_rates_command_refuses_a_bad_file_and_imports_a_good_one(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(RATES_CSV + "2026-10-08,USD,seven,PBOC\n")
    with pytest.raises(CommandError, match="nothing was imported"):
        call_command("import_rates", str(bad))
    assert not ExchangeRate.objects.exists()

    good = tmp_path / "good.csv"
    good.write_text(RATES_CSV)
    out = io.StringIO()
    call_command("import_rates", str(good), stdout=out)
    assert "imported 2 rates into CNY" in out.getvalue()
    assert ExchangeRate.objects.count() == 2


def test_the_rates_page_upload_names_the_bad_row(as_role: Any) -> None:
    upload = SimpleUploadedFile("rates.csv", (RATES_CSV + "2026-10-08,USD,-1,PBOC\n").encode(), "text/csv")

    page = as_role("finance").post("/finance/rates/act/", {"action": "import", "file": upload}, follow=True)

    assert page.status_code == 200
    assert "row 4: the rate must be a positive number, got &#x27;-1&#x27;" in page.content.decode()
    assert not ExchangeRate.objects.exists()


@pytest.mark.parametrize("encoding", ["utf-8-sig", "gb18030"])
def test_the_rates_page_reads_a_csv_as_excel_saves_it(as_role: Any, encoding: str) -> None:
    """Excel writes UTF-8 with a byte-order mark, or GBK (GB18030) on Chinese Windows."""
    content = (RATES_CSV + "2026-10-08,USD,7.23,中国人民银行\n").encode(encoding)
    upload = SimpleUploadedFile("rates.csv", content, "text/csv")

    page = as_role("finance").post("/finance/rates/act/", {"action": "import", "file": upload}, follow=True)

    assert "3 rates imported." in page.content.decode()
    assert ExchangeRate.objects.filter(source="中国人民银行").count() == 1


def test_the_rates_page_lists_rates_and_missing_days(usd_usage: None, as_role: Any) -> None:
    month_accrue(month=OCT)

    page = as_role("finance").get("/finance/rates/").content.decode()

    assert "2026-10-05" in page and "3.07 USD" in page  # the day waiting for a rate
    assert "PBOC central parity" in page
    assert as_role("engineer").get("/finance/rates/").status_code == 403


def _usd_supplier() -> Supplier:
    return Supplier.objects.create(
        name="openai-usd",
        kind=Supplier.Kind.HOSTED,
        currency="USD",
        model_patterns=["gpt-4o*"],
        col_day="Date",
        col_model="Model",
        col_input_tokens="Input tokens",
        col_output_tokens="Output tokens",
        col_amount="Cost",
    )


def _usd_bill(extra: str) -> bytes:
    """The provider's USD bill of what was sent, the 4th billed `extra` more."""
    rows = ["Date,Model,Input tokens,Output tokens,Cost"]
    for day, n in SENT.items():
        amount = (PER_RECORD * n + (Decimal(extra) if day == 4 else 0)).quantize(Decimal("0.001"))
        rows.append(f"2026-10-{day:02d},gpt-4o,{1200 * n},{180 * n},{amount}")
    return ("\n".join(rows) + "\n").encode()


def test_a_usd_bill_is_reconciled_in_usd_and_its_adjustment_posted_in_cny_at_the_days_rate(usd_usage: None) -> None:
    month_accrue(month=OCT)
    supplier = _usd_supplier()
    bill_import(supplier=supplier, month=OCT, content=_usd_bill("5.00"))
    (difference,) = supplier_reconcile(supplier=supplier, month=OCT).open
    assert (difference.day, difference.currency, difference.amount_diff) == (d(4), "USD", Decimal("5.00"))
    preparer, approver = factories.finance_user("prep"), factories.finance_user("appr")
    proposal = adjustment_propose(supplier=supplier, month=OCT, user=preparer)

    posted = adjustment_approve(adjustment_id=proposal.pk, user=approver)

    assert posted.entry is not None and posted.entry.currency == "CNY"
    (expense,) = posted.entry.lines.filter(account__kind="expense")
    assert (expense.debit, expense.original_amount, expense.original_currency) == (Decimal("36.00"), 5, "USD")
    assert (expense.rate, expense.rate_source) == (Decimal("7.2"), "PBOC central parity")
    assert balanced()
    assert [b["currency"] for b in trial_balance(month=OCT)["currencies"]] == ["CNY"]


def test_a_usd_bill_adjustment_on_a_day_without_a_rate_is_refused(usd_usage: None) -> None:
    ExchangeRate.objects.filter(day=d(4)).delete()
    month_accrue(month=OCT)
    supplier = _usd_supplier()
    bill_import(supplier=supplier, month=OCT, content=_usd_bill("5.00"))
    proposal = adjustment_propose(supplier=supplier, month=OCT, user=factories.finance_user("prep"))

    with pytest.raises(AdjustmentError, match="no USD/CNY rate for 2026-10-04"):
        adjustment_approve(adjustment_id=proposal.pk, user=factories.finance_user("appr"))
    assert not JournalLine.objects.filter(entry__kind="bill").exists()


def test_a_functional_currency_the_price_book_does_not_know_is_refused_at_startup(settings: Any) -> None:
    settings.LEDGER_FUNCTIONAL_CURRENCY = "EUR"

    (error,) = functional_currency_check()

    assert error.id == "currencies.E001" and "'EUR'" in error.msg


def test_the_functional_currency_is_a_setting(settings: Any) -> None:
    settings.LEDGER_FUNCTIONAL_CURRENCY = "USD"
    factories.hourly_cost(hour=datetime(2026, 10, 3, 1, tzinfo=UTC), cost="2.00", currency="USD", model="gpt-4o")
    factories.hourly_cost(hour=datetime(2026, 10, 3, 1, tzinfo=UTC), cost="7.10")  # CNY
    rate_set(day=d(3), currency="CNY", rate="0.14", source="bank quote")  # to defaults to the functional USD

    month_accrue(month=OCT)

    assert set(JournalLine.objects.values_list("currency", flat=True)) == {"USD"}
    converted = _expense(3).get(original_currency="CNY")
    assert (converted.debit, converted.original_amount, converted.rate) == (
        Decimal("0.99"),
        Decimal("7.10"),
        Decimal("0.14"),
    )
    assert _booked(3) == Decimal("2.99")


def test_a_closed_months_lines_of_another_currency_are_reversed_and_booked_converted_when_accrued_again(
    settings: Any,
) -> None:
    """Books kept before currencies had a USD journal: a line in USD with no original."""
    settings.LEDGER_FUNCTIONAL_CURRENCY = "USD"  # books as they were: the USD row booked as USD
    factories.hourly_cost(hour=datetime(2026, 9, 10, 1, tzinfo=UTC), cost="2.00", currency="USD", model="gpt-4o")
    month_accrue(month=SEP)
    period_close(month=SEP, now=datetime(2026, 10, 5, tzinfo=UTC))
    settings.LEDGER_FUNCTIONAL_CURRENCY = "CNY"
    rate_set(day=date(2026, 9, 10), currency="USD", rate="7.1", source="PBOC central parity")

    month_accrue(month=SEP)

    adjusting = JournalLine.objects.filter(period_id=OCT, entry__kind="adjustment", account__kind="expense")
    assert sorted((ln.currency, ln.debit - ln.credit, ln.original_amount) for ln in adjusting) == [
        ("CNY", Decimal("14.20"), Decimal("2.00")),
        ("USD", Decimal("-2.00"), None),
    ]
    assert balanced()


def test_the_admin_refuses_a_rate_dated_beyond_what_the_books_hold(admin_client: Any) -> None:
    form = {"day": "9999-12-31", "currency": "USD", "to": "CNY", "rate": "7.1", "source": "PBOC"}

    answer = admin_client.post("/admin/currencies/exchangerate/add/", form)

    assert answer.status_code == 200 and "too far ahead" in answer.content.decode()
    assert not ExchangeRate.objects.exists()
