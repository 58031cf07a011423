"""403, 404 and 500 in the site's layout, with the reason and a way back; a 403 is logged as
one line, without a traceback."""

from __future__ import annotations

import logging

import pytest
from django.contrib.auth.models import User
from django.db import OperationalError
from django.db.backends.utils import CursorWrapper
from django.test import Client, RequestFactory
from django.urls import reverse

from costplatform import urls
from costplatform.views import BARE_500, server_error
from tests import factories

pytestmark = pytest.mark.django_db


def logged_in(role: str | None) -> Client:
    made = factories.finance_user(f"u-{role}", role=role) if role else User.objects.create_user("u", password="pw-x1")
    client = Client()
    client.force_login(made)
    return client


def test_a_refused_page_is_in_the_sites_layout_with_the_reason_and_a_way_back():
    viewer = logged_in("viewer")
    answer = viewer.get(reverse("collectors"), headers={"referer": "http://testserver/waste/"})
    page = answer.content.decode()
    assert answer.status_code == 403
    assert '<a href="/overview/">' in page  # the header of every page, with the viewer's links
    assert "collectors are for engineers and admins" in page  # the view's reason
    assert '<a href="http://testserver/waste/">' in page and '<a href="/">' in page


def test_the_way_back_is_never_another_site():
    answer = logged_in("viewer").get(reverse("collectors"), headers={"referer": "https://elsewhere.example/x"})
    assert answer.status_code == 403 and "elsewhere.example" not in answer.content.decode()


def test_a_refusal_is_logged_as_one_line_without_a_traceback(caplog):
    with caplog.at_level(logging.WARNING, logger="django.request"):
        assert logged_in(None).get(reverse("dashboards:overview")).status_code == 403
    refusals = [r for r in caplog.records if r.name == "django.request"]
    assert [r.getMessage() for r in refusals] == ["Forbidden (Permission denied): /overview/"]
    assert refusals[0].exc_info is None
    assert "Traceback" not in logging.Formatter().format(refusals[0])


def test_a_missing_page_is_in_the_sites_layout():
    answer = logged_in("engineer").get("/no-such-page/")
    page = answer.content.decode()
    assert answer.status_code == 404
    assert '<a href="/overview/">' in page and "/no-such-page/" in page and '<a href="/">' in page


def test_the_api_still_answers_json():
    answer = logged_in("engineer").get("/api/v1/no-such-thing")
    assert answer.status_code == 404 and answer.json() == {"detail": "Not found."}


def test_a_server_error_is_in_the_sites_layout(admin_user):
    assert urls.handler500 == "costplatform.views.server_error"
    request = RequestFactory().get("/overview/")
    request.user = admin_user
    answer = server_error(request)
    page = answer.content.decode()
    assert answer.status_code == 500
    assert "Something went wrong" in page and '<a href="/prices/">' in page


def test_a_server_error_with_the_database_gone_is_a_bare_page(monkeypatch):
    request = RequestFactory().get("/overview/")
    request.user = factories.finance_user("eng", role="engineer")

    def broken(*args, **kwargs):
        raise OperationalError("the database is down")

    # The header asks the database for the user's roles: that fails as everything else does.
    monkeypatch.setattr(CursorWrapper, "execute", broken)
    answer = server_error(request)
    assert answer.status_code == 500 and answer.content.decode() == BARE_500


def test_the_reason_is_in_the_readers_language():
    from django.utils import translation

    from apps.accounts.scopes import COMPANY_WIDE
    from costplatform.views import PAGE_REFUSALS

    assert COMPANY_WIDE in PAGE_REFUSALS
    with translation.override("zh-hans"):
        untranslated = [reason for reason in PAGE_REFUSALS if translation.gettext(reason) == reason]
    assert untranslated == []
    viewer = logged_in("viewer")
    viewer.cookies["django_language"] = "zh-hans"
    page = viewer.get(reverse("collectors")).content.decode()
    assert "采集器仅供工程师和管理员使用" in page and "您无权打开此页面" in page
