"""The finance page as finance reads it: named accounts and cost centres, formatted money and
percentages, translated headers, month-over-month change and budget variance from booked
records, waste reconciled to /waste/, drill-through from a cell to one record, and a scoped
user's lines only on the page, the journal page, the trial balance, the matrix and FOCUS.

Records go through the real pipeline: the collector API, classification, pricing, accrual."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, date, datetime
from decimal import Decimal
from html import unescape
from typing import Any

import pytest
from django.test import Client

from apps.accounts.models import UserScope
from apps.common.formats import money_text, pct_text
from apps.dashboards.filters import Filters
from apps.dashboards.selectors import breakdown
from apps.ledger.models import CostCentre, ElasticWindow
from apps.ledger.services.accrual import month_accrue
from apps.plans.models import Budget
from apps.pricing.services import hours_price, price_set
from tests import factories
from tests.conftest import Collector
from tests.ledger.helpers import NOV, OCT, spend

pytestmark = [pytest.mark.django_db, pytest.mark.books_in("UTC")]
PAGE = "/finance/?month=2026-11"
NOV_DAY, OCT_DAY = date(2026, 11, 10), date(2026, 10, 12)


def at(day: date, hour: int, minute: int = 5) -> str:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC).isoformat()


def records(
    day: date, line: str, *, ok: int, timeouts: int, model: str = "qwen2.5-7b-instruct"
) -> list[dict[str, Any]]:
    dims = {"business_line": line, "feature": "faq", "step": "reason"}
    found = [factories.record(ts=at(day, 1 + i % 3), model=model, dims=dims, prompt_hash=None) for i in range(ok)]
    found += [
        factories.record(
            ts=at(day, 1 + i % 3),
            model=model,
            dims=dims,
            prompt_hash=None,
            **{"outcome.status": "timeout", "outcome.finish_reason": None},
        )
        for i in range(timeouts)
    ]
    return found


def price(pattern: str = "*") -> None:
    prices = {"input": Decimal("200000"), "cached_input": Decimal("50000"), "output": Decimal("800000")}
    price_set(model_pattern=pattern, prices=prices, effective_from=datetime(2026, 9, 1, tzinfo=UTC))
    hours_price(start=datetime(2026, 10, 1, tzinfo=UTC), end=datetime(2026, 12, 1, tzinfo=UTC))


def send(collector: Collector, found: list[dict[str, Any]]) -> None:
    response = collector.send(found, on_time=True)
    assert response.status_code == 200 and response.json()["accepted"] == len(found), response.content


@pytest.fixture
def books(collector: Collector) -> None:
    """October and November of two business lines, booked; a budget for support in November."""
    send(collector, records(OCT_DAY, "support", ok=2, timeouts=1) + records(OCT_DAY, "search", ok=1, timeouts=0))
    send(collector, records(NOV_DAY, "support", ok=3, timeouts=2) + records(NOV_DAY, "search", ok=2, timeouts=1))
    price()
    Budget.objects.create(business_line="support", month=NOV, amount=Decimal("10000.00"), currency="CNY", tokens=1000)
    CostCentre.objects.create(business_line="support", code="CC-1001", name="Customer support")
    month_accrue(month=OCT)
    month_accrue(month=NOV)


def finance(name: str = "fin", lines: list[str] | None = None) -> Client:
    user = factories.finance_user(name, role="finance")
    if lines:
        UserScope.objects.create(user=user, business_lines=lines)
    client = Client()
    client.force_login(user)
    return client


def table(client: Client, name: str, page: str = PAGE) -> list[dict[str, str]]:
    response = client.get(f"{page}&download={name}")
    assert response.status_code == 200 and response.content.startswith("\ufeff".encode())
    return list(csv.DictReader(io.StringIO(response.content.decode("utf-8-sig"))))


def section(html: str, name: str) -> str:
    return html.split(f'<section id="{name}">', 1)[1].split("</section>", 1)[0]


def headers(html: str) -> list[str]:
    return [
        unescape(re.sub(r"<[^>]+>", "", h)).strip()
        for h in re.findall(r"<(?:th|h2)[^>]*>(.*?)</(?:th|h2)>", html, re.S)
    ]


def links(html: str) -> list[str]:
    return [unescape(h) for h in re.findall(r'href="([^"]+)"', html)]


# --- formatting --------------------------------------------------------------------------------


def test_it_formats_money_percentages_and_missing_values() -> None:
    assert money_text(Decimal("1234567.891")) == "1,234,567.89"
    assert money_text(Decimal("-97.5")) == "(97.50)" and money_text(Decimal(0)) == "0.00"
    assert money_text(None) == "\u2014" and pct_text(None) == "\u2014"
    assert pct_text(Decimal("0.8312")) == "83.1 %" and pct_text(Decimal("-0.05")) == "-5.0 %"


def test_it_shows_names_formatted_money_and_clear_states(books: None) -> None:
    html = finance().get(PAGE).content.decode()

    spent = section(html, "spend")
    assert "6401.04 Waste token expense (CNY)" in spent and "6401.01 Effective token expense (CNY)" in spent
    assert "CC-1001 Customer support" in spent and ">search<" in spent  # no cost centre set: the line's key
    centres = section(html, "budget")
    support = next(r for r in table(finance("f2"), "budget") if r["Cost centre"] == "CC-1001 Customer support")
    actual = Decimal(support["This month (CNY)"])
    variance = actual - 10000
    # Under budget, a month long gone: favourable (green), its sign and a word, never red.
    favourable = '<td class="{} variance favourable" data-side="under">{} <span class="side">under</span></td>'
    assert 1000 < actual < 10000 and favourable.format("money", money_text(variance)) in centres
    assert re.fullmatch(r"\(\d,\d{3}\.\d{2}\)", money_text(variance))
    assert favourable.format("pct", pct_text(variance / 10000)) in centres
    assert '<td class="money none">\u2014</td>' in centres  # search: no budget
    text = unescape(re.sub(r"<script.*?</script>|<[^>]+>", " ", html, flags=re.S))
    for raw in ("cost_centre", "budget_amount", "actual_amount", "amount_used", "business_line"):
        assert raw not in text
    assert all(not re.fullmatch(r"\d{4}\.\d{2}", h) for h in headers(html))  # never a bare account code


def test_it_translates_the_headers_to_chinese(books: None) -> None:
    client = finance()
    english = headers(client.get(PAGE).content.decode())
    chinese = headers(client.get(PAGE, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode())
    client.cookies["django_language"] = "zh-hans"
    by_cookie = headers(client.get(PAGE).content.decode())

    assert chinese == by_cookie and len(chinese) == len(english)
    assert "本月 (CNY)" in chinese and "成本中心" in chinese and "变动 (CNY)" in chinese
    assert "6401.04 浪费词元费用 (CNY)" in chinese  # the seeded chart's names translated
    # Left alone: paths (/waste/), currencies, CSV, XLSX, API, FOCUS.
    bare = [re.sub(r"/\w+/", "", h) for h in chinese]
    leftovers = [h for h in bare if re.search(r"\b(?!CNY|USD|CSV|XLSX|API|FOCUS)[A-Za-z]{3,}\b", h)]
    assert leftovers == [], leftovers


# --- month over month, budget variance ---------------------------------------------------------


def test_it_computes_change_and_variance_from_the_booked_records(books: None) -> None:
    nov, oct_ = spend(period_id=NOV), spend(period_id=OCT)
    rows = {r["Cost centre"]: r for r in table(finance(), "budget")}
    support = rows["CC-1001 Customer support"]
    now = sum(v for (_, cc), v in nov.items() if cc == "support")
    before = sum(v for (_, cc), v in oct_.items() if cc == "support")

    assert now > 0 and before > 0 and now != before
    assert Decimal(support["This month (CNY)"]) == now and Decimal(support["Previous month (CNY)"]) == before
    assert Decimal(support["Change (CNY)"]) == now - before
    assert Decimal(support["Change %"]) == ((now - before) / before).quantize(Decimal("0.0001"))
    assert Decimal(support["Budget (CNY)"]) == 10000 == Decimal(support["Budget to date (CNY)"])  # November is over
    assert Decimal(support["Variance to date (actual - budget) (CNY)"]) == now - 10000
    assert Decimal(support["Variance %"]) == ((now - 10000) / 10000).quantize(Decimal("0.0001"))
    assert Decimal(support["Forecast, month end (CNY)"]) == now
    assert rows["search"]["Budget (CNY)"] == "" and rows["Total"]["This month (CNY)"] == str(sum(nov.values()))
    # The budgeted lines have their own total; the whole month's (search has no budget) has none.
    assert Decimal(rows["Lines with a budget"]["Budget used"]) == (now / 10000).quantize(Decimal("0.0001"))
    assert rows["Total"]["Budget (CNY)"] == rows["Total"]["Budget used"] == ""
    accounts = {r["Account"]: r for r in table(finance("f2"), "accounts")}
    waste = accounts["6401.04 Waste token expense"]
    assert Decimal(waste["This month (CNY)"]) == sum(v for (a, _), v in nov.items() if a == "6401.04")
    assert Decimal(waste["Previous month (CNY)"]) == sum(v for (a, _), v in oct_.items() if a == "6401.04")


# --- waste, reconciled to /waste/ --------------------------------------------------------------


def page_waste(line: str) -> tuple[int, Decimal]:
    flt = Filters(
        datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC), "", {"business_line": line}, "waste"
    )
    (found,) = breakdown(flt=flt, lines=None, group="business_line", money=True)
    return found.tokens, found.cost["CNY"]


def test_it_reconciles_waste_with_the_waste_page(books: None) -> None:
    client = finance()
    rows = {r["Cost centre"]: r for r in table(client, "waste")}
    tokens, cost = page_waste("support")
    support = rows["CC-1001 Customer support"]

    assert tokens > 0 and int(support["Waste tokens (ledger)"]) == tokens == int(support["Waste tokens (/waste/)"])
    assert (
        Decimal(support["Waste (ledger) (CNY)"])
        == cost.quantize(Decimal("0.01"))
        == spend(period_id=NOV)[("6401.04", "support")]
    )
    assert support["Reconciliation"] == "agrees" and rows["search"]["Reconciliation"] == "agrees"
    link = next(h for h in links(section(client.get(PAGE).content.decode(), "waste")) if "support" in h)
    assert link == "/waste/?from=2026-11-01&to=2026-11-30&dims.business_line=support&class=waste"
    shown = client.get(link).content.decode()
    assert f"{tokens:,}" in shown and money_text(cost) in shown  # the page itself says the same


def test_it_counts_waste_inside_an_elastic_window(collector: Collector) -> None:
    ElasticWindow.objects.create(
        business_line="support",
        name="singles day",
        start=datetime(2026, 11, 10, tzinfo=UTC),
        end=datetime(2026, 11, 11, tzinfo=UTC),
    )
    send(collector, records(NOV_DAY, "support", ok=1, timeouts=2))
    price()
    month_accrue(month=NOV)
    support = table(finance(), "waste")[0]
    tokens, cost = page_waste("support")

    assert spend(period_id=NOV).get(("6401.04", "support"), 0) == 0  # all booked to the elastic account
    assert Decimal(support["Inside elastic windows, on other accounts (CNY)"]) == cost.quantize(Decimal("0.01")) > 0
    assert int(support["Waste tokens (ledger)"]) == tokens and support["Reconciliation"] == "agrees"


def test_it_says_by_how_much_and_why_the_books_differ_from_the_page(collector: Collector) -> None:
    send(
        collector,
        records(NOV_DAY, "support", ok=1, timeouts=2)
        + records(NOV_DAY, "support", ok=0, timeouts=1, model="llama-3-70b"),
    )
    price("qwen*")  # llama is not priced: /waste/ counts its tokens, the ledger cannot book them
    month_accrue(month=NOV)
    later = date(2026, 11, 20)
    send(collector, records(later, "support", ok=0, timeouts=1) + records(NOV_DAY, "support", ok=0, timeouts=1))
    price("qwen*")  # priced, not yet accrued: a day not accrued, and a day accrued before these rows
    support = table(finance(), "waste")[0]
    tokens, _ = page_waste("support")

    assert int(support["Waste tokens (/waste/)"]) == tokens > int(support["Waste tokens (ledger)"])
    assert int(support["Difference, tokens"]) == tokens - int(support["Waste tokens (ledger)"])
    assert Decimal(support["Difference (CNY)"]) > 0
    assert support["Reconciliation"].startswith("differs: ")
    why = support["Reconciliation"]
    assert "tokens not priced" in why and "not booked yet, on days not accrued: 2026-11-20" in why
    assert "priced after their day was accrued" in why


# --- drill-through -----------------------------------------------------------------------------


def test_it_drills_from_a_ledger_cell_down_to_one_record(books: None) -> None:
    client = finance()
    html = client.get(PAGE).content.decode()
    cell = next(h for h in links(section(html, "spend")) if "account=6401.04" in h and "cost_centre=support" in h)
    journal = client.get(cell)
    assert journal.status_code == 200
    lines = section(journal.content.decode(), "journal")
    assert "6401.04 Waste token expense" in lines and "CC-1001 Customer support" in lines
    usage = next(h for h in links(lines) if h.startswith("/waste/"))
    assert "from=2026-11-10&to=2026-11-10" in usage and "dims.business_line=support" in usage
    assert "model=qwen2.5-7b-instruct" in usage and "reason=waste.timeout" in usage
    breakdown_page = client.get(usage).content.decode()
    requests = next(h for h in links(breakdown_page) if h.startswith("/waste/requests/"))
    listed = client.get(requests).content.decode()
    record = next(h for h in links(listed) if h.startswith("/waste/record/"))
    shown = client.get(record)
    assert shown.status_code == 200 and "support" in shown.content.decode() and "timeout" in shown.content.decode()


# --- scoped users ------------------------------------------------------------------------------


def test_it_shows_a_scoped_user_only_their_lines_on_every_finance_view(books: None) -> None:
    scoped, everyone = finance("scoped", lines=["search"]), finance("all")
    views = {
        "page": PAGE,
        "journal": "/finance/journal/?month=2026-11",
        "matrix": "/api/v1/ledger/matrix?from=2026-10&to=2026-11",
        "journal api": "/api/v1/ledger/journal?period=2026-11",
        "budget vs actual": "/api/v1/ledger/budget-vs-actual?period=2026-11",
        "focus": "/api/v1/exports/focus?period=2026-11",
    }

    def body(client: Client, url: str) -> str:
        answer = client.get(url)
        assert answer.status_code == 200, (url, answer.status_code)
        return b"".join(answer.streaming_content).decode() if answer.streaming else answer.content.decode()  # type: ignore[attr-defined]

    for name, url in views.items():
        assert "support" in body(everyone, url) or "Customer support" in body(everyone, url), name
        seen = body(scoped, url)
        assert "support" not in seen and "Customer support" not in seen and "search" in seen, name
    balance = scoped.get("/api/v1/ledger/trial-balance?period=2026-11").json()
    assert balance["cost_centres"] == ["search"] and all(book["balanced"] for book in balance["currencies"])
    expense = sum(Decimal(a["debits"]) for a in balance["currencies"][0]["accounts"] if a["kind"] == "expense")
    assert expense == sum(v for (_, cc), v in spend(period_id=NOV).items() if cc == "search")
    other = everyone.get("/api/v1/ledger/journal?period=2026-11&cost_centre=support").json()["rows"][0]["id"]
    assert scoped.get(f"/api/v1/ledger/journal/{other}/usage").status_code == 404
    assert "search" in scoped.get(PAGE).content.decode().split('id="scope"')[1][:300]


def test_it_keeps_the_journal_page_from_other_roles(books: None) -> None:
    viewer = Client()
    viewer.force_login(factories.finance_user("v", role="viewer"))

    assert viewer.get("/finance/journal/?month=2026-11").status_code == 403
    assert finance().get("/finance/journal/?month=2026-13").status_code == 404
    assert finance("f3").get("/finance/journal/?month=2026-11&day=nope").status_code == 404


def test_it_pages_and_downloads_the_journal(books: None) -> None:
    client = finance()
    response = client.get("/finance/journal/?month=2026-11&cost_centre=search&download=journal")
    rows = list(csv.DictReader(io.StringIO(response.content.decode("utf-8-sig"))))

    assert rows and {r["Cost centre"] for r in rows} == {"search"}
    debits = sum(Decimal(r["Debit"]) for r in rows)
    assert debits == sum(Decimal(r["Credit"]) for r in rows) > 0
    assert (
        f"debits {money_text(debits)}"
        in client.get("/finance/journal/?month=2026-11&cost_centre=search").content.decode()
    )


def test_it_starts_the_month_at_its_first_day_for_the_waste_link() -> None:
    from apps.ledger.links import month_waste_href

    assert month_waste_href(month=date(2026, 2, 1), business_line="x", reason="waste.timeout") == (
        "/waste/?from=2026-02-01&to=2026-02-28&dims.business_line=x&reason=waste.timeout"
    )
    assert "dims.business_line" not in month_waste_href(month=date(2026, 2, 1), business_line="unassigned")


def test_it_steps_to_the_previous_month_in_one_click(books: None) -> None:
    client = finance()
    html = client.get(PAGE).content.decode()
    previous = re.search(r'id="previous-month" href="([^"]+)"', html).group(1)  # type: ignore[union-attr]

    assert unescape(previous) == "?month=2026-10&currency=CNY"
    rows = {r["Cost centre"]: r for r in table(client, "spend", "/finance/" + unescape(previous))}
    october = sum(v for (_, cc), v in spend(period_id=OCT).items() if cc == "support")
    assert Decimal(rows["CC-1001 Customer support"]["Total (CNY)"]) == october


def test_it_reconciles_by_accounting_days_in_shanghai(collector: Collector, settings: Any) -> None:
    settings.ACCOUNTING_TZ = "Asia/Shanghai"
    last_evening = factories.record(  # 23:30 on 30 November in Shanghai: November
        ts="2026-11-30T15:30:00+00:00",
        dims={"business_line": "support"},
        prompt_hash=None,
        **{"outcome.status": "timeout", "outcome.finish_reason": None},
    )
    first_night = factories.record(  # 00:30 on 1 December in Shanghai: December
        ts="2026-11-30T16:30:00+00:00",
        dims={"business_line": "support"},
        prompt_hash=None,
        **{"outcome.status": "timeout", "outcome.finish_reason": None},
    )
    send(collector, [last_evening, first_night])
    price()
    month_accrue(month=NOV)
    month_accrue(month=date(2026, 12, 1))
    november = table(finance(), "waste")[0]
    december = table(finance("f2"), "waste", "/finance/?month=2026-12")[0]

    assert november["Reconciliation"] == december["Reconciliation"] == "agrees"
    assert int(november["Waste tokens (ledger)"]) == int(december["Waste tokens (ledger)"]) > 0
    assert Decimal(november["Waste (ledger) (CNY)"]) == spend(period_id=NOV)[("6401.04", "support")]
    link = next(h for h in links(section(finance("f3").get(PAGE).content.decode(), "waste")) if h.startswith("/waste/"))
    assert link == "/waste/?from=2026-11-01&to=2026-11-30&dims.business_line=support&class=waste"


def test_it_downloads_every_table_as_xlsx_with_the_csv_figures(books: None) -> None:
    from openpyxl import load_workbook

    client = finance()
    html = client.get(PAGE).content.decode()
    names = re.findall(r'<section id="([a-z_]+)">', html)
    assert {"spend", "budget", "accounts", "waste", "trial_balance"} <= set(names)
    for name in names:
        response = client.get(f"{PAGE}&download={name}&format=xlsx")
        assert response.status_code == 200, name
        sheet = load_workbook(io.BytesIO(response.content)).active
        assert sheet is not None and sheet.freeze_panes is not None, name
    spend = table(client, "spend")
    sheet = load_workbook(io.BytesIO(client.get(f"{PAGE}&download=spend&format=xlsx").content)).active
    assert sheet is not None
    values = [row for row in sheet.iter_rows(values_only=True) if row and row[0] is not None]
    header = next(i for i, row in enumerate(values) if row[0] == next(iter(spend[0])))
    assert len(values) - header - 1 == len(spend)  # the same rows under the same header
    refused = client.get(f"{PAGE}&download=spend&format=ods")
    assert refused.status_code == 400 and "choose csv or xlsx" in refused.content.decode()


def test_it_leads_from_the_month_to_its_close_its_plans_and_once_closed_its_pack(books: None) -> None:
    from apps.ledger.services.periods import period_close

    client = finance()
    open_links = links(client.get(PAGE).content.decode())
    assert "/finance/close/2026-11/" in open_links and "/finance/plans/2026-11/" in open_links
    assert "/finance/pack/2026-11.xlsx" not in open_links  # a pack is made for closed months

    period_close(month=NOV)
    closed_links = links(client.get(PAGE).content.decode())
    assert "/finance/pack/2026-11.xlsx" in closed_links
    assert client.get("/finance/pack/2026-11.xlsx").status_code == 200
