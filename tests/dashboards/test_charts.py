"""One chart theme for every plotly figure: the overview's chart and sparklines and the finance
page's charts share the type and colours, draw time axes as dates, and a chart of one period says
so (a narrow bar under its period's label, and a note) instead of one bar across the width."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from typing import Any

import plotly.graph_objects as go
import pytest
from django.test import Client
from django.utils import translation

from apps.common.charts import COLOURS, FONT, themed
from apps.finance.tables import trend_table
from apps.ledger.names import Names
from tests.dashboards.conftest import T0, priced
from tests.factories import record

pytestmark = pytest.mark.django_db


def layouts(page: str) -> list[dict[str, Any]]:
    """The layout of each plotly figure on a page (the third argument of Plotly.newPlot)."""
    found = []
    decoder = json.JSONDecoder()
    for match in re.finditer(r"Plotly\.newPlot\(\s*\"[^\"]+\",\s*", page):
        rest = page[match.end() :]
        _data, end = decoder.raw_decode(rest)
        layout, _ = decoder.raw_decode(rest[end:].lstrip(", \n"))
        found.append(layout)
    return found


def test_it_draws_the_overview_in_the_theme_with_a_date_axis(traffic: None, as_user: Callable[..., Client]) -> None:
    page = as_user("engineer").get("/overview/?range=24h").content.decode()

    found = layouts(page)
    chart, sparks = found[0], found[1:]
    assert sparks, "no sparkline drawn"
    assert chart["xaxis"]["type"] == "date" and chart["font"]["family"] == FONT["family"]
    assert all(spark["font"]["family"] == FONT["family"] for spark in sparks)
    assert "annotations" not in chart  # three hours of traffic: more than one period


def test_it_says_when_the_chart_has_one_period(collector: Any, as_user: Callable[..., Client]) -> None:
    at = (T0 + timedelta(minutes=10)).isoformat()
    assert collector.send([record(ts=at, prompt_hash=None), record(ts=at, prompt_hash=None)]).json()["accepted"] == 2
    priced()
    client = as_user("engineer")

    chart = layouts(client.get("/overview/?range=24h").content.decode())[0]
    assert [note["text"] for note in chart["annotations"]] == ["One hour so far"]
    assert len(chart["xaxis"]["tickvals"]) == 1 and len(chart["xaxis"]["range"]) == 2

    client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    chinese = layouts(client.get("/overview/?range=24h").content.decode())[0]
    assert [note["text"] for note in chinese["annotations"]] == ["目前只有一小时"]


def test_it_draws_one_month_of_the_finance_trend_as_one_narrow_bar() -> None:
    names = Names(accounts={"6100": "6100 Compute"}, centres={})
    month = {"account": "6100", "amount": Decimal(5)}
    with translation.override("en"):
        one = trend_table(trend=[{"month": "2026-11", **month}], names=names, currency="CNY")
        months = [{"month": "2026-10", **month}, {"month": "2026-11", **month}]
        two = trend_table(trend=months, names=names, currency="CNY")

    (alone,) = layouts(one.figure or "")
    assert [note["text"] for note in alone["annotations"]] == ["One month so far"]
    assert alone["xaxis"]["type"] == "date" and alone["xaxis"]["ticktext"] == ["2026-11"]
    (both,) = layouts(two.figure or "")
    assert "annotations" not in both and both["xaxis"]["tickformat"] == "%Y-%m"
    assert both["font"]["family"] == FONT["family"] and both["colorway"] == COLOURS


def test_it_narrows_a_single_bar_to_its_period() -> None:
    fig = themed(go.Figure([go.Bar(x=["2026-11-02"], y=[4])]), period="day")
    assert fig.data[0].width == pytest.approx(0.6 * 86_400_000)
    assert fig.layout.xaxis.ticktext == ("2026-11-02",)
    wide = themed(go.Figure([go.Bar(x=["2026-11-02", "2026-11-03"], y=[4, 5])]), period="day")
    assert wide.data[0].width is None and not wide.layout.annotations
