"""Hard budgets on the real vLLM server (the session's engine): the instrumented
server polls the real platform's budget state (`--budget-poll`), serves a line until its hard
budget is spent, then refuses it with the 429 body while another line is served, serves it again
after finance grants an override on the budgets page; and the overshoot of concurrent clients
past a limit stays within the bound docs/budgets.md gives; a caller's own budget refuses that
caller while another caller of the line is served; and a second server that reserves each
request's largest use keeps 32 concurrent clients within the limit."""

from __future__ import annotations

import math
import re
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import redis
from django.utils import timezone

from apps.common.buckets import accounting_zone, month_of
from tests.processes import PlatformServer, VllmServer
from tests.serving.conftest import BUDGET_POLL, SEARCH_KEY, redis_url
from wire.reservations import PREFIX

pytestmark = pytest.mark.slow

POLL = BUDGET_POLL
SET: set[tuple[str, str]] = set()  # (line, caller) of the budgets the running test set
STATS_WAIT = 2.0  # the servers' COSTPLATFORM_STATS_WAIT (tests/processes.py)
BASIC = ("tester", "pw-for-tests-only")  # the platform's superuser (tests/processes.py)
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


def chat(
    server: VllmServer, line: str, run: str, max_tokens: int = 4, key: str | None = None, client: Any = httpx
) -> httpx.Response:
    body = {"model": "tiny-llama", "max_tokens": max_tokens, "ignore_eos": True, "messages": QUESTION}
    headers = {"X-Costplatform-Business-Line": line, "X-Costplatform-Run": run}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return client.post(f"{server.url}/v1/chat/completions", json=body, headers=headers, timeout=120)


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


# --- reservations: 32 concurrent clients, side by side with polling alone --------------------------------------

CLIENTS = 32


@dataclass
class Run:
    """What 32 clients saw: each served request (start, end, tokens), each refusal's body."""

    served: list[tuple[float, float, int]] = field(default_factory=list)
    refusals: list[dict[str, Any]] = field(default_factory=list)

    def in_flight_when_spent(self, before: int, limit: int) -> int:
        """Tokens of the requests running when the answers so far (in the order they ended) took
        the use past the limit: what no gate can take back. 0 when it never passed."""
        total = before
        for _, end, tokens in sorted(self.served, key=lambda s: s[1]):
            total += tokens
            if total > limit:
                return sum(t for start, stop, t in self.served if start < end < stop)
        return 0

    def peak(self) -> int:
        """The most requests served at once."""
        edges = sorted([(start, 1) for start, _, _ in self.served] + [(end, -1) for _, end, _ in self.served])
        running = top = 0
        for _, step in edges:
            running += step
            top = max(top, running)
        return top


def hammer(server: VllmServer, line: str, run: str, max_tokens: int, key: str | None) -> Run:
    """CLIENTS clients asking at once, each until it is refused."""
    seen, lock = Run(), threading.Lock()
    go = threading.Barrier(CLIENTS)

    def client() -> None:
        with httpx.Client() as http:  # one connection a client, kept
            go.wait()
            for _ in range(200):
                start = time.monotonic()
                response = chat(server, line, run, max_tokens, key=key, client=http)
                with lock:
                    if response.status_code != 200:
                        seen.refusals.append(response.json()["error"])
                        return
                    seen.served.append((start, time.monotonic(), used(response)))

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    return seen


def spend(
    server: VllmServer, platform: PlatformServer, line: str, requests: int, max_tokens: int, key: str | None = None
) -> dict[str, Any]:
    """A hard budget of `requests` answers past the line's use, spent by CLIENTS clients (with
    `key`, as that caller): the figures of the run once every record is on the platform."""
    run = uuid.uuid4().hex
    first = chat(server, line, run, max_tokens, key=key)
    assert first.status_code == 200, first.text
    per_request = used(first)
    budget_put(platform, line, 10**9)
    settle(platform, run, 1)
    before = state(platform, line)["used_tokens"]
    limit = before + requests * per_request
    budget_put(platform, line, limit)
    _forget_reservations(state(platform, line)["id"])
    time.sleep(3 * POLL)
    began = time.monotonic()
    seen = hammer(server, line, run, max_tokens, key)
    elapsed = time.monotonic() - began
    settle(platform, run, 1 + len(seen.served) + len(seen.refusals))
    after = state(platform, line)["used_tokens"]
    return {
        "per_request": per_request,
        "limit": limit,
        "served": len(seen.served),
        "rate": len(seen.served) / elapsed,
        "overshoot": after - limit,
        "in_flight": seen.in_flight_when_spent(before, limit),
        "peak": seen.peak(),
        "refusals": seen.refusals,
    }


def _forget_reservations(budget_id: int) -> None:
    """A budget id of this session's fresh platform may have been another session's: its keys go."""
    client = redis.Redis.from_url(redis_url())
    client.delete(*(f"{PREFIX}:{budget_id}:{part}" for part in ("held", "until", "total")))


def test_with_reservations_32_concurrent_clients_never_spend_a_hard_budget_past_its_limit(
    held_server: VllmServer, gated_server: VllmServer, platform: PlatformServer
) -> None:
    """docs/budgets.md, "Reservations": the same 32 clients on a hard token budget of 120 answers,
    first on the server that polls alone (it overshoots by what was in flight and what was
    admitted before the state caught up), then on the one that reserves prompt + max_tokens:
    its use stays within the limit, so within what was in flight when the budget was spent."""
    max_tokens = 16
    polling = spend(held_server, platform, "customer-service", 120, max_tokens)
    # The reserving server checks keys too (tests/serving/conftest.py): search-app's key, its line.
    reserving = spend(gated_server, platform, "search", 120, max_tokens, key=SEARCH_KEY)
    for name, got in (("polling alone", polling), ("reserving", reserving)):
        print(
            f"{name}: {got['served']} served at {got['rate']:.1f} req/s, overshoot {got['overshoot']} tokens "
            f"({got['overshoot'] / got['per_request']:.1f} requests), in flight when spent {got['in_flight']} tokens, "
            f"limit {got['limit']}, at most {got['peak']} at once"
        )

    t_ship = STATS_WAIT + 0.5 + 1.0
    bound = (polling["rate"] * (t_ship + POLL) + CLIENTS) * polling["per_request"]
    assert 0 <= polling["overshoot"] <= math.ceil(bound)  # today's bound still holds without reservations

    assert reserving["overshoot"] <= 0 <= reserving["in_flight"]  # never past the limit
    assert reserving["served"] >= 60  # yet served far into the budget (the hold double-counts a little)
    room = [r for r in reserving["refusals"] if "reservation" in r]
    assert room, reserving["refusals"][:1]
    assert room[0]["code"] == "budget_exceeded" and room[0]["budget"]["business_line"] == "search"
    reservation = room[0]["reservation"]
    assert reservation["tokens"] == reserving["per_request"]  # the prompt counted as the engine counts it, + 16
    assert reservation["max_tokens"] == max_tokens and reservation["max_tokens_from"] == "request"
