"""Every page on a phone and a laptop, in English and Chinese, in a real browser (Playwright +
Debian's chromium, as in tests/dashboards/test_browser.py): at 390 px no page scrolls sideways
(a wide table scrolls in its own box, its first column kept in view); axe-core finds no serious
or critical accessibility problem, in the light theme and in the dark one the system asks for;
the current page is marked in the nav and a skip link leads to the content; plotly.js comes
compressed; the favicon is found; a chart's axis labels stay inside it and clear of its legend.

axe-core is vendored (tests/vendor/axe-core/axe.min.js, `npm pack axe-core`, MPL-2.0), so the
test runs offline."""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from apps.audits.services import audit_run
from apps.common.buckets import month_of
from apps.ledger.models import CostCentre
from apps.ledger.services.accrual import month_accrue
from apps.plans.models import Budget
from tests.conftest import T0, month_like_records, priced
from tests.dashboards.test_browser import browser, person, sign_in

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
__all__ = ["browser"]  # the fixture, shared
MONTH = month_of(T0)
AXE = Path(__file__).resolve().parents[1] / "vendor" / "axe-core" / "axe.min.js"
PHONE, LAPTOP = 390, 1440
# Every page an admin opens from the nav, and the pages those lead to, in the month of the records.
PAGES = [
    "/",
    "/overview/",
    "/waste/",
    "/waste/?class=waste",
    "/waste/requests/",
    "/waste/duplicates/",
    "/finance/?month={month}",
    "/finance/journal/?month={month}",
    "/finance/reconciliation/?month={month}",
    "/finance/close/{month}/",
    "/finance/plans/{month}/",
    "/finance/rates/",
    "/budgets/",
    "/rules/",
    "/rules/1/try/",
    "/prices/",
    "/collectors/",
    "/alerts/",
    "/alerts/channels/",
    "/audits/",
    "/audits/{month}/",
    "/figures/",
]
# The nav link each page is under (the current one, marked).
SECTIONS = {
    "/overview/": "/overview/",
    "/waste/": "/waste/",
    "/finance/": "/finance/",
    "/budgets/": "/budgets/",
    "/rules/": "/rules/",
    "/prices/": "/prices/",
    "/collectors/": "/collectors/",
    "/alerts/": "/alerts/",
    "/audits/": "/audits/",
}
SERIOUS = """async () => {
  const found = await axe.run(document, {resultTypes: ['violations']});
  return found.violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
    .map(v => `${v.id} (${v.impact}): ${v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(' | ')}`);
}"""
# Each chart's axis labels cut by the chart's edge or overlapping its legend.
LABELS_CLASH = """() => {
  const out = [];
  const inside = (r, b) => r.left >= b.left - 1 && r.right <= b.right + 1
    && r.top >= b.top - 1 && r.bottom <= b.bottom + 1;
  const meet = (r, b) => r.left < b.right && b.left < r.right && r.top < b.bottom && b.top < r.bottom;
  for (const plot of document.querySelectorAll('.js-plotly-plot')) {
    const frame = plot.getBoundingClientRect();
    const legend = plot.querySelector('.legend');
    const legendBox = legend && legend.getBoundingClientRect();
    for (const label of plot.querySelectorAll('.xtick text, .ytick text, .g-xtitle text, .g-ytitle text')) {
      const r = label.getBoundingClientRect(), name = `${plot.id}: '${label.textContent}'`;
      if (!r.width) continue;
      if (!inside(r, frame)) out.push(`${name} cut by the chart's edge`);
      if (legendBox && legendBox.width && meet(r, legendBox)) out.push(`${name} runs into the legend`);
    }
  }
  return out;
}"""
# The widest element sticking out past the right edge: what makes the page scroll sideways.
WIDEST = """() => {
  const w = document.documentElement.clientWidth;
  let worst = null;
  for (const el of document.querySelectorAll('body *')) {
    const r = el.getBoundingClientRect();
    if (r.right > w + 1 && (!worst || r.right > worst.right)) {
      worst = {right: Math.round(r.right), tag: el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
        + (el.className && typeof el.className === 'string' ? '.' + el.className.split(' ').join('.') : '')};
    }
  }
  return worst;
}"""


@pytest.fixture
def books(live_server: Any, truncate_records: None, collector: Any) -> str:
    """A few hours of two business lines, priced, booked and audited; a budget, a cost centre a line."""
    response = collector.send(month_like_records())
    assert response.status_code == 200 and response.json()["accepted"] == 12
    priced()
    Budget.objects.create(business_line="support", month=MONTH, amount=Decimal("0.05"), currency="CNY")
    CostCentre.objects.create(business_line="support", code="CC-1001", name="Customer support")
    CostCentre.objects.create(business_line="search", code="CC-2002", name="Search and ranking")
    month_accrue(month=MONTH)
    audit_run(month=MONTH)
    return str(live_server.url)


@pytest.fixture
def screens(browser: Any, books: str) -> Iterator[Any]:
    contexts: list[Any] = []

    def open_page(username: str, *, locale: str = "en-US", scheme: str = "light") -> Any:
        # axe-core goes in as an inline script, which the pages' Content-Security-Policy refuses
        # (tests/dashboards/test_browser.py checks the pages under it).
        context = browser.new_context(
            viewport={"width": LAPTOP, "height": 900}, locale=locale, color_scheme=scheme, bypass_csp=True
        )
        contexts.append(context)
        return sign_in(context, books, username, path="/overview/")

    yield open_page
    for context in contexts:
        context.close()


def url_of(path: str) -> str:
    return path.format(month=f"{MONTH:%Y-%m}")


def problems_of(page: Any, site: str, path: str, width: int) -> list[str]:
    """What is wrong with `path` at `width`: a sideways scroll, an accessibility violation, no
    current nav item, no skip link."""
    page.set_viewport_size({"width": width, "height": 900})
    response = page.goto(site + url_of(path))
    if response is None or response.status != 200:
        return [f"answered {response and response.status}"]
    page.wait_for_load_state("load")
    found: list[str] = []
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    if overflow > 1:
        found.append(f"{overflow}px wider than the screen (widest: {page.evaluate(WIDEST)})")
    spilled = page.eval_on_selector_all(
        "main .card", "cards => cards.filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.innerText.slice(0, 40))"
    )
    found.extend(f"a card's text runs out of it: {text!r}" for text in spilled)
    page.add_script_tag(path=str(AXE))
    found.extend(page.evaluate(SERIOUS))
    section = next((link for prefix, link in SECTIONS.items() if path.startswith(prefix)), None)
    if section is not None:
        current = page.eval_on_selector_all("header a[aria-current=page]", "links => links.map(a => a.pathname)")
        if current != [section]:
            found.append(f"the nav marks {current} as the current page, not {section}")
    skip = page.eval_on_selector_all("body a[href='#content']", "links => links.length")
    if not skip or not page.locator("main#content").count():
        found.append("no skip link to main#content")
    return [f"{path} at {width}px: {problem}" for problem in found]


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_every_page_fits_a_phone_and_a_laptop_and_passes_axe(screens: Any, books: str, locale: str) -> None:
    page = screens(person("ada", "admin"), locale=locale)
    assert page.get_attribute("html", "lang") == ("en" if locale == "en-US" else "zh-hans")

    problems = [found for path in PAGES for width in (PHONE, LAPTOP) for found in problems_of(page, books, path, width)]

    assert problems == [], "\n".join(problems)


def test_a_wide_table_scrolls_in_its_box_with_its_first_column_kept(screens: Any, books: str) -> None:
    page = screens(person("bo", "admin"))
    page.set_viewport_size({"width": PHONE, "height": 844})
    page.goto(f"{books}/finance/journal/?month={MONTH:%Y-%m}")
    table = page.locator("main table").first
    box = table.evaluate("t => { const b = t.closest('.scroll') || t; return [b.scrollWidth, b.clientWidth]; }")
    assert box[0] > box[1], "the journal's table is narrower than a phone: nothing to scroll"

    first = table.locator("tbody tr").first.locator("td, th").first
    before = first.bounding_box()
    table.evaluate("t => { (t.closest('.scroll') || t).scrollLeft = 200; }")
    after = first.bounding_box()
    assert before is not None and after is not None and after["x"] == pytest.approx(before["x"], abs=1)


def test_the_dark_theme_follows_the_system_and_reads(screens: Any, books: str) -> None:
    light = screens(person("cy", "admin"))
    dark = screens("cy", scheme="dark")
    background = "() => getComputedStyle(document.body).backgroundColor"
    assert light.evaluate(background) in ("rgba(0, 0, 0, 0)", "rgb(255, 255, 255)")
    assert dark.evaluate(background) not in ("rgba(0, 0, 0, 0)", "rgb(255, 255, 255)")

    problems = [found for path in PAGES for found in problems_of(dark, books, path, PHONE)]

    assert problems == [], "\n".join(problems)
    # the charts go dark with the page: no white ground, axis labels in the page's light ink
    dark.goto(f"{books}/finance/?month={MONTH:%Y-%m}")
    dark.wait_for_selector(".js-plotly-plot .main-svg")
    chart = dark.evaluate(CHART_COLOURS)
    assert chart["grounds"] and not set(chart["grounds"]) & {"rgb(255, 255, 255)", "#fff", "#ffffff"}, chart
    assert chart["labels"] and all(light_ink(colour) for colour in chart["labels"]), chart


CHART_COLOURS = """() => ({
  grounds: [...document.querySelectorAll('.js-plotly-plot .main-svg')].map(s => getComputedStyle(s).backgroundColor)
    .concat([...document.querySelectorAll('.js-plotly-plot rect.bg')].map(r => getComputedStyle(r).fill)),
  labels: [...document.querySelectorAll('.js-plotly-plot .cartesianlayer text')].map(t => getComputedStyle(t).fill),
})"""


def light_ink(colour: str) -> bool:
    """An rgb() colour light enough to read on the dark ground (relative luminance over 0.4)."""
    r, g, b = (int(part) / 255 for part in re.findall(r"\d+", colour)[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.4


def test_plotly_comes_compressed_and_the_favicon_is_found(screens: Any, books: str) -> None:
    page = screens(person("di", "admin"))
    with page.expect_response("**/plotly.min.js") as plotly:
        page.goto(f"{books}/finance/?month={MONTH:%Y-%m}")
    headers = plotly.value.all_headers()
    assert headers.get("content-encoding") in ("gzip", "br"), headers
    assert int(headers["content-length"]) < 1_500_000  # 4.8 MB as it is

    icon = page.eval_on_selector("link[rel=icon]", "l => l.href")
    for url in (icon, f"{books}/favicon.ico"):
        answer = page.request.get(url)
        assert answer.ok and answer.headers["content-type"].startswith("image/"), url


@pytest.mark.parametrize("width", [PHONE, LAPTOP])
def test_chart_labels_stay_inside_the_chart_and_clear_of_the_legend(screens: Any, books: str, width: int) -> None:
    page = screens(person("ed", "admin"))
    page.set_viewport_size({"width": width, "height": 900})
    clashes: list[str] = []
    for path in ("/overview/", f"/finance/?month={MONTH:%Y-%m}"):
        page.goto(books + path)
        page.wait_for_selector(".js-plotly-plot .main-svg")
        clashes += page.evaluate(LABELS_CLASH)

    assert clashes == [], "\n".join(clashes)
