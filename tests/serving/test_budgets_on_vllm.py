"""Hard budgets on the real vLLM server (the session's engine): the instrumented
server polls the real platform's budget state (`--budget-poll`), serves a line until its hard
budget is spent, then refuses it with the 429 body while another line is served, serves it again
after finance grants an override on the budgets page; and the overshoot of concurrent clients
past a limit stays within the bound docs/budgets.md gives; a caller's own budget refuses that
caller while another caller of the line is served."""

from __future__ import annotations

import math
import re
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from django.utils import timezone

from apps.common.buckets import accounting_zone, month_of
from tests.processes import PlatformServer, VllmServer
from tests.serving.conftest import BUDGET_POLL

pytestmark = pytest.mark.slow

POLL = BUDGET_POLL
SET: set[tuple[str, str]] = set()  # (line, caller) of the budgets the running test set
STATS_WAIT = 2.0  # the servers' COSTPLATFORM_STATS_WAIT (tests/processes.py)
BASIC = ("tester", "pw-for-tests-only")  # the platform's superuser (tests/processes.py)
SEARCH_KEY = "sk-search"  # search-app's key in the session's attribution map (tests/serving/conftest.py)
QUESTION = [{"role": "user", "content": "how much is left in the budget?"}]


@pytest.fixture
def held_server(vllm_server: VllmServer, platform: PlatformServer) -> Iterator[VllmServer]:
    """The session's instrumented server, which holds hard budgets (polling every POLL seconds);
    the budgets a test sets are lifted afterwards, so the session's other tests are served."""
    yield vllm_server
    month = accounting_month()
    for line, caller in SET:
        body = {"business_line": line, "caller": caller, "month": month, "tokens": 10**12, "hard": False}
        httpx.put(f"{platform.url}/api/v1/ledger/budgets", json=body, auth=BASIC, timeout=30).raise_for_status()
    SET.clear()


def chat(server: VllmServer, line: str, run: str, max_tokens: int = 4, key: str | None = None) -> httpx.Response:
    body = {"model": "tiny-llama", "max_tokens": max_tokens, "ignore_eos": True, "messages": QUESTION}
    headers = {"X-Costplatform-Business-Line": line, "X-Costplatform-Run": run}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.post(f"{server.url}/v1/chat/completions", json=body, headers=headers, timeout=120)


def used(response: httpx.Response) -> int:
    usage = response.json()["usage"]
    return int(usage["prompt_tokens"]) + int(usage["completion_tokens"])


def accounting_month() -> str:
    """This month in the books' zone, which the platform server the tests start keeps too
    (COSTPLATFORM_ACCOUNTING_TZ; `make test-dates` keeps the books in Shanghai and New York)."""
    return f"{month_of(timezone.now()):%Y-%m}"


def budget_put(platform: PlatformServer, line: str, tokens: int, caller: str = "") -> None:
    month = accounting_month()
    body = {"business_line": line, "caller": caller, "month": month, "tokens": tokens, "hard": True}
    SET.add((line, caller))
    response = httpx.put(f"{platform.url}/api/v1/ledger/budgets", json=body, auth=BASIC, timeout=30)
    assert response.status_code == 200, response.text


def state(platform: PlatformServer, line: str, caller: str = "") -> dict[str, Any]:
    answer = httpx.get(
        f"{platform.url}/api/v1/budgets/state", headers={"Authorization": f"Bearer {platform.key}"}, timeout=30
    ).json()
    (budget,) = [
        b
        for b in answer["budgets"]
        if b["business_line"] == line and not b["team"] and (b.get("caller") or "") == caller
    ]
    return budget


def settle(platform: PlatformServer, run: str, count: int) -> None:
    """The run's `count` records are on the platform, and the server has polled since."""
    platform.wait_records(count, **{"dims.run": run})
    time.sleep(3 * POLL)


def override_on_the_budgets_page(platform: PlatformServer, budget_id: int, until: datetime, reason: str) -> None:
    """Log in as a person and grant the override with the page's form (CSRF and all)."""
    with httpx.Client(base_url=platform.url, timeout=30) as browser:
        browser.get("/login/")
        login = {"username": BASIC[0], "password": BASIC[1], "csrfmiddlewaretoken": browser.cookies["csrftoken"]}
        assert browser.post("/login/", data=login).status_code == 302
        page = browser.get("/budgets/")
        assert page.status_code == 200 and f"/budgets/{budget_id}/override/" in page.text
        form = {"until": f"{until.astimezone(accounting_zone()):%Y-%m-%dT%H:%M}", "reason": reason,  # books' time
                "csrfmiddlewaretoken": browser.cookies["csrftoken"]}  # fmt: skip
        granted = browser.post(
            f"/budgets/{budget_id}/override/", data=form, headers={"Referer": f"{platform.url}/budgets/"}
        )
        assert granted.status_code == 302, granted.text


def refused_on_metrics(server: VllmServer, line: str) -> float:
    pattern = rf'^costplatform_serving_budget_refused_total{{business_line="{re.escape(line)}",reason="spent"}} (\S+)$'
    found = re.search(pattern, server.metrics(), re.M)
    return float(found.group(1)) if found else 0.0


def test_a_spent_hard_budget_refuses_its_line_and_an_override_serves_it_again(
    held_server: VllmServer, platform: PlatformServer
) -> None:
    run = uuid.uuid4().hex
    first = chat(held_server, "support", run)
    assert first.status_code == 200, first.text
    per_request = used(first)
    budget_put(platform, "support", 10**9)
    settle(platform, run, 1)
    limit = state(platform, "support")["used_tokens"] + 2 * per_request + per_request // 2
    budget_put(platform, "support", limit)  # three more answers spend it
    time.sleep(3 * POLL)

    served, refused = 0, None
    while refused is None and served < 8:
        response = chat(held_server, "support", run)
        if response.status_code == 200:
            served += 1
            settle(platform, run, 1 + served)
        else:
            refused = response

    assert served == 3
    assert refused is not None and refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == "budget_exceeded" and error["budget"]["business_line"] == "support"
    assert error["budget"]["limit_tokens"] == limit and error["budget"]["used_tokens"] >= limit
    assert datetime.fromisoformat(error["budget"]["resets_at"]) > datetime.now(UTC)
    assert int(refused.headers["Retry-After"]) > 0
    assert chat(held_server, "rag", run).status_code == 200  # another line is served meanwhile
    assert refused_on_metrics(held_server, "support") >= 1

    budget = state(platform, "support")
    assert budget["holds"]
    until = (datetime.now(UTC) + timedelta(hours=1)).replace(second=0, microsecond=0)
    override_on_the_budgets_page(platform, budget["id"], until, "incident review needs the bot")
    time.sleep(3 * POLL)

    again = chat(held_server, "support", run)
    assert again.status_code == 200, again.text
    assert not state(platform, "support")["holds"]


def test_concurrent_clients_overshoot_a_limit_by_no_more_than_the_documented_bound(
    held_server: VllmServer, platform: PlatformServer
) -> None:
    """docs/budgets.md: overshoot <= (R x (T_ship + T_poll) + C) x t, with R the line's request
    rate, T_ship the time from an answer to its tokens on the platform, T_poll the poll
    interval, C the clients in flight and t the tokens of one request."""
    run, line, clients, max_tokens = uuid.uuid4().hex, "ads", 4, 16
    first = chat(held_server, line, run, max_tokens)
    assert first.status_code == 200, first.text
    per_request = used(first)
    budget_put(platform, line, 10**9)
    settle(platform, run, 1)
    start_used = state(platform, line)["used_tokens"]
    limit = start_used + 12 * per_request
    budget_put(platform, line, limit)
    time.sleep(3 * POLL)

    served: list[float] = []
    lock = threading.Lock()

    def client() -> None:
        for _ in range(200):
            response = chat(held_server, line, run, max_tokens)
            if response.status_code != 200:
                return
            with lock:
                served.append(time.monotonic())

    began = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    elapsed = time.monotonic() - began
    settle(platform, run, 1 + len(served))

    overshoot = state(platform, line)["used_tokens"] - limit
    rate = len(served) / elapsed
    t_ship = STATS_WAIT + 0.5 + 1.0  # the engine's stats wait, the spool's flush, a shipping round
    bound = (rate * (t_ship + POLL) + clients) * per_request
    print(
        f"overshoot {overshoot} tokens ({overshoot / per_request:.1f} requests) at {rate:.1f} req/s; bound {bound:.0f}"
    )
    assert len(served) >= 12  # served until spent
    assert 0 <= overshoot <= math.ceil(bound)


def test_a_callers_spent_budget_refuses_that_caller_while_another_caller_of_the_line_is_served(
    held_server: VllmServer, platform: PlatformServer
) -> None:
    """search-app (the map's caller of key sk-search, line search) spends its own budget; a caller
    without a key, claiming the same line, is still served."""
    run = uuid.uuid4().hex
    first = chat(held_server, "search", run, key=SEARCH_KEY)
    assert first.status_code == 200, first.text
    budget_put(platform, "search", 10**9, caller="search-app")
    settle(platform, run, 1)
    budget_put(platform, "search", state(platform, "search", "search-app")["used_tokens"], caller="search-app")
    time.sleep(3 * POLL)

    refused = chat(held_server, "search", run, key=SEARCH_KEY)
    assert refused.status_code == 429, refused.text
    error = refused.json()["error"]
    assert error["code"] == "budget_exceeded" and error["budget"]["caller"] == "search-app"
    assert "caller 'search-app'" in error["message"]
    assert chat(held_server, "search", run).status_code == 200  # the line's other caller
