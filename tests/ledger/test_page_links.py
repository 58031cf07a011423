"""The books link to the pages of the apps above them by names of their own
(`apps.ledger.links.PAGES`, an `apps.common.links.PageLinks`); each app registers its page
(`page_link_register`, from its ready()), so the books name none of those apps."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

import pytest

from apps.ledger import links
from apps.ledger.links import PAGES, journal_href, page_link, page_link_register, waste_href

PATHS = {
    "finance": "/finance/",
    "journal": "/finance/journal/",
    "usage": "/waste/",
    "plans": "/finance/plans/2026-11/",
    "bills": "/finance/reconciliation/",
    "month pack": "/finance/pack/2026-11.xlsx",
}


def test_every_page_the_books_link_to_is_registered_by_its_app() -> None:
    months = {"plans", "month pack"}
    found = {name: page_link(name, **({"month": "2026-11"} if name in months else {})) for name in PAGES.names}
    assert found == PATHS


def test_the_links_carry_their_query() -> None:
    assert journal_href(month=date(2026, 11, 1), cost_centre="search", expense=True) == (
        "/finance/journal/?month=2026-11&cost_centre=search&side=expense"
    )
    assert waste_href(first=date(2026, 11, 2), last=date(2026, 11, 3), business_line="search", model="m") == (
        "/waste/?from=2026-11-02&to=2026-11-03&dims.business_line=search&model=m"
    )


@pytest.fixture
def unregistered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(links.PAGES, "_builders", {})
    yield


def test_a_page_no_app_registered_is_no_link(unregistered: None) -> None:
    assert page_link("plans", month="2026-11") == ""
    assert journal_href(month=date(2026, 11, 1)) == ""


def test_it_refuses_a_page_the_books_do_not_name(unregistered: None) -> None:
    with pytest.raises(ValueError, match="the books link to no page 'overview'"):
        page_link_register("overview", lambda: "/overview/")
    with pytest.raises(ValueError, match="the books link to no page 'overview'"):
        page_link("overview")


def test_the_rates_page_links_to_the_finance_page_its_app_registered() -> None:
    from apps.currencies.links import PAGES as rates_links

    assert rates_links.link("finance") == "/finance/"
