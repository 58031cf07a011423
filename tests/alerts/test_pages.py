"""The alerts pages outside the admin: history scoped by business line, channels with their
state and last deliveries, the test message (engineers and admins, POST with CSRF)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client

from apps.alerts.models import Alert, Notification
from tests import factories

pytestmark = pytest.mark.django_db
AsUser = Callable[..., Client]
NOW = datetime.now(UTC)


def alert(line: str, subject: str, **fields: Any) -> Alert:
    values: dict[str, Any] = {
        "dedup_key": f"{line}:{subject}",
        "kind": "spike",
        "status": Alert.Status.FIRING,
        "severity": 20,
        "business_line": line,
        "subject": subject,
        "created_at": NOW - timedelta(minutes=5),
    }
    return Alert.objects.create(**(values | fields))


@pytest.fixture
def history() -> dict[str, Any]:
    search = alert("search", "spike in search")
    support = alert("support", "spike in support", status=Alert.Status.RESOLVED)
    hook = factories.channel("webhook", url="https://hooks.example.com/secret-token", business_lines=["search"])
    broken = factories.channel(
        "slack", url="https://hooks.slack.com/services/T/B/X", disabled_at=NOW, disabled_reason="404 no_service"
    )
    Notification.objects.create(alert=search, channel=hook, due_at=NOW, status=Notification.Status.SENT)
    Notification.objects.create(
        alert=support, channel=broken, due_at=NOW, status=Notification.Status.FAILED, error="404 no_service"
    )
    return {"hook": hook, "broken": broken}


def test_the_history_shows_alerts_with_status_and_deliveries(as_user: AsUser, history: dict[str, Any]) -> None:
    response = as_user("viewer").get("/alerts/")

    html = response.content.decode()
    assert response.status_code == 200
    assert "spike in search" in html and "spike in support" in html and '<td class="text">resolved</td>' in html
    # Each alert by the title its message had, not by its stored subject alone.
    assert "Token spike: spike in search" in html and "Resolved: Token spike: spike in support" in html
    # Kind, status and severity in words, not the stored codes.
    assert '<td class="text">Token spike</td><td class="text">firing</td><td class="text">warning</td>' in html
    resolved = as_user("viewer").get("/alerts/?status=resolved").content.decode()
    assert "spike in support" in resolved and "spike in search" not in resolved


def test_a_scoped_user_sees_only_its_business_lines(as_user: AsUser, history: dict[str, Any]) -> None:
    browser = as_user("engineer", lines=["search"])

    html = browser.get("/alerts/").content.decode()
    assert "spike in search" in html and "spike in support" not in html
    channels = browser.get("/alerts/channels/").content.decode()
    assert history["hook"].name in channels and "404 no_service" in channels  # the slack channel routes all lines
    assert channels.count("<strong>failed</strong>") == 0  # the delivery of the other line's alert
    url = f"/alerts/channels/{history['broken'].id}/test/"
    assert browser.post(url).status_code == 302


def test_the_channels_page_shows_kind_state_and_last_deliveries(as_user: AsUser, history: dict[str, Any]) -> None:
    html = as_user("viewer").get("/alerts/channels/").content.decode()

    assert "Generic JSON webhook" in html and "Slack incoming webhook" in html
    assert "https://hooks.example.com/…" in html and "secret-token" not in html
    assert "disabled" in html and "404 no_service" in html and "<strong>sent</strong>" in html
    assert "Send test message" not in html  # viewers do not send


@pytest.mark.parametrize("role", ["engineer", "admin"])
def test_engineers_and_admins_send_a_test_message(
    as_user: AsUser, history: dict[str, Any], role: str, django_capture_on_commit_callbacks: Any
) -> None:
    browser = as_user(role)
    assert "Send test message" in browser.get("/alerts/channels/").content.decode()
    hook = history["hook"]

    with django_capture_on_commit_callbacks() as callbacks:
        response = browser.post(f"/alerts/channels/{hook.id}/test/", follow=True)

    assert response.status_code == 200 and f"Queued a test message to {hook.name}" in response.content.decode()
    assert Notification.objects.filter(channel=hook, alert__kind="test").count() == 1 and len(callbacks) == 1


@pytest.mark.parametrize("role", ["viewer", "finance"])
def test_others_cannot_send_a_test_message(as_user: AsUser, history: dict[str, Any], role: str) -> None:
    assert as_user(role).post(f"/alerts/channels/{history['hook'].id}/test/").status_code == 403
    assert not Notification.objects.filter(alert__kind="test").exists()


def test_the_test_message_needs_a_post_and_the_csrf_token(history: dict[str, Any]) -> None:
    user = factories.finance_user("csrf-engineer", role="engineer")
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    url = f"/alerts/channels/{history['hook'].id}/test/"

    assert browser.get(url).status_code == 405
    assert browser.post(url).status_code == 403
    assert not Notification.objects.filter(alert__kind="test").exists()


def test_a_scoped_user_cannot_test_a_channel_of_other_lines(as_user: AsUser, history: dict[str, Any]) -> None:
    browser = as_user("engineer", lines=["support"])

    assert history["hook"].name not in browser.get("/alerts/channels/").content.decode()
    assert browser.post(f"/alerts/channels/{history['hook'].id}/test/").status_code == 403


def test_strangers_go_to_the_login() -> None:
    response = Client().get("/alerts/")

    assert response.status_code == 302 and "/login/" in response["Location"]


def test_the_pages_speak_chinese(as_user: AsUser, history: dict[str, Any]) -> None:
    alert("search", "nobody told", kind="budget", level="100", severity=30, suppressed="no route")
    browser = as_user("admin")
    browser.cookies["django_language"] = "zh-hans"

    assert "告警通道" in browser.get("/alerts/channels/").content.decode()
    html = browser.get("/alerts/").content.decode()
    # The nav's link of this page is marked as the current one.
    assert "未发送原因" in html and '<a href="/alerts/" aria-current="page">告警</a>' in html
    assert "词元用量突增:spike in search" in html and "已恢复:词元用量突增:spike in support" in html
    assert '<td class="text">词元用量突增</td><td class="text">告警中</td><td class="text">警告</td>' in html
    assert '<option value="resolved" >已恢复</option>' in html and ">spike<" not in html and ">firing<" not in html
    assert '<td class="text">预算</td><td class="text">告警中</td><td class="text">严重</td>' in html
    assert '<td class="text">没有通道接收</td>' in html and ">no route<" not in html
    assert "月度词元审计" in browser.get("/audits/").content.decode()
    assert "按科目和成本中心的支出" in browser.get("/finance/").content.decode()
