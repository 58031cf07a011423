"""Hard budgets through the proxy: a real platform (live server, PostgreSQL) the proxy ships its
records to and polls for budget state, a loopback upstream (tests/collectors/openai_upstream.py).
A line is served until its hard budget is spent, then refused with the 429 body while another
line is served; a finance override serves it again; a caller's budget refuses that caller (by
the name the attribution map gives its key) while another caller of the line is served; with
the platform down the gate fails open or closed as set; with reservations a request is served
only while its largest use fits."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from prometheus_client import REGISTRY, CollectorRegistry

from collectors.httpserve import ServerThread
from collectors.proxy import Settings, proxy_thread
from tests.collectors.openai_upstream import PROMPT_TOKENS, WORDS, Upstream
from tests.collectors.test_proxy import HASH_KEY, MESSAGES, Records, Rig
from tests.processes import free_port
from wire.attribution import Policy
from wire.budgets import BudgetGate, http_fetch
from wire.reservations import Reservations, largest_use
from wire.shipper import Pipeline

REFUNDS, BILLING, REFUNDS_BATCH = "refunds-key", "billing-key", "refunds-batch-key"
BUDGET_MAP = f"""
[callers.refunds-app]
tokens = ["{REFUNDS}"]
dims = {{ business_line = "refunds", team = "cs-bot" }}

[callers.refunds-batch]
tokens = ["{REFUNDS_BATCH}"]
dims = {{ business_line = "refunds", team = "cs-bot" }}

[callers.billing-app]
tokens = ["{BILLING}"]
dims = {{ business_line = "billing" }}
"""
PER_REQUEST = PROMPT_TOKENS + len(WORDS)  # what the upstream reports for each answer
POLL = 0.2


def chat(rig: Rig, token: str, **claims: str) -> tuple[int, Any, dict[str, Any]]:
    body = {"model": "qwen2.5-7b-instruct", "messages": MESSAGES}
    status, headers, raw = rig.post("/v1/chat/completions", body, Authorization=f"Bearer {token}", **claims)
    return status, headers, json.loads(raw)


def refused_total(line: str, reason: str = "spent") -> float:
    labels = {"business_line": line, "reason": reason}
    return REGISTRY.get_sample_value("costplatform_serving_budget_refused_total", labels) or 0.0


@pytest.fixture
def upstream() -> Iterator[tuple[Upstream, str]]:
    fake = Upstream()
    with ServerThread(fake.app()) as server:
        yield fake, server.url


@pytest.fixture
def budget_map(tmp_path: Path) -> Path:
    path = tmp_path / "attribution.toml"
    path.write_text(BUDGET_MAP)
    return path


def proxied(upstream: tuple[Upstream, str], budget_map: Path, sink: Any, gate: BudgetGate) -> Iterator[Rig]:
    fake, url = upstream
    settings = Settings(upstream=url, upstream_key="sk-up", hash_key=HASH_KEY, policy=Policy(budget_map), budgets=gate)
    with proxy_thread(settings, sink) as proxy_url:
        rig = Rig(fake, url, sink)
        rig.url = proxy_url
        yield rig


@pytest.fixture
def platform_rig(
    live_server: Any, truncate_records: None, upstream: tuple[Upstream, str], budget_map: Path, tmp_path: Path
) -> Iterator[tuple[Rig, Pipeline, str]]:
    from tests.factories import collector_key

    key = collector_key().secret
    gate = BudgetGate(http_fetch(live_server.url, key, timeout=5), interval=POLL).start()
    pipeline = Pipeline(
        tmp_path / "spool", url=live_server.url, key=key, registry=CollectorRegistry(), flush_interval=0.05
    )
    with pipeline:
        try:
            for rig in proxied(upstream, budget_map, pipeline, gate):
                yield rig, pipeline, key
        finally:
            gate.stop()


def settled(pipeline: Pipeline, gate_wait: float = 3 * POLL) -> None:
    """The records so far are stored on the platform and the gate has read the state since."""
    assert pipeline.flush(10)
    time.sleep(gate_wait)


def wait_for(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_line_is_served_until_its_hard_budget_is_spent_then_refused_and_served_again_after_an_override(
    platform_rig: tuple[Rig, Pipeline, str],
) -> None:
    from apps.common.buckets import month_of
    from apps.plans.models import Budget
    from apps.plans.overrides import budget_override_grant
    from apps.plans.planning import budget_set
    from tests.factories import finance_user

    rig, pipeline, _ = platform_rig
    limit = 4 * PER_REQUEST + 1  # the 5th answer spends it
    budget_set(business_line="refunds", month=month_of(datetime.now(UTC)), tokens=limit, hard=True)
    budget_set(business_line="billing", month=month_of(datetime.now(UTC)), tokens=limit, hard=True)
    before = refused_total("refunds")

    served = 0
    while True:
        status, headers, body = chat(rig, REFUNDS)
        if status != 200:
            break
        served += 1
        assert served <= 10, "never refused"
        settled(pipeline)
    upstream_calls = rig.upstream.counter
    again, _, _ = chat(rig, REFUNDS)
    evading, _, _ = chat(rig, REFUNDS, **{"X-Costplatform-Business-Line": "billing"})  # not the caller's to claim

    assert served == 5  # 4 answers leave it unspent; the 5th spends it; the 6th is refused
    assert (status, again, evading) == (429, 429, 429)
    error = body["error"]
    assert (error["type"], error["code"]) == ("budget_exceeded", "budget_exceeded")
    assert error["budget"]["business_line"] == "refunds" and error["budget"]["team"] is None
    assert (error["budget"]["used_tokens"], error["budget"]["limit_tokens"]) == (5 * PER_REQUEST, limit)
    resets = datetime.fromisoformat(error["budget"]["resets_at"])
    assert resets > datetime.now(UTC) and resets.day == 1
    assert f"{5 * PER_REQUEST:,} of {limit:,} tokens" in error["message"] and "refunds" in error["message"]
    assert 0 < int(headers["Retry-After"]) <= 31 * 86400
    assert rig.upstream.counter == upstream_calls  # the refused request never went upstream
    assert refused_total("refunds") == before + 3
    assert chat(rig, BILLING)[0] == 200  # another line is served

    budget_override_grant(
        budget=Budget.objects.get(business_line="refunds"),
        until=datetime.now(UTC) + timedelta(minutes=30),
        reason="quarter-end campaign",
        user=finance_user(),
        now=datetime.now(UTC),
    )
    time.sleep(3 * POLL)
    assert chat(rig, REFUNDS)[0] == 200


def test_its_refusals_are_recorded_as_rejected_with_no_tokens(platform_rig: tuple[Rig, Pipeline, str]) -> None:
    from apps.common.buckets import month_of
    from apps.ingest.models import Record
    from apps.plans.planning import budget_set

    rig, pipeline, _ = platform_rig
    budget_set(business_line="refunds", month=month_of(datetime.now(UTC)), tokens=1, hard=True)
    assert chat(rig, REFUNDS)[0] == 200
    settled(pipeline)

    status, headers, _ = chat(rig, REFUNDS)
    assert status == 429
    # The refusal's record may reach the spool after the answer: wait for it, then flush.
    wanted = Record.objects.select_related("dims").filter(record_id=headers["X-Costplatform-Record-Id"])
    wait_for(lambda: pipeline.flush(1) and wanted.exists())
    stored = wanted.get()
    assert (stored.status, stored.prompt, stored.completion) == (4, 0, 0)  # rejected
    assert stored.dims.dims["business_line"] == "refunds"


def test_a_callers_spent_budget_refuses_that_caller_only_and_names_it(
    platform_rig: tuple[Rig, Pipeline, str],
) -> None:
    from apps.common.buckets import month_of
    from apps.ingest.models import Record
    from apps.plans.planning import budget_set

    rig, pipeline, _ = platform_rig
    month = month_of(datetime.now(UTC))
    budget_set(business_line="refunds", caller="refunds-app", month=month, tokens=PER_REQUEST + 1, hard=True)
    budget_set(business_line="refunds", month=month, tokens=100 * PER_REQUEST, hard=True)  # the line's: unspent
    assert chat(rig, REFUNDS)[0] == 200
    assert chat(rig, REFUNDS_BATCH)[0] == 200
    settled(pipeline)
    assert chat(rig, REFUNDS)[0] == 200  # 1 answer (its own) leaves it unspent; the batch's are not its
    settled(pipeline)

    status, _, body = chat(rig, REFUNDS)
    posing, posing_headers, _ = chat(rig, REFUNDS, **{"X-Costplatform-Caller": "refunds-batch"})  # not its to claim
    other, _, _ = chat(rig, REFUNDS_BATCH)  # the same line and team, another caller
    assert pipeline.flush(10)

    assert (status, posing, other) == (429, 429, 200)
    error = body["error"]
    assert error["budget"]["caller"] == "refunds-app" and error["budget"]["business_line"] == "refunds"
    assert "caller 'refunds-app'" in error["message"]
    assert (error["budget"]["used_tokens"], error["budget"]["limit_tokens"]) == (2 * PER_REQUEST, PER_REQUEST + 1)
    refused = Record.objects.select_related("dims").get(record_id=posing_headers["X-Costplatform-Record-Id"])
    assert refused.dims.dims["caller"] == "refunds-app" and refused.dims.dims["refused.caller"] == "refunds-batch"


def test_a_users_spent_budget_refuses_that_users_requests_only_and_names_it(
    platform_rig: tuple[Rig, Pipeline, str], settings: Any
) -> None:
    from apps.common.buckets import month_of
    from apps.plans.planning import budget_set

    settings.ROLLUP_DIMS = [*settings.ROLLUP_DIMS, "user"]  # the operator rolls the user id up
    rig, pipeline, _ = platform_rig
    month = month_of(datetime.now(UTC))
    budget_set(business_line="refunds", dim="user", value="u-42", month=month, tokens=PER_REQUEST + 1, hard=True)
    u42, u7 = {"X-Costplatform-User": "u-42"}, {"X-Costplatform-User": "u-7"}
    assert (chat(rig, REFUNDS, **u42)[0], chat(rig, REFUNDS, **u7)[0]) == (200, 200)
    settled(pipeline)
    assert chat(rig, REFUNDS, **u42)[0] == 200  # 1 answer (its own) leaves it unspent; u-7's are not its
    settled(pipeline)

    status, _, body = chat(rig, REFUNDS, **u42)
    batch, _, _ = chat(rig, REFUNDS_BATCH, **u42)  # another caller of the line: the same user's budget
    other, nobody = chat(rig, REFUNDS, **u7)[0], chat(rig, REFUNDS)[0]

    assert (status, batch, other, nobody) == (429, 429, 200, 200)
    error = body["error"]
    assert (error["budget"]["dim"], error["budget"]["value"], error["budget"]["caller"]) == ("user", "u-42", None)
    assert "business line 'refunds', user 'u-42' is spent" in error["message"]


# --- the platform down --------------------------------------------------------------------------


def down_gate(*, fail_closed: bool) -> BudgetGate:
    """A gate whose platform is not there (nothing listens on its port)."""
    return BudgetGate(http_fetch(f"http://127.0.0.1:{free_port()}", "cpk_x", timeout=1), interval=POLL,
                      fail_closed=fail_closed).start()  # fmt: skip


@pytest.mark.parametrize("fail_closed", [False, True], ids=["open", "closed"])
def test_with_the_platform_down_the_gate_fails_as_set(
    upstream: tuple[Upstream, str], budget_map: Path, fail_closed: bool
) -> None:
    gate = down_gate(fail_closed=fail_closed)
    before = refused_total("refunds", "unknown")
    records = Records()
    try:
        for rig in proxied(upstream, budget_map, records, gate):
            time.sleep(3 * POLL)  # a few polls fail
            status, _, body = chat(rig, REFUNDS)
            calls = rig.upstream.counter
    finally:
        gate.stop()

    (record,) = records.wait(1)
    if fail_closed:
        assert status == 503 and body["error"]["type"] == "budget_state_unavailable"
        assert calls == 0 and refused_total("refunds", "unknown") == before + 1
        # recorded as the vLLM middleware records it: rejected, no tokens
        assert record["outcome"] == {"status": "rejected"} and record["tokens"] == {"prompt": 0, "completion": 0}
    else:
        assert status == 200 and calls == 1 and refused_total("refunds", "unknown") == before
        assert record["outcome"]["status"] == "ok"


def test_a_known_state_outlives_a_platform_outage_until_it_is_stale() -> None:
    answers: list[Any] = [
        {"budgets": [{"id": 1, "business_line": "refunds", "team": "", "hard": True, "holds": True, "currency": "",
                      "amount": None, "used_amount": "0.00", "tokens": 10, "used_tokens": 12,
                      "resets_at": "2099-01-01T00:00:00+00:00"}]},
        OSError("platform down"),
    ]  # fmt: skip

    def fetch() -> Any:
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    gate = BudgetGate(fetch, interval=60, fail_closed=True, stale=0.5)
    assert gate.poll() and not gate.poll()  # read once, then the platform is gone

    held = gate.check({"business_line": "refunds"})
    served = gate.check({"business_line": "billing"})
    time.sleep(0.6)
    stale = gate.check({"business_line": "billing"})

    assert held is not None and held.status == 429 and served is None
    assert stale is not None and stale.status == 503


def test_a_team_budget_refuses_its_team_only() -> None:
    budget = {"id": 1, "business_line": "refunds", "team": "cs-bot", "hard": True, "holds": True, "currency": "CNY",
              "amount": "10.00", "used_amount": "10.40", "tokens": None, "used_tokens": 0,
              "resets_at": "2099-01-01T00:00:00+08:00"}  # fmt: skip
    gate = BudgetGate(lambda: {"budgets": [budget]}, interval=60)
    assert gate.poll()

    refusal = gate.check({"business_line": "refunds", "team": "cs-bot"})

    assert refusal is not None and gate.check({"business_line": "refunds", "team": "cs-web"}) is None
    error = json.loads(refusal.body)["error"]
    assert "10.40 of 10.00 CNY" in error["message"] and "team 'cs-bot'" in error["message"]
    assert (error["budget"]["used_amount"], error["budget"]["limit_amount"]) == ("10.40", "10.00")
    assert error["budget"]["caller"] is None and "caller" not in error["message"]  # an answer without caller


def test_a_caller_budget_within_a_team_refuses_that_caller_of_that_team_only() -> None:
    budget = {"id": 2, "business_line": "refunds", "team": "cs-bot", "caller": "refunds-app", "hard": True,
              "holds": True, "currency": "", "amount": None, "used_amount": "0.00", "tokens": 10, "used_tokens": 12,
              "resets_at": "2099-01-01T00:00:00+08:00"}  # fmt: skip
    gate = BudgetGate(lambda: {"budgets": [budget]}, interval=60)
    assert gate.poll()
    line = {"business_line": "refunds", "team": "cs-bot"}

    refusal = gate.check(line | {"caller": "refunds-app"})

    assert refusal is not None and refusal.status == 429
    assert gate.check(line | {"caller": "refunds-batch"}) is None and gate.check(line) is None
    assert gate.check({"business_line": "refunds", "team": "cs-web", "caller": "refunds-app"}) is None
    error = json.loads(refusal.body)["error"]
    assert "business line 'refunds', team 'cs-bot', caller 'refunds-app'" in error["message"]
    assert (error["budget"]["team"], error["budget"]["caller"]) == ("cs-bot", "refunds-app")


# --- floods of free dims (issue 31, finding 4) -----------------------------------------------------


def spent_caller_gate() -> BudgetGate:
    """refunds-app's own hard budget spent, its line's not."""
    budget = {"id": 3, "business_line": "refunds", "team": "", "caller": "refunds-app", "hard": True, "holds": True,
              "currency": "", "amount": None, "used_amount": "0.00", "tokens": 10, "used_tokens": 12,
              "resets_at": "2099-01-01T00:00:00+08:00"}  # fmt: skip
    gate = BudgetGate(lambda: {"budgets": [budget]}, interval=60)
    assert gate.poll()
    return gate


@pytest.mark.parametrize("through", ["headers", "metadata"])
def test_thirty_free_dims_never_push_the_caller_out_of_its_budget(
    upstream: tuple[Upstream, str], budget_map: Path, through: str
) -> None:
    records = Records()
    for rig in proxied(upstream, budget_map, records, spent_caller_gate()):
        flood = {f"F{i:02d}": "x" for i in range(30)}
        headers = {f"X-Costplatform-{k}": v for k, v in flood.items()} if through == "headers" else {}
        body = {"model": "qwen2.5-7b-instruct", "messages": MESSAGES}
        body |= {"metadata": flood} if through == "metadata" else {}
        status, _, answer = rig.post("/v1/chat/completions", body, Authorization=f"Bearer {REFUNDS}", **headers)
        calls = rig.upstream.counter
        served_other = chat(rig, REFUNDS_BATCH)[0]

    assert status == 429, answer
    assert json.loads(answer)["error"]["budget"]["caller"] == "refunds-app"
    assert calls == 0 and served_other == 200
    (refused,) = [r for r in records.wait(2) if r["outcome"]["status"] == "rejected"]
    assert refused["dims"]["caller"] == "refunds-app" and len(refused["dims"]) == 32


def test_with_reservations_a_request_is_served_only_while_its_largest_use_fits(
    upstream: tuple[Upstream, str], budget_map: Path
) -> None:
    """The proxy reserves a request's prompt (bounded by its bytes) plus its max_tokens, refuses
    the one that does not fit with the 429 and its reservation, and settles each served one to
    the usage the upstream reported (wire/reservations.py, on the tests' Redis)."""
    prefix = "{test-proxy-budgets-" + uuid.uuid4().hex + "}"
    store = Reservations(redis.Redis.from_url(os.environ["CELERY_BROKER_URL"]), ttl=60, hold=60, prefix=prefix)
    body = {"model": "qwen2.5-7b-instruct", "messages": MESSAGES, "max_tokens": len(WORDS)}
    need = largest_use("chat.completions", body, prompt_tokens=lambda b: 0, default_max=100).tokens
    assert need > PER_REQUEST  # the byte bound reserves more than the prompt's tokens
    limit, used = 10**6, 10**6 - (need + 2 * PER_REQUEST - 1)  # room for two answers and one more reservation
    budget = {
        "id": 1, "business_line": "refunds", "team": "", "caller": "", "hard": True, "holds": False, "currency": "",
        "amount": None, "used_amount": "0.00", "tokens": limit, "used_tokens": used,
        "resets_at": "2099-01-01T00:00:00+00:00",
    }  # fmt: skip
    gate = BudgetGate(lambda: {"budgets": [budget]}, interval=60, reservations=store)
    assert gate.poll()
    fake, url = upstream
    records = Records()
    settings = Settings(upstream=url, upstream_key="sk-up", hash_key=HASH_KEY, policy=Policy(budget_map),
                        budgets=gate, budget_max_tokens=100)  # fmt: skip
    with proxy_thread(settings, records) as proxy_url:
        rig = Rig(fake, url, records)
        rig.url = proxy_url
        for served in (1, 2):
            status, _, raw = rig.post("/v1/chat/completions", body, Authorization=f"Bearer {REFUNDS}")
            assert status == 200, raw
            wait_for(lambda n=served: store.held(1) == n * PER_REQUEST)  # settled to what the upstream reported
        status, headers, raw = rig.post("/v1/chat/completions", body, Authorization=f"Bearer {REFUNDS}")
        no_max = {"model": "qwen2.5-7b-instruct", "messages": MESSAGES}
        _, _, default = rig.post("/v1/chat/completions", no_max, Authorization=f"Bearer {REFUNDS}")

    assert status == 429 and int(headers["Retry-After"]) > 0
    error = json.loads(raw)["error"]
    assert error["code"] == "budget_exceeded" and error["budget"]["business_line"] == "refunds"
    assert error["reservation"]["tokens"] == need and error["reservation"]["held_tokens"] == 2 * PER_REQUEST
    assert error["reservation"]["room_tokens"] == need - 1
    assert json.loads(default)["error"]["reservation"]["max_tokens_from"] == "default"
    assert len(fake.seen) == 2  # the refused never went upstream
    assert refused_total("refunds", "room") >= 2
    redis.Redis.from_url(os.environ["CELERY_BROKER_URL"]).delete(*store.keys([1]))
