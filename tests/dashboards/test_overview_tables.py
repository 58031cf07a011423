"""The overview's own tables as people work with them (issue 32, item 3): the tokens by class and
the top wasteful values of each dim sort by any column (each table by a parameter of its own, so
sorting one leaves the others), download as shown, and carry a cost column with its total for a
role that sees money, costliest first; an engineer sees no money on them."""

from __future__ import annotations

import csv
import html
import io
import re
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from apps.dashboards.filters import filters_from
from apps.dashboards.selectors import Overview, overview
from tests.dashboards.test_tables import RANGE, download

pytestmark = pytest.mark.django_db


def test_the_classes_table_sorts_and_downloads_as_shown(traffic: None, as_user: Any) -> None:
    client = as_user("viewer")
    _name, by_tokens = download(client, f"/overview/?{RANGE}&download=classes")
    assert by_tokens[0] == ["Class", "Tokens", "Share of all tokens"]
    tokens = [int(r[1]) for r in by_tokens[1:]]
    assert tokens == sorted(tokens, reverse=True) and sum(tokens) > 0 and len(tokens) == 4
    name, by_name = download(client, f"/overview/?{RANGE}&sort-classes=label&download=classes&format=csv")
    assert "sort=label" in name
    labels = [r[0] for r in by_name[1:]]
    assert labels == sorted(labels, key=str.casefold) and labels != [r[0] for r in by_tokens[1:]]


def test_sorting_one_table_leaves_the_others_and_every_link_keeps_it(traffic: None, as_user: Any) -> None:
    page = as_user("viewer").get(f"/overview/?{RANGE}&sort-classes=label").content.decode()
    classes = page[page.index('id="classes"') : page.index("</table>", page.index('id="classes"'))]
    lines = page[page.index('id="lines"') : page.index("</table>", page.index('id="lines"'))]
    assert 'data-sort="label" aria-sort="ascending"' in classes
    assert 'aria-sort="ascending"' not in lines
    # the business lines' sort links keep the classes' sort, and set their own parameter
    tokens_link = re.search(r'data-sort="tokens"[^>]*><a href="([^"]+)"', lines)
    assert tokens_link is not None
    query = parse_qs(urlparse(html.unescape(tokens_link.group(1))).query)
    assert query["sort-classes"] == ["label"] and query["sort"] == [
        "tokens"
    ]  # sorted by tokens, largest first: the link turns it


def test_top_waste_is_costliest_first_with_a_total_for_finance(traffic: None, as_user: Any, settings: Any) -> None:
    client = as_user("finance")
    page = client.get(f"/overview/?{RANGE}").content.decode()
    assert "top-waste-feature" in page
    _name, rows = download(client, f"/overview/?{RANGE}&download=top-waste-feature")
    assert rows[0][-1] == "Cost (CNY)"
    costs = [Decimal(r[-1] or 0) for r in rows[1:]]
    assert costs == sorted(costs, reverse=True) and costs[0] > 0
    query = f"{RANGE}&sort-top-waste-feature=previous&download=top-waste-feature"
    _name, by_previous = download(client, f"/overview/?{query}")
    previous = [int(r[2]) for r in by_previous[1:]]
    assert previous == sorted(previous, reverse=True)


def test_the_class_costs_add_up_to_the_priced_spend(traffic: None, as_user: Any, rf: Any) -> None:
    request = rf.get(f"/overview/?{RANGE}")
    found: Overview = overview(flt=filters_from(request), lines=None, money=True)
    by_class = {c: sum(cost.values(), Decimal(0)) for c, cost in found.class_spend.items()}
    assert by_class and sum(by_class.values()) == sum(found.spend.values())
    _name, rows = download(as_user("finance"), f"/overview/?{RANGE}&download=classes")
    assert rows[0][-1] == "Cost (CNY)"
    shown = {r[0]: Decimal(r[-1] or 0) for r in rows[1:]}
    assert sum(shown.values()) == sum(by_class.values())


def test_an_engineer_sees_tokens_but_no_money_on_the_overview_tables(traffic: None, as_user: Any) -> None:
    client = as_user("engineer")
    for table in ("classes", "top-waste-feature"):
        response = client.get(f"/overview/?{RANGE}&download={table}")
        rows = list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))
        assert not any(h.startswith("Cost") for h in rows[0]), table
