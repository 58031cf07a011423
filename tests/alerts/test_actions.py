"""The signed mute and acknowledge links of a message, and the warning while the site URL
still points at this machine (a system check and a banner on the channels page)."""

from __future__ import annotations

import time
from datetime import timedelta
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import User
from django.core import signing
from django.core.checks import run_checks
from django.test import Client
from django.utils import timezone

from apps.accounts.models import UserScope
from apps.alerts import checks
from apps.alerts.actions import action_links, action_token
from apps.alerts.detectors.registry import DetectionResult
from apps.alerts.models import AlertAction, Notification, Rule
from apps.alerts.services import notification_send
from tests import factories
from tests.alerts.test_messages import spike
from tests.conftest import login_as

pytestmark = pytest.mark.django_db
PASSWORD = "pw-for-tests-only"


def warnings_of(settings, url: str, *, debug: bool = False) -> list[str]:
    settings.ALERTS_SITE_URL, settings.DEBUG = url, debug
    return [m.id for m in run_checks() if m.id and m.id.startswith("alerts.")]


def test_it_warns_while_the_site_url_is_this_machine(settings, monkeypatch):
    monkeypatch.setattr(checks, "_testing", lambda: False)
    assert warnings_of(settings, "http://localhost:8000") == ["alerts.W001"]
    assert warnings_of(settings, "http://127.0.0.1:8000/") == ["alerts.W001"]
    assert warnings_of(settings, "https://costs.example.com") == []
    assert warnings_of(settings, "http://localhost:8000", debug=True) == []  # a developer's own machine


def test_the_channels_page_warns_that_links_will_not_open(settings):
    settings.ALERTS_SITE_URL = "http://localhost:8000"
    page = login_as("engineer").get("/alerts/channels/").content.decode()
    assert 'id="site-url-warning"' in page and "http://localhost:8000" in page
    settings.ALERTS_SITE_URL = "https://costs.example.com"
    assert 'id="site-url-warning"' not in login_as("engineer").get("/alerts/channels/").content.decode()


def engineer(name: str = "oncall", *, lines: list[str] | None = None) -> tuple[User, Client]:
    user = factories.finance_user(name, role="engineer")
    if lines:
        UserScope.objects.create(user=user, business_lines=lines)
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return user, client


def path_of(link: str) -> str:
    return urlsplit(link).path


def post(client: Client, path: str) -> object:
    client.get(path)  # the confirm page sets the CSRF cookie
    return client.post(path, {"csrfmiddlewaretoken": client.cookies["csrftoken"].value})


def test_a_message_carries_the_mute_and_acknowledge_links(receiver, settings):
    settings.ALERTS_SITE_URL = "https://costs.example.com"
    factories.channel("webhook", url=receiver.url("/webhook"), language="zh-hans")
    factories.channel("dingtalk", url=receiver.url("/dingtalk"))
    alert = spike()
    for notification in Notification.objects.filter(alert=alert):
        notification_send(notification_id=notification.id, retry_delays=[])
    by_path = {r.path: r.json() for r in receiver.wait_for(2)}
    actions = by_path["/webhook"]["actions"]
    assert [a["label"] for a in actions] == ["静默 1 小时", "静默 24 小时", "确认已知"]
    assert all(a["url"].startswith("https://costs.example.com/alerts/act/") for a in actions)
    text = by_path["/dingtalk"]["markdown"]["text"]
    assert "[Open the page](https://costs.example.com/overview/?from=" in text
    assert "[Mute 1 h](https://costs.example.com/alerts/act/" in text and "[Acknowledge](" in text


def test_the_mute_link_asks_then_mutes_the_rule_for_an_hour():
    user, client = engineer()
    alert = spike()
    mute = path_of(action_links(alert, "en")[0][1])
    page = client.get(mute)
    assert page.status_code == 200 and b'id="alert-action"' in page.content and b"Mute 1 h" in page.content
    assert Rule.objects.get(id=alert.rule_id).muted_until is None  # a GET (a chat's link preview) does nothing

    before = timezone.now()
    answer = post(client, mute)
    assert answer.status_code == 302 and answer["Location"] == "/alerts/"
    muted_until = Rule.objects.get(id=alert.rule_id).muted_until
    assert muted_until is not None
    assert before + timedelta(hours=1) <= muted_until <= timezone.now() + timedelta(hours=1)
    done = AlertAction.objects.get(alert=alert)
    assert (done.action, done.user, done.muted_until) == ("mute_1h", user, muted_until)
    assert "oncall" in client.get(mute).content.decode()  # the alert's history


def test_a_24_hour_mute_and_an_acknowledgement_are_recorded():
    _, client = engineer()
    alert = spike()
    _, day, ack = (path_of(url) for _, url in action_links(alert, "en"))
    assert post(client, day).status_code == 302
    assert post(client, ack).status_code == 302
    muted_until = Rule.objects.get(id=alert.rule_id).muted_until
    assert muted_until is not None and muted_until > timezone.now() + timedelta(hours=23)
    assert list(AlertAction.objects.filter(alert=alert).values_list("action", flat=True)) == ["ack", "mute_24h"]


def test_it_refuses_a_changed_or_expired_link_and_a_post_without_csrf(monkeypatch):
    _, client = engineer()
    alert = spike()
    token = action_token(alert_id=alert.id, action="mute_24h")
    forged = signing.dumps({"alert": alert.id, "do": "mute_24h"}, salt="another-salt")
    other = action_token(alert_id=alert.id + 1, action="mute_24h")
    swapped = other.split(":")[0] + token[token.index(":") :]  # another alert, this alert's signature
    for bad in (token[:-2] + "xx", forged, swapped):
        assert client.get(f"/alerts/act/{bad}/").status_code == 400
    assert post(client, f"/alerts/act/{token[:-2]}xx/").status_code == 400

    real_time = time.time
    monkeypatch.setattr(signing.time, "time", lambda: real_time() - 8 * 86400)
    old = action_token(alert_id=alert.id, action="mute_1h")
    monkeypatch.setattr(signing.time, "time", real_time)
    refused = client.get(f"/alerts/act/{old}/")
    assert refused.status_code == 400 and b"expired" in refused.content

    fresh = f"/alerts/act/{token}/"
    assert client.post(fresh).status_code == 403  # no CSRF token
    assert Rule.objects.get(id=alert.rule_id).muted_until is None
    assert not AlertAction.objects.exists()


def test_only_engineers_and_admins_of_the_alerts_line_may_act():
    alert = spike()
    mute = path_of(action_links(alert, "en")[0][1])
    assert login_as("viewer").get(mute).status_code == 403
    assert login_as("finance").post(mute).status_code == 403
    _, elsewhere = engineer("ads-oncall", lines=["ads"])
    assert elsewhere.get(mute).status_code == 403
    anonymous = Client().get(mute)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/login/")
    assert Rule.objects.get(id=alert.rule_id).muted_until is None


def test_a_scoped_engineers_link_mutes_that_alerts_subject_not_the_rule_of_every_line():
    """Issue 31, finding 5: a rule of every line muted through one line's alert silenced the others."""
    from apps.alerts.evaluation import _alert
    from apps.alerts.models import AlertState

    alert = spike()
    assert Rule.objects.get(id=alert.rule_id).business_line == ""  # a rule of every line
    _, client = engineer("support-oncall", lines=[alert.business_line])

    assert post(client, path_of(action_links(alert, "en")[0][1])).status_code == 302

    rule = Rule.objects.get(id=alert.rule_id)
    state = AlertState.objects.get(rule=rule, subject=alert.subject)
    assert rule.muted_until is None  # another line's alert of the rule is still sent
    assert state.muted_until is not None and state.muted_until > timezone.now() + timedelta(minutes=59)
    assert AlertAction.objects.get(alert=alert).muted_until == state.muted_until
    subject = SimpleNamespace(business_line=alert.business_line, key=alert.subject, link="")
    firing = DetectionResult(firing=True, figures={})
    assert _alert(rule, state, subject, "firing", firing, timezone.now()).suppressed == "muted"
    other = AlertState(rule=rule, subject="business_line=ads", episode=1)
    assert _alert(rule, other, subject, "firing", firing, timezone.now()).suppressed == ""


def test_a_link_acts_once_and_says_so_when_it_is_opened_again():
    """Issue 31, finding 5: the same link replayed extended the mute."""
    _, client = engineer()
    alert = spike()
    mute = path_of(action_links(alert, "en")[0][1])
    assert post(client, mute).status_code == 302
    muted_until = Rule.objects.get(id=alert.rule_id).muted_until

    again = post(client, mute)
    shown = client.get(mute)

    assert again.status_code == 409 and b"already used" in again.content and b"oncall" in again.content
    assert shown.status_code == 409 and b'id="alert-action"' not in shown.content
    assert Rule.objects.get(id=alert.rule_id).muted_until == muted_until
    assert AlertAction.objects.filter(alert=alert).count() == 1


def test_a_resolve_or_a_broadcast_offers_no_action():
    alert = spike()
    alert.status = "resolved"
    assert action_links(alert, "en") == []
    alert.status, alert.rule = "event", None
    assert action_links(alert, "en") == []


# --- the channels page: previews, and adding / changing a channel (admins of every line) ----


def test_the_channels_page_previews_every_kind_of_channel_in_its_language():
    from apps.alerts.models import Channel

    page = login_as("viewer").get("/alerts/channels/")
    previews = page.context["previews"]
    assert [p.kind for p in previews] == list(Channel.Kind.values)
    html = page.content.decode()
    assert html.count('class="card preview"') == len(Channel.Kind.values)
    assert "Token spike: support" in html and "Top contributors" in html and "Mute 1 h" in html
    feishu = next(p for p in previews if p.kind == "feishu")
    assert '"msg_type": "interactive"' in feishu.payload and "Mute 24 h" in feishu.payload

    chinese = login_as("viewer")
    chinese.cookies["django_language"] = "zh-hans"
    html = chinese.get("/alerts/channels/").content.decode()
    assert "词元用量突增:support" in html and "静默 1 小时" in html and "各类通道中的消息效果" in html


def test_an_admin_adds_changes_and_test_sends_a_channel_from_the_page(receiver):
    from apps.alerts.models import Channel

    admin = login_as("admin")
    assert 'id="channel-add"' in admin.get("/alerts/channels/").content.decode()
    form = {
        "name": "oncall-webhook",
        "kind": "webhook",
        "language": "zh-hans",
        "url": receiver.url("/oncall"),
        "secret": "s3cret",
        "min_severity": 20,
        "quiet_tz": "Asia/Shanghai",
    }
    assert admin.post("/alerts/channels/new/", {**form, "url": ""}).status_code == 200  # a URL is required
    assert not Channel.objects.exists()
    assert admin.post("/alerts/channels/new/", form)["Location"] == "/alerts/channels/"
    channel = Channel.objects.get(name="oncall-webhook")
    assert (channel.url, channel.secret, channel.language) == (receiver.url("/oncall"), "s3cret", "zh-hans")

    edit = f"/alerts/channels/{channel.id}/edit/"
    assert "s3cret" not in admin.get(edit).content.decode()  # write-only
    admin.post(edit, {**form, "url": "", "secret": "", "language": "en"})
    channel.refresh_from_db()
    assert (channel.url, channel.secret, channel.language) == (receiver.url("/oncall"), "s3cret", "en")

    admin.post(f"/alerts/channels/{channel.id}/test/")
    notification = Notification.objects.get(channel=channel)
    notification_send(notification_id=notification.id, retry_delays=[])
    [got] = receiver.wait_for(1)
    assert got.path == "/oncall" and got.json()["title"] == "Test message from costplatform"


def test_the_channel_form_speaks_the_readers_language():
    admin = login_as("admin")
    admin.cookies["django_language"] = "zh-hans"
    html = admin.get("/alerts/channels/new/").content.decode()
    labels = ("名称", "类型", "语言", "Webhook 地址", "签名密钥", "邮件地址", "业务线", "最低严重级别", "免打扰开始")
    for label in labels:
        assert f">{label}" in html, label
    for key in ("Email to", "Min severity", "Quiet tz", "Business lines:"):
        assert key not in html
    form = {"name": "x", "kind": "webhook", "language": "en", "min_severity": 20}
    refused = admin.post("/alerts/channels/new/", form)
    assert "此类通道需要 Webhook 地址" in refused.content.decode()


def test_only_an_admin_of_every_line_adds_or_changes_a_channel():
    channel = factories.channel("slack", url="https://hooks.example.com/x")
    for role in ("engineer", "finance", "viewer"):
        assert login_as(role).get("/alerts/channels/new/").status_code == 403
        assert 'id="channel-add"' not in login_as(role).get("/alerts/channels/").content.decode()
    scoped = login_as("admin", lines=["search"])
    assert scoped.get("/alerts/channels/new/").status_code == 403
    assert scoped.post(f"/alerts/channels/{channel.id}/edit/", {"name": "x"}).status_code == 403
