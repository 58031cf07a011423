"""On-call in a real browser: an engineer acknowledges, mutes for 24 h and unmutes an alert on
/alerts/, opens the page the alert leads to, finds a banner naming the alert with its window,
the window shaded on the page's chart, and mutes the alert until a time from that banner,
landing back on the same page; the channels page draws each channel's own card."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from apps.alerts.messages import message_for
from apps.alerts.models import Alert, AlertState, Severity
from apps.alerts.selectors import page_link
from apps.common.buckets import accounting_zone, hour_floor
from tests import factories
from tests.dashboards.test_browser import browser, person, shot, sign_in  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
LINE = "search"


def firing_alert() -> Alert:
    """A spike of the hour before this one on the line, with its tokens in the rollups so the
    page it opens draws a chart, and of another hour beside it so the window is a part of it."""
    hour = hour_floor(timezone.now()) - timedelta(hours=1)
    rule = factories.alert_rule("spike", business_line=LINE)
    dims = {"business_line": LINE, "feature": "faq"}
    factories.dimset(dims)
    factories.hourly_class(hour=hour - timedelta(hours=2), tokens=4_000, dims=dims)
    factories.hourly_class(hour=hour, tokens=50_000, dims=dims)
    window = (hour, hour + timedelta(hours=1))
    figures = {"tokens": 50_000, "threshold": 9_000, "baseline": 4_000, "ratio": 12.5, "factor": 2.0}
    return Alert.objects.create(
        rule=rule,
        dedup_key=f"spike:{rule.id}:{LINE}:1",
        kind="spike",
        status=Alert.Status.FIRING,
        severity=Severity.WARNING,
        business_line=LINE,
        subject=LINE,
        figures={**figures, "_window": [at.isoformat() for at in window]},
        link=page_link(start=window[0] - timedelta(hours=3), end=window[1] + timedelta(hours=1), business_line=LINE),
        created_at=timezone.now(),
    )


def muted_until(alert: Alert) -> Any:
    state = AlertState.objects.filter(rule_id=alert.rule_id, subject=alert.subject).first()
    return state.muted_until if state else None


def test_an_engineer_acts_on_alerts_and_finds_the_alert_on_the_page_it_opens(
    live_server: Any,
    truncate_records: None,
    browser: Any,  # noqa: F811
) -> None:
    alert = firing_alert()
    site = str(live_server.url)
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    page = sign_in(context, site, person("oncall", "engineer", lines=[LINE]), path="/alerts/")

    row = page.locator("#alerts tbody tr", has=page.locator(f'form.alert-actions[data-alert="{alert.id}"]'))
    row.locator("button[value=mute_24h]").click()
    page.wait_for_url("**/alerts/")
    assert "muted until" in row.inner_text()
    assert muted_until(alert) > timezone.now() + timedelta(hours=23)
    row.locator("button[value=unmute]").click()
    page.wait_for_url("**/alerts/")
    assert muted_until(alert) is None and "muted until" not in row.inner_text()
    row.locator("button[value=ack]").click()
    page.wait_for_url("**/alerts/")
    assert "acknowledged by oncall" in row.inner_text()
    assert row.locator("button[value=ack]").count() == 0
    shot(page, "alerts-actions")

    title = message_for(alert, "en").title
    row.get_by_role("link", name=title).click()
    page.wait_for_url("**/overview/?**")
    banner = page.locator("#opened-alert")
    assert title in banner.inner_text() and "acknowledged by oncall" in banner.inner_text()
    zone = accounting_zone()
    page.wait_for_selector("#tokens-by-class .main-svg")
    page.wait_for_function(
        "() => (document.getElementById('tokens-by-class').layout.shapes || []).some(s => s.name === 'alert-window')"
    )
    # The shade lies over the bar of the alert's hour (50,000 tokens), not over the hour before it (4,000).
    shade = page.locator("#tokens-by-class .shapelayer path").bounding_box()
    bars = page.locator("#tokens-by-class .barlayer .point path")
    drawn = [box for box in (bars.nth(i).bounding_box() for i in range(bars.count())) if box and box["height"] > 5]
    low, high = sorted(drawn, key=lambda b: b["height"])
    assert shade is not None and shade["width"] > 10
    middle = shade["x"] + shade["width"] / 2
    assert abs(middle - (high["x"] + high["width"] / 2)) < 2
    assert not shade["x"] <= low["x"] + low["width"] / 2 <= shade["x"] + shade["width"]
    opened = page.url

    until = (timezone.now() + timedelta(days=2)).astimezone(zone).replace(second=0, microsecond=0)
    banner.locator("input[name=until]").fill(f"{until:%Y-%m-%dT%H:%M}")
    banner.locator("button[value=mute_until]").click()
    page.wait_for_load_state()
    assert page.url == opened  # back on the page the alert opened
    assert muted_until(alert) == until
    assert "muted until" in page.locator("#opened-alert").inner_text()
    shot(page, "alert-opened-page")

    page.goto(site + "/alerts/channels/")
    headers = {
        kind: page.locator(f'#previews [data-kind="{kind}"] .look-title').evaluate(
            "e => getComputedStyle(e).color + ' on ' + getComputedStyle(e).backgroundColor"
        )
        for kind in ("feishu", "wecom", "slack", "email", "webhook")
    }
    assert headers["feishu"] == "rgb(255, 255, 255) on rgb(180, 83, 9)"  # the warning's orange header
    assert headers["wecom"].startswith("rgb(180, 83, 9) on")  # the warning's font colour
    assert len(set(headers.values())) >= 3
    assert page.locator('#previews [data-kind="feishu"] .look-button.primary').count() == 1
    assert page.locator('#previews [data-kind="dingtalk"] .look-button').count() == 0
    shot(page, "alert-channel-previews-own")
    context.close()
