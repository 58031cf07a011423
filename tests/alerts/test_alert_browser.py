"""From a delivered alert to the page it names, in a real browser: records go in through the
collector API, a real Celery worker evaluates a spike rule and delivers the alert to a
loopback receiver; the link taken from that message opens the overview filtered to the
alert's business line, model and hour, showing the number the message gave; the mute link
of the same message, confirmed, mutes the rule."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from apps.alerts.models import Rule
from apps.alerts.tasks import rules_evaluate
from apps.common.buckets import hour_floor
from tests import factories
from tests.alerts.receivers import Receiver
from tests.alerts.test_worker import smtp, wait, worker  # noqa: F401  (fixtures)
from tests.dashboards.test_browser import browser, person, shot, sign_in  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
LINE, MODEL = "support", "qwen2.5-7b-instruct"
ZONE = "Asia/Shanghai"


@pytest.fixture
def site_url(live_server: Any, truncate_records: None, monkeypatch: Any, settings: Any) -> str:
    """The live server is the site the worker's links point at (the worker reads the env)."""
    monkeypatch.setenv("COSTPLATFORM_SITE_URL", live_server.url)
    monkeypatch.setenv("COSTPLATFORM_ACCOUNTING_TZ", ZONE)
    settings.ALERTS_SITE_URL, settings.ACCOUNTING_TZ = live_server.url, ZONE
    return str(live_server.url)


def this_hours_records() -> list[dict[str, Any]]:
    now = datetime.now(UTC)
    at = (hour_floor(now) + (now - hour_floor(now)) / 2).isoformat()  # inside the current hour, not ahead
    ours = [factories.record(ts=at, dims={"business_line": LINE, "feature": "faq", "step": "answer"}) for _ in range(5)]
    ours += [factories.record(ts=at, dims={"business_line": LINE, "feature": "triage"}) for _ in range(3)]
    others = [factories.record(ts=at, dims={"business_line": "search"}) for _ in range(4)]
    other_model = [factories.record(ts=at, model="llama-3-70b", dims={"business_line": LINE}) for _ in range(2)]
    return ours + others + other_model


def log_in(browser: Any, site: str, username: str) -> Any:  # noqa: F811  (the fixture's value)
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    return sign_in(context, site, username, path="/alerts/")


def card_html(payload: dict[str, Any]) -> str:
    """The webhook's message drawn as a chat card would show it, to look at."""
    lines = "".join(f"<li><b>{html.escape(f['label'])}</b>: {html.escape(f['value'])}</li>" for f in payload["figures"])
    links = [(payload["link"], "Open the page"), *((a["url"], a["label"]) for a in payload["actions"])]
    buttons = " ".join(f'<a href="{html.escape(u)}">{html.escape(t)}</a>' for u, t in links)
    return (
        "<body style='font-family:sans-serif;max-width:640px;margin:24px'><div style='border:1px solid #ccc;"
        f"border-radius:8px;padding:16px'><h3>{html.escape(payload['title'])}</h3><ul>{lines}</ul>"
        f"<p>{buttons}</p></div></body>"
    )


def test_a_delivered_alerts_link_opens_the_page_with_the_messages_figure(
    site_url: str,
    worker: Any,  # noqa: F811
    collector: Any,
    browser: Any,  # noqa: F811
    settings: Any,
) -> None:
    settings.ALERTS_OUTBOUND_ALLOW = ["127.0.0.1/32"]
    hook = Receiver()
    try:
        factories.channel("webhook", url=hook.url("/webhook"), language="en")
        Rule.objects.all().delete()  # the default rules would fire too
        rule = factories.alert_rule("spike", business_line=LINE, params={"by": "model", "min_tokens": 100})
        response = collector.send(this_hours_records())
        assert response.status_code == 200 and response.json()["accepted"] == 14, response.content

        rules_evaluate.delay()
        title = f"Token spike: model {MODEL}"  # the other model of the line may fire too (no baseline)
        wait(lambda: any(r.json()["title"] == title for r in hook.received))
        payload = next((r.json() for r in hook.received if r.json()["title"] == title), None)
        assert payload is not None, [r.json()["title"] for r in hook.received]
        figures = {f["label"]: f["value"] for f in payload["figures"]}
        tokens = figures["Tokens in the window"]  # "11,040 tokens": the 8 records of the line and model
        assert tokens == f"{8 * (1200 + 180):,} tokens"
        assert (
            f"({ZONE}, UTC+08:00)" in figures["Window"]
            and "faq" in figures["Top contributors (model · feature · step)"]
        )

        link = payload["link"]
        assert link.startswith(site_url + "/overview/?")
        query = parse_qs(urlsplit(link).query)
        assert query["dims.business_line"] == [LINE] and query["model"] == [MODEL]

        page = log_in(browser, site_url, person("oncall", "engineer"))
        page.set_content(card_html(payload))
        shot(page, "alert-card")

        answer = page.goto(link)
        assert answer is not None and answer.status == 200
        total = page.inner_text("#total .value")
        assert total.replace(",", "") == tokens.split()[0].replace(",", "")  # the message's figure, on the page
        window = figures["Window"]  # "2026-12-02 13:00 to 14:00 (Asia/Shanghai, UTC+08:00)", an en dash
        start = re.match(r"(\d{4}-\d\d-\d\d) (\d\d):00", window)
        assert start is not None and f"T{start.group(2)}:00:00+08:00" in query["from"][0]
        shot(page, "alert-link-page")

        mute = next(a["url"] for a in payload["actions"] if a["label"] == "Mute 1 h")
        page.goto(mute)
        page.click("#alert-action button[type=submit]")
        page.wait_for_url("**/alerts/")
        assert "muted until" in page.inner_text("main")
        rule.refresh_from_db()
        assert rule.muted_until is not None and rule.muted_until > datetime.now(UTC)
        assert "muted for 1 hour (oncall" in page.inner_text("#alerts")  # the history says who

        page.goto(site_url + "/alerts/channels/")
        assert page.locator("#previews .card.preview").count() == 6
        shot(page, "alert-channel-previews")
    finally:
        hook.close()
