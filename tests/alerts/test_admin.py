"""The channel page: write-only URL and secret, the reason a channel was disabled, the
"send test message" action; muting a rule."""

from __future__ import annotations

import pytest

from apps.alerts.models import Channel, Notification
from apps.alerts.services import channel_disable
from tests import factories

pytestmark = pytest.mark.django_db


def test_it_creates_a_channel_without_showing_its_token_again(admin_client):
    response = admin_client.post(
        "/admin/alerts/channel/add/",
        {"name": "cs-oncall", "kind": "wecom", "language": "zh-hans",
         "url": "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=SECRET-KEY", "secret": "", "email_to": "",
         "business_lines": "customer-service", "min_severity": 20, "quiet_tz": "Asia/Shanghai",
         "notifications-TOTAL_FORMS": 0, "notifications-INITIAL_FORMS": 0},
    )  # fmt: skip
    assert response.status_code == 302
    channel = Channel.objects.get(name="cs-oncall")
    assert channel.url.endswith("key=SECRET-KEY") and channel.business_lines == ["customer-service"]
    page = admin_client.get(f"/admin/alerts/channel/{channel.id}/change/").content.decode()
    listing = admin_client.get("/admin/alerts/channel/").content.decode()
    assert "SECRET-KEY" not in page and "SECRET-KEY" not in listing
    assert "https://qyapi.weixin.qq.com/…" in listing


def test_it_says_why_a_channel_was_disabled_on_its_page(admin_client):
    channel = factories.channel("slack", url="https://hooks.slack.com/services/T/B/X")
    channel_disable(channel=channel, reason="2026-11-30 08:00 UTC: HTTP 404: no_service")
    page = admin_client.get(f"/admin/alerts/channel/{channel.id}/change/").content.decode()
    assert "This channel is disabled: 2026-11-30 08:00 UTC: HTTP 404: no_service" in page
    assert "disabled</strong>: 2026-11-30 08:00 UTC: HTTP 404: no_service" in page


def test_it_queues_a_test_message_from_the_list(admin_client, django_capture_on_commit_callbacks):
    channel = factories.channel("slack", url="https://hooks.slack.com/services/T/B/X")
    with django_capture_on_commit_callbacks() as callbacks:
        admin_client.post("/admin/alerts/channel/", {"action": "send_test", "_selected_action": [channel.id]})
    notification = Notification.objects.get(channel=channel)
    assert notification.alert.kind == "test" and len(callbacks) == 1


def test_it_mutes_a_rule_for_an_hour(admin_client):
    rule = factories.alert_rule("spike")
    admin_client.post("/admin/alerts/rule/", {"action": "mute_hour", "_selected_action": [rule.id]})
    rule.refresh_from_db()
    assert rule.muted_until is not None
    assert not rule.is_muted(rule.muted_until)  # muted until then, not after
