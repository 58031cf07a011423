"""The Content-Security-Policy of every page (issue 31, a Low: there was none): scripts from the
site or with the response's nonce only, which the plotly figures' inline script carries; no
event-handler attribute left on a page (the CSP refuses them). That plotly draws under it in a
real browser: tests/dashboards/test_browser.py::test_plotly_draws_under_the_content_security_policy."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.conftest import login_as

pytestmark = pytest.mark.django_db

PAGES = ["/overview/", "/waste/", "/finance/", "/budgets/", "/alerts/", "/alerts/channels/", "/rules/", "/prices/",
         "/collectors/", "/audits/", "/login/", "/admin/", "/api/docs/"]  # fmt: skip


def policy_of(response: Any) -> dict[str, str]:
    header = response.headers.get("Content-Security-Policy", "")
    return {part.split()[0]: part for part in (p.strip() for p in header.split(";")) if part}


@pytest.mark.parametrize("path", PAGES)
def test_every_page_carries_the_policy_and_no_inline_handler(traffic: None, path: str) -> None:
    response = login_as("admin").get(path, follow=True)
    page = response.content.decode()

    policy = policy_of(response)
    assert response.status_code == 200
    assert "'unsafe-inline'" not in policy["script-src"] and "'unsafe-eval'" not in policy["script-src"]
    assert policy["object-src"] == "object-src 'none'" and policy["frame-ancestors"] == "frame-ancestors 'none'"
    assert not re.search(r"\son[a-z]+=", page), "an event-handler attribute the policy refuses"
    nonce = re.search(r"'nonce-([^']+)'", policy["script-src"])
    assert nonce is not None
    for script in re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", page):
        if "application/json" not in script:
            assert f'nonce="{nonce.group(1)}"' in script, script


def test_the_overviews_figure_carries_this_responses_nonce(traffic: None) -> None:
    client = login_as("engineer")
    first, second = client.get("/overview/"), client.get("/overview/")

    nonces = [re.search(r"'nonce-([^']+)'", r.headers["Content-Security-Policy"]).group(1) for r in (first, second)]
    assert nonces[0] != nonces[1]
    assert f'<script nonce="{nonces[0]}">' in first.content.decode()
