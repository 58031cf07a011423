"""CSV injection: a business line, model or finding named like a formula reaches every export
as text a spreadsheet will not run (a leading single quote, the OWASP rule), and numbers,
negative ones included, stay numbers."""

from __future__ import annotations

import csv
import io
from datetime import UTC, date, datetime

import pytest
from django.test import Client

from apps.audits.models import AuditFinding, AuditReport
from apps.common.csvcells import safe_cell
from apps.ledger.services.accrual import month_accrue
from tests import factories

pytestmark = pytest.mark.django_db
SEP = date(2026, 9, 1)
HOUR = datetime(2026, 9, 10, 1, tzinfo=UTC)
LINE = '=HYPERLINK("http://evil.example/x","click")'
MODEL = "@SUM(1+1)*cmd|' /C calc'!A0"


def finance() -> Client:
    browser = Client()
    browser.force_login(factories.finance_user("csv-finance", role="finance"))
    return browser


def rows_of(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def cells(text: str) -> set[str]:
    return {cell for row in rows_of(text) for cell in row}


@pytest.fixture
def booked() -> None:
    factories.hourly_cost(hour=HOUR, cost="2.50", model=MODEL, dims={"business_line": LINE})
    month_accrue(month=SEP)


@pytest.mark.parametrize(
    ("given", "written"),
    [
        ("=1+1", "'=1+1"),
        ("+cmd", "'+cmd"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1+1", "'\t=1+1"),
        ("\r=1+1", "'\r=1+1"),
        ("-12.50", "-12.50"),
        ("+3", "+3"),
        ("-1e3", "-1e3"),
        ("search", "search"),
        ("", ""),
        (-12.5, -12.5),
        (None, None),
    ],
)
def test_it_quotes_formula_text_and_leaves_numbers(given: object, written: object) -> None:
    assert safe_cell(given) == written


def test_it_neutralises_formula_cells_in_the_focus_export(booked: None) -> None:
    response = finance().get("/api/v1/exports/focus?period=2026-09")
    text = b"".join(response.streaming_content).decode()

    (row,) = csv.DictReader(io.StringIO(text))
    assert row["SubAccountId"] == row["SubAccountName"] == "'" + LINE
    assert row["ResourceId"] == "'" + MODEL
    assert row["BilledCost"] == "2.50"
    assert not any(cell.startswith(("=", "@")) for cell in cells(text))


def test_it_neutralises_formula_cells_in_the_ledger_api_csv(booked: None) -> None:
    response = finance().get("/api/v1/ledger/matrix?from=2026-09&to=2026-09&format=csv")

    assert response["Content-Type"].startswith("text/csv")
    found = cells(response.content.decode())
    assert "'" + LINE in found and LINE not in found


def test_it_neutralises_formula_cells_in_the_finance_dashboard_download(booked: None) -> None:
    response = finance().get("/finance/?month=2026-09&download=spend")

    rows = rows_of(response.content.decode())
    assert rows[1] == ["'" + LINE, "2.50", "0", "0", "0", "0", "0", "2.50"]


def test_it_neutralises_formula_cells_in_the_audit_csv() -> None:
    at = datetime(2026, 10, 1, 4, tzinfo=UTC)
    report = AuditReport.objects.create(
        month=SEP, currency="CNY", tokens=10, savings_tokens=5, started_at=at, finished_at=at
    )
    AuditFinding.objects.create(
        report=report,
        position=1,
        kind="zombie",
        title="+cmd|' /C calc'!A0",
        dims={"business_line": "search"},
        model=MODEL,
        tokens=10,
        savings_tokens=5,
        evidence="-2+3",
        suggestion="=1+1",
    )

    response = finance().get("/audits/2026-09/?download=csv")

    (row,) = csv.DictReader(io.StringIO(response.content.decode("utf-8-sig")))
    assert (row["title"], row["model"], row["evidence"], row["suggestion"]) == (
        "'+cmd|' /C calc'!A0",
        "'" + MODEL,
        "'-2+3",
        "'=1+1",
    )
    assert row["tokens"] == "10"
