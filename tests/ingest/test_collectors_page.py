"""The collectors page: keys with their last use and rejections, for engineers and admins."""

from __future__ import annotations

import pytest

from tests.factories import record

pytestmark = pytest.mark.django_db


def test_collectors_show_last_seen_and_rejections(collector, as_user) -> None:
    collector.send([record(**{"tokens.prompt": -1})])

    page = as_user("engineer").get("/collectors/").content.decode()

    assert "source-" in page and ">1<" in page and "prompt" in page
    assert as_user("viewer").get("/collectors/").status_code == 403
