"""Spreadsheets: a table as XLSX (number formats, frozen header, period and currency, formula
guard) and CSV with a byte-order mark everywhere a table downloads; the month pack of a closed
month, whose totals are the trial balance's."""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import zipfile
from collections.abc import Callable
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from openpyxl import load_workbook
from openpyxl.workbook.workbook import Workbook

from apps.accounts.models import UserScope
from apps.audits.models import AuditReport
from apps.audits.services import summary_markdown
from apps.common.sheets import (
    BOM,
    XLSX_TYPE,
    FormatError,
    sheet_name,
    table_download,
    table_response,
    workbook_xlsx,
)
from apps.common.tables import Column, Table
from apps.ledger.models import CloseRequest, CostCentre, ElasticWindow, Finding
from apps.ledger.services.periods import period_close
from apps.plans.planning import budget_set, revenue_set
from tests import factories
from tests.ledger.helpers import DAY1, SEP, at

pytestmark = [pytest.mark.django_db, pytest.mark.books_in("UTC")]
Role = Callable[[str | None], Client]
AFTER_SEP = datetime(2026, 10, 3, tzinfo=UTC)
PACK = "/finance/pack/2026-09.xlsx"
ARTIFACTS = Path(os.environ.get("COSTPLATFORM_ARTIFACTS") or Path(__file__).resolve().parents[2] / "test-artifacts")
CHECKLIST = [
    {"key": "unpriced", "label": "Unpriced models", "value": 0, "ok": True, "detail": ""},
    {"key": "open_findings", "label": "Open findings", "value": "2", "ok": False, "detail": "=see findings"},
]


def sample_table() -> Table:
    columns = [
        Column("name", "Name"),
        Column("amount", "Amount", "money"),
        Column("share", "Share", "pct"),
        Column("tokens", "Tokens", "int"),
        Column("day", "Day", "date"),
        Column("at", "At", "datetime"),
    ]
    rows = [
        {
            "name": '=HYPERLINK("http://evil","x")',
            "amount": Decimal("1234.5"),
            "share": Decimal("0.25"),
            "tokens": 12_000,
            "day": date(2026, 9, 30),
            "at": datetime(2026, 9, 30, 16, 30, tzinfo=UTC),
        },
        {"name": "客服中心", "amount": Decimal("-2.00"), "share": None, "tokens": 0, "day": None, "at": None},
    ]
    return Table(name="sample", title="Spend", columns=columns, rows=rows, currency="CNY", period="2026-09")


def workbook(content: bytes) -> Workbook:
    return load_workbook(io.BytesIO(content))


def values(book: Workbook, sheet: str) -> list[tuple[Any, ...]]:
    return list(book[sheet].iter_rows(values_only=True))


# --- a table as XLSX and CSV ------------------------------------------------------------------


def test_it_writes_a_table_as_xlsx_with_number_formats_and_a_frozen_header(settings: Any) -> None:
    settings.ACCOUNTING_TZ = "Asia/Shanghai"
    response = table_response(sample_table(), fmt="xlsx", filename="spend-2026-09")

    assert response["Content-Type"] == XLSX_TYPE
    assert 'filename="spend-2026-09.xlsx"' in response["Content-Disposition"]
    sheet = workbook(response.content)["Spend"]
    assert sheet["A1"].value == "Spend · Period: 2026-09 · Currency: CNY"
    assert [c.value for c in sheet[2]] == ["Name", "Amount (CNY)", "Share", "Tokens", "Day", "At"]
    assert sheet.freeze_panes == "A3"
    row = sheet[3]
    assert [c.number_format for c in row[1:]] == ["#,##0.00", "0.0%", "#,##0", "yyyy-mm-dd", "yyyy-mm-dd hh:mm"]
    assert (row[1].value, row[2].value, row[3].value) == (1234.5, 0.25, 12_000)
    assert row[4].value == datetime(2026, 9, 30)
    assert row[5].value == datetime(2026, 10, 1, 0, 30)  # 16:30 UTC is half past midnight in Shanghai
    assert sheet["B4"].value == -2 and sheet["C4"].value is None
    assert sheet.column_dimensions["A"].width >= len('=HYPERLINK("http://evil","x")')


def test_it_stores_formula_like_text_as_text_in_xlsx() -> None:
    content = workbook_xlsx([sample_table()])

    cell = workbook(content)["Spend"]["A3"]
    assert cell.data_type == "s" and cell.value == '\'=HYPERLINK("http://evil","x")'
    with zipfile.ZipFile(io.BytesIO(content)) as xlsx:
        sheet_xml = xlsx.read("xl/worksheets/sheet1.xml").decode()
    assert "<f>" not in sheet_xml and "<f " not in sheet_xml  # no formula anywhere


def test_it_names_sheets_validly_and_uniquely() -> None:
    taken: set[str] = set()

    names = [sheet_name(t, taken) for t in ("Spend: a/b [x]?*", "A" * 40, "a" * 40, "")]

    assert names[0] == "Spend  a b  x" and all(len(n) <= 31 for n in names)
    assert names[1] == "A" * 31 and names[2] == "a" * 27 + " (2)" and names[3] == "Sheet"


def test_it_downloads_a_table_as_csv_with_a_bom_and_refuses_other_formats() -> None:
    response = table_response(sample_table(), fmt="csv", filename="spend")

    assert response.content.startswith(BOM.encode())
    rows = list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))
    assert rows[0] == ["Name", "Amount", "Share", "Tokens", "Day", "At"]
    assert rows[1] == [
        '\'=HYPERLINK("http://evil","x")',
        "1234.5",
        "0.25",
        "12000",
        "2026-09-30",
        "2026-09-30T16:30:00+00:00",
    ]
    assert rows[2] == ["客服中心", "-2.00", "", "0", "", ""]
    with pytest.raises(FormatError, match="choose csv or xlsx"):
        table_response(sample_table(), fmt="pdf", filename="spend")
    refused = table_download(sample_table(), fmt="pdf", filename="spend")
    assert refused.status_code == 400 and refused.content.decode() == "No download format 'pdf': choose csv or xlsx."
    assert table_download(sample_table(), fmt="xlsx", filename="spend")["Content-Type"] == XLSX_TYPE


# --- CSV with a byte-order mark everywhere ------------------------------------------------------


def test_every_csv_download_starts_with_the_bom(as_role: Role, booked_sep: None) -> None:
    at_ = datetime(2026, 10, 1, 4, tzinfo=UTC)
    AuditReport.objects.create(month=SEP, currency="CNY", tokens=10, savings_tokens=5, started_at=at_, finished_at=at_)
    finance = as_role("finance")
    for url in (
        "/api/v1/ledger/trial-balance?period=2026-09&format=csv",
        "/api/v1/ledger/matrix?from=2026-09&to=2026-09&format=csv",
        "/api/v1/ledger/findings?period=2026-09&format=csv",
        "/audits/2026-09/?download=csv",
    ):
        response = finance.get(url)
        assert response.status_code == 200 and response["Content-Type"].startswith("text/csv"), url
        assert response.content.startswith(b"\xef\xbb\xbf"), url
    focus = b"".join(finance.get("/api/v1/exports/focus?period=2026-09").streaming_content)
    assert focus.startswith(b"BilledCost,"), "FOCUS files are for tools: no BOM"


# --- the month pack -------------------------------------------------------------------------------


@pytest.fixture
def booked_sep() -> None:
    """September booked and closed: effective spend, waste in and out of marketing's campaign
    window, budgets, revenue, cost-centre names and the findings the close makes."""
    CostCentre.objects.create(business_line="customer-service", code="CC-1001", name="Customer service")
    ElasticWindow.objects.create(business_line="marketing", name="campaign", start=at(DAY1), end=at(DAY1, 12))
    factories.hourly_cost(hour=at(DAY1, 1), cost="10.00")
    factories.hourly_cost(hour=at(DAY1, 2), cost="2.50", reason="waste.aborted", component="output")
    for hour, cost in ((3, "4.00"), (14, "1.25")):  # in the window at 03:00, outside at 14:00
        factories.hourly_cost(
            hour=at(DAY1, hour), cost=cost, reason="waste.truncated", component="output",
            dims={"business_line": "marketing"},
        )  # fmt: skip
    budget_set(business_line="customer-service", month=SEP, amount=Decimal("20"), currency="CNY")
    revenue_set(business_line="marketing", month=SEP, amount=Decimal("100"), currency="CNY")
    period_close(month=SEP, now=AFTER_SEP)


@pytest.fixture
def approved(booked_sep: None) -> CloseRequest:
    preparer, approver = factories.finance_user("prep"), factories.finance_user("appr")
    return CloseRequest.objects.create(
        month=SEP, state="approved", checklist=CHECKLIST, prepared_by=preparer, note="ok",
        decided_by=approver, decided_at=datetime(2026, 10, 2, 9, tzinfo=UTC),
    )  # fmt: skip


def pack_of(client: Client) -> Workbook:
    response = client.get(PACK)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == XLSX_TYPE
    assert 'filename="month-pack-2026-09' in response["Content-Disposition"]
    return workbook(response.content)


def test_it_makes_the_month_pack_whose_totals_are_the_trial_balance(as_role: Role, approved: CloseRequest) -> None:
    finance = as_role("finance")

    book = pack_of(finance)

    assert book.sheetnames == [
        "Month pack 2026-09", "Checklist as approved", "Trial balance", "Spend by account & cost centre",
        "Budget vs actual", "Month-end findings", "Waste reconciled", "Waste by reason",
    ]  # fmt: skip
    (api,) = finance.get("/api/v1/ledger/trial-balance?period=2026-09").json()["currencies"]
    rows = values(book, "Trial balance")[2:]
    total = next(r for r in rows if r[2] == "Total")
    assert (total[3], total[4], total[5], total[6]) == (float(api["debits"]), float(api["credits"]), 0, "yes")
    accounts = {r[1]: (r[3], r[4]) for r in rows if r[1]}
    assert accounts == {a["code"]: (float(a["debits"]), float(a["credits"])) for a in api["accounts"]}
    assert book["Trial balance"]["A1"].value == "Trial balance · Period: 2026-09 · Currency: CNY"
    assert book["Trial balance"].freeze_panes == "A3" and book["Trial balance"]["D3"].number_format == "#,##0.00"


def test_it_puts_the_cover_and_the_checklist_as_approved_first(as_role: Role, approved: CloseRequest) -> None:
    book = pack_of(as_role("admin"))

    cover = dict(values(book, "Month pack 2026-09")[2:])
    assert cover["Month"] == "2026-09" and cover["Accounting time zone"] == "UTC" and cover["Currency"] == "CNY"
    assert (cover["Prepared by"], cover["Approved by"]) == ("prep", "appr")
    assert cover["Closed at"] == "2026-10-03 00:00 (UTC)" and cover["Business lines"] == "all"
    assert cover["Expense posted"] == "17.75 CNY" and cover["Month-end findings"] == str(Finding.objects.count())
    assert values(book, "Checklist as approved")[2:] == [
        ("Unpriced models", 0, "yes", None),
        ("Open findings", "2", "no", "'=see findings"),
    ]


def test_it_says_when_a_month_was_closed_without_an_approved_request(as_role: Role, booked_sep: None) -> None:
    book = pack_of(as_role("finance"))

    assert values(book, "Checklist as approved")[2][0] == "This month was closed without an approved close request."
    assert dict(values(book, "Month pack 2026-09")[2:])["Approved by"] == "(closed without an approved request)"


def test_it_fills_spend_budget_findings_and_waste_with_cost_centre_names(as_role: Role, booked_sep: None) -> None:
    book = pack_of(as_role("finance"))

    spend = {(r[0], r[2], r[3]): (r[5], r[6]) for r in values(book, "Spend by account & cost centre")[2:]}
    assert spend[("6401.01", "CC-1001", "Customer service")] == (10, 1000)
    assert spend[("6401.03", None, "marketing")] == (4, 1000)  # waste inside the window: elastic account
    budget = {r[1]: r[2:6] for r in values(book, "Budget vs actual")[2:]}
    assert budget["Customer service"] == ("CNY", 20, 12.5, 0.625)
    assert book["Budget vs actual"]["F3"].number_format == "0.0%"
    # Two token figures, each named (docs/budgets.md): what a token budget counts, what was booked.
    assert values(book, "Budget vs actual")[1][-3:] == ("Tokens used", "Token budget used", "Tokens booked")
    kinds = {(r[0], r[2]) for r in values(book, "Month-end findings")[2:]}
    assert kinds == {(f.kind, f.business_line or "(company)") for f in Finding.objects.filter(period=SEP)} != set()
    waste = {(r[0], r[1]): r[2:] for r in values(book, "Waste by reason")[2:]}
    assert waste == {
        ("CC-1001 Customer service", "waste.aborted"): (1000, 2.5, 0, 0),
        ("marketing", "waste.truncated"): (2000, 5.25, 1000, 4),
    }
    reconciled = values(book, "Waste reconciled")
    assert reconciled[0][0] == "Waste reconciled · Period: 2026-09 · Currency: CNY" and len(reconciled) == 4


def test_it_gives_a_scoped_finance_user_the_pack_of_their_lines(approved: CloseRequest) -> None:
    user = factories.finance_user("scoped-fin")
    UserScope.objects.create(user=user, business_lines=["marketing"])
    client = Client()
    client.force_login(user)

    book = pack_of(client)

    assert "Checklist as approved" not in book.sheetnames  # company-wide figures
    assert dict(values(book, "Month pack 2026-09")[2:])["Business lines"] == "marketing"
    centres = {r[3] for r in values(book, "Spend by account & cost centre")[2:]}
    assert centres == {"marketing"}
    total = next(r for r in values(book, "Trial balance")[2:] if r[2] == "Total")
    assert (total[3], total[4], total[6]) == (5.25, 5.25, "yes")  # each entry balances per cost centre
    assert "customer-service" not in str([values(book, s) for s in book.sheetnames])


def test_it_writes_the_pack_in_the_users_language(approved: CloseRequest) -> None:
    client = Client(HTTP_ACCEPT_LANGUAGE="zh-hans")
    client.force_login(User.objects.get(username="appr"))

    book = pack_of(client)

    assert "试算平衡表" in book.sheetnames and book.sheetnames[0] == "月结包 2026-09"
    assert values(book, "试算平衡表")[1][:4] == ("币种", "科目代码", "科目", "借方 (CNY)")


def test_it_answers_409_for_an_open_month_and_refuses_other_roles(as_role: Role, booked_sep: None) -> None:
    finance = as_role("finance")

    response = finance.get("/finance/pack/2026-10.xlsx")
    assert response.status_code == 409
    assert "2026-10 is not closed: the month pack is made for closed months." in response.content.decode()
    assert finance.get("/finance/pack/2026-13.xlsx").status_code == 404
    assert as_role("engineer").get(PACK).status_code == 403
    assert as_role(None).get(PACK).status_code == 302


def test_the_audit_summary_links_the_pack_of_a_closed_month(booked_sep: None, settings: Any) -> None:
    settings.ALERTS_SITE_URL = "https://cost.example.com"
    at_ = datetime(2026, 10, 1, 4, tzinfo=UTC)
    closed = AuditReport(month=SEP, currency="CNY", tokens=1, savings_tokens=0, started_at=at_, finished_at=at_)
    still_open = AuditReport(
        month=date(2026, 10, 1), currency="CNY", tokens=1, savings_tokens=0, started_at=at_, finished_at=at_
    )

    text = summary_markdown(closed, [], whole=True)

    assert "[Month pack 2026-09](https://cost.example.com/finance/pack/2026-09.xlsx)" in text
    assert "Month pack" not in summary_markdown(still_open, [], whole=True)


# --- the rendered first sheet --------------------------------------------------------------------


def render_first_sheet(xlsx: bytes, png: Path) -> None:
    """The top of the workbook's first page as a PNG: LibreOffice to PDF, poppler to PNG."""
    office = shutil.which("libreoffice") or shutil.which("soffice")
    if not office or not shutil.which("pdftoppm"):
        pytest.fail("libreoffice and pdftoppm render the sheet: `make browser` installs them")
    work = png.parent / "month-pack-render"
    work.mkdir(parents=True, exist_ok=True)
    (work / "month-pack.xlsx").write_bytes(xlsx)
    subprocess.run(
        [office, "--headless", "--convert-to", "pdf", "--outdir", str(work), str(work / "month-pack.xlsx")],
        check=True, capture_output=True, timeout=180,
    )  # fmt: skip
    subprocess.run(
        ["pdftoppm", "-png", "-r", "80", "-f", "1", "-l", "1", "-x", "0", "-y", "0", "-W", "660", "-H", "360",
         "-singlefile", str(work / "month-pack.pdf"),
         str(png.with_suffix(""))],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip


@pytest.mark.slow
def test_it_renders_the_first_sheet_of_the_month_pack(as_role: Role, approved: CloseRequest) -> None:
    response = as_role("finance").get(PACK)
    png = ARTIFACTS / "month-pack.png"
    png.unlink(missing_ok=True)

    render_first_sheet(response.content, png)

    assert png.stat().st_size > 5_000
