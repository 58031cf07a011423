"""The pages in a real browser: Playwright drives the Debian chromium package headless (no
browser download; `make browser` installs it). Login, every page rendering with data, a
drill-down by clicks from the overview to one record, roles and scopes, the language switch,
a phone-sized screen. Screenshots go to $COSTPLATFORM_ARTIFACTS (default test-artifacts/)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apps.accounts.models import UserScope
from tests import factories
from tests.dashboards.conftest import month_like_records, priced

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CHROMIUM = os.environ.get("COSTPLATFORM_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(os.environ.get("COSTPLATFORM_ARTIFACTS") or Path(__file__).resolve().parents[2] / "test-artifacts")
PASSWORD = "pw-for-tests-only"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make browser` installs the Debian chromium package")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the ORM calls of the fixtures
    # (made before any page loads) are still synchronous. Only while the browser is up: a
    # process a later test starts (`check --deploy`) must not inherit it.
    with pytest.MonkeyPatch.context() as patch, sync_playwright() as playwright:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield launched
        launched.close()


@pytest.fixture
def site(live_server: Any, truncate_records: None, collector: Any) -> str:
    response = collector.send(month_like_records())
    assert response.status_code == 200 and response.json()["accepted"] == 12
    priced()
    return str(live_server.url)


def person(username: str, role: str, *, lines: list[str] | None = None) -> str:
    user = factories.finance_user(username, role=role)
    if role == "admin":
        user.is_staff = True
        user.save(update_fields=["is_staff"])
    if lines:
        UserScope.objects.create(user=user, business_lines=lines)
    return username


def sign_in(context: Any, site: str, username: str, *, path: str = "/overview/", lands: str | None = None) -> Any:
    """A page of `context` logged in as `username` through the login form, landed on `path`
    (or on `lands`, where `path` redirects)."""
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{site}/login/?next={path}")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_url(f"{site}{lands or path}" if (lands or path) == "/" else f"**{lands or path}")
    return page


@pytest.fixture
def open_as(browser: Any, site: str) -> Iterator[Any]:
    contexts: list[Any] = []

    def open_page(username: str, *, width: int = 1280, height: int = 900) -> Any:
        context = browser.new_context(viewport={"width": width, "height": height}, locale="en-US")
        contexts.append(context)
        return sign_in(context, site, username)

    yield open_page
    for context in contexts:
        context.close()


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_it_logs_in_and_renders_every_page_with_data(open_as: Any, site: str) -> None:
    page = open_as(person("ada", "admin"))

    assert page.locator(".card.breach").count() == 3 and page.locator(".card.ok").count() == 1
    page.wait_for_selector("#tokens-by-class .main-svg")  # plotly.js, served locally, drew the figure
    assert "16,560" in page.inner_text("#total")
    shot(page, "overview")
    for path, expect, name in (
        ("/waste/", "#breakdown[data-level=class]", "waste-classes"),
        ("/waste/?class=waste", "#breakdown[data-level=reason]", "waste-reasons"),
        ("/waste/?reason=waste.timeout", "#breakdown[data-level=model]", "waste-models"),
        ("/waste/?reason=waste.timeout&model=qwen2.5-7b-instruct", "#breakdown[data-level=dims]", "waste-dims"),
        ("/waste/requests/", "#requests", "requests"),
        ("/finance/", "#spend", "finance"),
        ("/audits/", "main h1", "audits"),
        ("/rules/", "#ruleset-1", "rules"),
        ("/rules/1/try/", "#moves", "rules-try"),
        ("/prices/", "#unpriced", "prices"),
        ("/collectors/", "#keys", "collectors"),
        ("/budgets/", "#budgets", "budgets"),
        ("/alerts/", "#alerts", "alerts"),
        ("/alerts/channels/", "#channels", "alert-channels"),
    ):
        response = page.goto(site + path)
        assert response is not None and response.status == 200, path
        page.wait_for_selector(expect)
        shot(page, name)
        if name == "requests":
            assert page.locator("#requests tbody tr").count() == 12


def test_it_drills_down_from_the_overview_to_one_record_by_clicking(open_as: Any) -> None:
    page = open_as(person("eve", "engineer"))

    page.click(".card[data-metric=waste] a")
    for label in ("waste.timeout", "qwen2.5-7b-instruct", "support", "faq", "reason"):
        page.locator("#breakdown tbody tr", has_text=label).locator("td:nth-child(2) a").click()
        page.wait_for_load_state()
    assert page.locator("#requests tbody tr").count() == 3
    shot(page, "drill-requests")
    page.locator("#requests tbody tr").first.locator("a").click()
    page.wait_for_selector("#record")
    text = page.inner_text("#record")
    assert "timeout" in text and "support" in text and "faq" in text
    shot(page, "drill-record")


def test_an_engineer_sees_no_money(open_as: Any, site: str) -> None:
    page = open_as(person("eng", "engineer"))

    assert page.locator("#spend").count() == 0 and "CNY" not in page.content()
    page.goto(site + "/waste/?class=waste")
    assert "CNY" not in page.content() and "Cost" not in page.inner_text("#breakdown")
    assert page.goto(site + "/finance/").status == 403


def test_a_finance_user_sees_money(open_as: Any, site: str) -> None:
    page = open_as(person("fin", "finance"))

    assert "CNY" in page.inner_text("#spend")
    page.goto(site + "/waste/?class=waste")
    assert "CNY" in page.inner_text("#breakdown")


def test_a_scoped_user_sees_only_its_business_lines(open_as: Any, site: str) -> None:
    page = open_as(person("sam", "viewer", lines=["support"]))

    assert page.locator("#lines tbody tr").all_inner_texts()[0].startswith("support")
    assert page.locator("#lines tbody tr").count() == 1
    shot(page, "scoped-overview")
    page.goto(site + "/waste/requests/")
    lines = page.locator("#requests tbody tr td:nth-child(4)").all_inner_texts()
    assert lines and set(lines) == {"support"}


def test_the_language_switch_shows_chinese(open_as: Any) -> None:
    page = open_as(person("li", "viewer"))

    page.select_option("#language select", "zh-hans")
    page.wait_for_selector("html[lang=zh-hans]")
    assert "浪费率" in page.inner_text("#health") and "概览" in page.inner_text("header")
    shot(page, "overview-zh-hans")


def test_it_fits_a_phone_screen(open_as: Any) -> None:
    page = open_as(person("pat", "viewer"), width=390, height=844)

    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 1, f"the overview is {overflow}px wider than a phone"
    # The numbers come first on a phone, the filters that change them below; a laptop keeps the
    # filters on top.
    top = "s => document.querySelector(s).getBoundingClientRect().top"
    assert page.evaluate(top, "#health") < page.evaluate(top, "form.filters")
    shot(page, "overview-phone")
    page.set_viewport_size({"width": 1280, "height": 900})
    assert page.evaluate(top, "form.filters") < page.evaluate(top, "#health")


def test_plotly_draws_under_the_content_security_policy(open_as: Any, site: str) -> None:
    """Issue 31, a Low: every page has a Content-Security-Policy; the figures still draw and the
    pickers still submit (no event-handler attribute), with no violation reported."""
    page = open_as(person("cy", "admin"))
    refused: list[str] = []

    def note(message: Any) -> None:
        if "Content Security Policy" in message.text:
            refused.append(message.text)

    page.on("console", note)

    for path, figure in (("/overview/", "#tokens-by-class .main-svg"), ("/finance/", "#spend")):
        response = page.goto(site + path)
        assert response is not None and "script-src 'self' 'nonce-" in response.headers["content-security-policy"]
        page.wait_for_selector(figure)
    page.select_option("#language select", "zh-hans")
    page.wait_for_selector("html[lang=zh-hans]")

    assert refused == []
