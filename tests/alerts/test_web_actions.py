"""On-call in the web: acknowledge, mute (1 h, 24 h, until a time) and unmute an alert's
(rule, subject) from /alerts/ and from the page the alert opens, by the signed links' rules
(an engineer or admin; a scoped one only for their lines' alerts); the page an alert opens
names it in a banner with its window."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client
from django.utils import timezone

from apps.alerts.messages import message_for
from apps.alerts.models import AlertAction, AlertState, Rule
from apps.common.buckets import accounting_zone
from tests.alerts.test_actions import engineer
from tests.alerts.test_messages import spike
from tests.conftest import login_as

pytestmark = pytest.mark.django_db


def act(client: Client, alert_id: int, action: str, *, until: str = "", back: str = "/alerts/") -> object:
    client.get("/alerts/")  # the page sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    data = {"csrfmiddlewaretoken": token, "action": action, "until": until, "next": back}
    return client.post(f"/alerts/{alert_id}/act/", data)


def state_of(alert) -> AlertState:
    return AlertState.objects.get(rule_id=alert.rule_id, subject=alert.subject)


def test_alerts_page_offers_the_actions_and_they_act_on_the_rule_and_subject():
    user, client = engineer()
    alert = spike()
    page = client.get("/alerts/").content.decode()
    assert f'action="/alerts/{alert.id}/act/"' in page and 'value="mute_until"' in page and 'value="ack"' in page
    assert 'value="unmute"' not in page  # nothing is muted yet

    answer = act(client, alert.id, "mute_1h")
    assert answer.status_code == 302 and answer["Location"] == "/alerts/"
    muted = state_of(alert).muted_until
    assert muted is not None and timezone.now() + timedelta(minutes=59) < muted <= timezone.now() + timedelta(hours=1)
    assert Rule.objects.get(id=alert.rule_id).muted_until is None  # the subject, not the rule's other subjects
    page = client.get("/alerts/").content.decode()
    assert 'value="unmute"' in page and "muted until" in page

    until = (timezone.now() + timedelta(days=2)).astimezone(accounting_zone()).replace(second=0, microsecond=0)
    assert act(client, alert.id, "mute_until", until=f"{until:%Y-%m-%dT%H:%M}").status_code == 302
    assert state_of(alert).muted_until == until
    assert act(client, alert.id, "unmute").status_code == 302
    assert state_of(alert).muted_until is None
    assert act(client, alert.id, "ack").status_code == 302
    actions = list(AlertAction.objects.filter(alert=alert).order_by("id").values_list("action", "user"))
    assert actions == [("mute_1h", user.id), ("mute_until", user.id), ("unmute", user.id), ("ack", user.id)]
    assert "acknowledged by oncall" in client.get("/alerts/").content.decode()


def test_a_mute_until_a_past_time_is_refused_and_an_unmute_also_ends_a_rule_wide_mute():
    _, client = engineer()
    alert = spike()
    past = (timezone.now() - timedelta(hours=1)).astimezone(accounting_zone())  # the pages' zone until one is chosen
    act(client, alert.id, "mute_until", until=f"{past:%Y-%m-%dT%H:%M}")
    assert state_of(alert).muted_until is None
    assert "Choose a time in the future." in client.get("/alerts/").content.decode()
    Rule.objects.filter(id=alert.rule_id).update(muted_until=timezone.now() + timedelta(hours=1))  # a message's link
    act(client, alert.id, "unmute")  # an engineer of every line
    assert Rule.objects.get(id=alert.rule_id).muted_until is None


def test_only_engineers_and_admins_of_the_alerts_line_may_act_from_the_web():
    alert = spike()  # business line "search"
    for client in (login_as("viewer"), login_as("finance")):
        assert 'class="alert-actions"' not in client.get("/alerts/").content.decode()
        assert client.post(f"/alerts/{alert.id}/act/", {"action": "mute_24h"}).status_code == 403
    _, elsewhere = engineer("ads-oncall", lines=["ads"])
    assert act(elsewhere, alert.id, "mute_24h").status_code == 403
    _, own = engineer("search-oncall", lines=["search"])
    assert act(own, alert.id, "mute_24h").status_code == 302
    assert state_of(alert).muted_until is not None
    assert Rule.objects.get(id=alert.rule_id).muted_until is None
    act(own, alert.id, "unmute")  # a scoped engineer's unmute leaves a rule-wide mute alone
    assert state_of(alert).muted_until is None


def test_the_page_an_alert_opens_names_it_with_its_window_and_acts_back_to_itself():
    _, client = engineer()
    alert = spike()
    link = message_for(alert, "en").link
    assert parse_qs(urlsplit(link).query)["alert"] == [str(alert.id)]
    path = urlsplit(link).path + "?" + urlsplit(link).query
    page = client.get(path).content.decode()
    assert 'id="opened-alert"' in page and message_for(alert, "en").title in page
    start = timezone.datetime.fromisoformat(alert.figures["_window"][0]).astimezone(accounting_zone())
    assert f"{start:%Y-%m-%d %H:%M}" in page and "data-window-from=" in page
    answer = act(client, alert.id, "mute_24h", back=path)
    assert answer.status_code == 302 and answer["Location"] == path
    assert "muted until" in client.get(path).content.decode()
    assert act(client, alert.id, "ack", back="https://elsewhere.example/")["Location"] == "/alerts/"

    _, elsewhere = engineer("ads-oncall", lines=["ads"])
    assert 'id="opened-alert"' not in elsewhere.get(path).content.decode()  # not their line's alert
    viewer = login_as("viewer").get(path).content.decode()
    assert 'id="opened-alert"' in viewer and 'class="alert-actions"' not in viewer


def test_the_actions_and_the_banner_speak_chinese():
    _, client = engineer()
    client.cookies["django_language"] = "zh-hans"
    alert = spike()
    act(client, alert.id, "mute_1h")
    page = client.get("/alerts/").content.decode()
    assert "确认已知" in page and "取消静默" in page and "静默至 " in page and ">Unmute<" not in page
    link = message_for(alert, "zh-hans").link
    opened = client.get(urlsplit(link).path + "?" + urlsplit(link).query).content.decode()
    assert "由告警打开" in opened and "时间窗 " in opened and message_for(alert, "zh-hans").title in opened
