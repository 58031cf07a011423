"""The admin in the reader's language (issue 32, item 5): on the admin's index in zh-Hans, every
app of the platform and every model it lists is named in Chinese, and none by its English name.
Django's own apps (users, groups, the beat schedules) are translated by Django and their packages."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib import admin
from django.test import Client
from django.utils import translation

pytestmark = pytest.mark.django_db


def ours() -> list[Any]:
    return [m for m in admin.site._registry if m.__module__.startswith("apps.")]


def test_every_app_and_model_of_the_platform_is_named_in_chinese_on_the_admin(django_user_model: Any) -> None:
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("admin", password="pw-for-tests-only"))
    page = client.get("/admin/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))
    with translation.override("en"):
        english = {str(m._meta.verbose_name_plural) for m in ours()}
        english |= {str(m._meta.app_config.verbose_name) for m in ours()}
    with translation.override("zh-hans"):
        chinese = {str(m._meta.verbose_name_plural) for m in ours()}
        chinese |= {str(m._meta.app_config.verbose_name) for m in ours()}
    shown_english = sorted(name for name in english if re.search(rf"(?i)(?<![a-z]){re.escape(name)}(?![a-z])", text))
    assert shown_english == [], shown_english
    assert all(re.search(r"[\u4e00-\u9fff]", name) for name in chinese), sorted(chinese)
    assert all(name in text for name in chinese)
