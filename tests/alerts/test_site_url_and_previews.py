"""The site URL the links in alerts are built on: the system check says what is wrong with a
wrong one, `make run` says which one it serves and warns where one set by hand names this
machine on another port; and each channel's preview on the channels page is drawn as that
channel shows a message, from the payload it gets."""

from __future__ import annotations

import re
import socket

import pytest
from django.core.checks import run_checks

from apps.alerts.models import Channel
from apps.alerts.preview import channel_previews
from devtools.run import site_url_note, web_address
from tests.conftest import login_as

pytestmark = pytest.mark.django_db


def check_of(settings, url: str) -> list[str]:
    settings.ALERTS_SITE_URL = url
    return [f"{m.msg} {m.hint}" for m in run_checks() if m.id == "alerts.E002"]


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("costs.example.com", "must start with http:// or https://"),
        ("https://", "has no host"),
        ("http://costs.example.com:80x", "port is not a number"),
        ("https://costs.example.com/?a=1", "query or a fragment"),
        ("https://costs.example.com/overview/", "has a path (/overview/)"),
    ],
)
def test_the_check_says_what_is_wrong_with_a_site_url(settings, url: str, says: str) -> None:
    [found] = check_of(settings, url)
    assert says in found and repr(url) in found and "make run sets the one it serves" in found


def test_the_check_takes_a_right_site_url(settings) -> None:
    for url in ("https://costs.example.com", "http://10.0.0.5:8000/", "http://127.0.0.1:8123"):
        assert check_of(settings, url) == []


def test_make_run_warns_where_a_site_url_set_by_hand_names_another_port_of_this_machine() -> None:
    web = web_address("127.0.0.1", 8123)
    assert site_url_note({"COSTPLATFORM_SITE_URL": "http://127.0.0.1:8123"}, web) == ""
    assert site_url_note({"COSTPLATFORM_SITE_URL": "https://costs.example.com"}, web) == ""
    wrong = site_url_note({"COSTPLATFORM_SITE_URL": "http://localhost:8000"}, web)
    assert "http://127.0.0.1:8123" in wrong and "will not open" in wrong
    every = web_address("0.0.0.0", 8123)
    assert "will not open" in site_url_note({"COSTPLATFORM_SITE_URL": f"http://{socket.gethostname()}"}, every)


def looks(page: str) -> dict[str, str]:
    found = re.findall(r'<section class="card preview" data-kind="(\w+)">(.*?)<details>', page, flags=re.S)
    return dict(found)


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_each_channels_preview_is_drawn_as_that_channel_shows_it(language: str) -> None:
    client = login_as("engineer")
    client.cookies["django_language"] = language
    drawn = looks(client.get("/alerts/channels/").content.decode())
    assert sorted(drawn) == sorted(Channel.Kind.values)
    assert len(set(drawn.values())) == len(drawn)  # six different cards, not one card six times
    previews = {p.kind: p for p in channel_previews(language=language)}
    title = previews["feishu"].message.title
    assert all(title in html for html in drawn.values())

    assert "accent-orange" in drawn["feishu"] and 'class="look-button primary"' in drawn["feishu"]
    assert "look-notice" in drawn["dingtalk"] and 'class="md-title"' in drawn["dingtalk"]
    assert "look-button" not in drawn["dingtalk"] and 'class="link"' in drawn["dingtalk"]  # links in the text
    assert "accent-warning" in drawn["wecom"] and "&lt;font" not in drawn["wecom"]
    assert "look-slack" in drawn["slack"] and "look-button" in drawn["slack"] and "<strong>" in drawn["slack"]
    figures = previews["webhook"].message.lines
    assert all(f"<dt>{label}</dt>" in drawn["webhook"] for label, _ in figures if label)
    assert "mail-head" in drawn["email"] and "<strong>" not in drawn["email"].split("look-body")[1]  # plain text
