"""Reservations against hard token budgets (wire/reservations.py) on the real Redis the tests
use (CELERY_BROKER_URL's, one database a worker), each test under keys of its own: the
arithmetic of a request's largest use, and threads and processes racing for one budget's room."""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from wire.budgets import BudgetGate
from wire.reservations import Need, Reservations, byte_bound, largest_use

ROOM = 1_000
BUDGET = {
    "id": 7, "business_line": "search", "team": "", "caller": "", "hard": True, "holds": False, "currency": "",
    "amount": None, "used_amount": "0.00", "tokens": 1_500, "used_tokens": 1_500 - ROOM,
    "resets_at": "2099-01-01T00:00:00+00:00", "override_until": None,
}  # fmt: skip
SEARCH = {"business_line": "search"}


def redis_url() -> str:
    return os.environ["CELERY_BROKER_URL"]  # tests/conftest.py: this worker's own database


def store(prefix: str, *, ttl: float = 60.0, hold: float = 60.0) -> Reservations:
    return Reservations(redis.Redis.from_url(redis_url()), ttl=ttl, hold=hold, prefix=prefix)


@pytest.fixture
def prefix() -> Iterator[str]:
    name = "{test-budgets-" + uuid.uuid4().hex + "}"
    yield name
    client = redis.Redis.from_url(redis_url())
    for key in client.scan_iter(match=name.replace("{", "[{]").replace("}", "[}]") + ":*"):
        client.delete(key)


def race(reserve: Any, attempts: int, threads: int) -> list[bool]:
    """`attempts` calls of reserve(i) spread over `threads` threads released at once."""
    results: list[bool] = []
    lock, start = threading.Lock(), threading.Barrier(threads)

    def run(offset: int) -> None:
        start.wait()
        for i in range(offset, attempts, threads):
            ok = reserve(i)
            with lock:
                results.append(ok)

    workers = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    return results


# --- a request's largest use --------------------------------------------------------------------


def no_tokenizer(body: Any) -> int:
    return 0


def test_it_reserves_the_prompt_and_max_tokens_times_the_answers() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 16, "n": 3}
    need = largest_use("chat.completions", body, prompt_tokens=lambda b: 9, default_max=4096)
    assert (need.prompt, need.completion, need.tokens, need.max_tokens_default) == (9, 48, 57, False)


def test_max_completion_tokens_wins_over_max_tokens_and_the_responses_api_reads_max_output_tokens() -> None:
    chat = {"messages": [], "max_completion_tokens": 5, "max_tokens": 50}
    assert largest_use("chat.completions", chat, prompt_tokens=lambda b: 1, default_max=9).completion == 5
    responses = {"input": "hi", "max_output_tokens": 7}
    assert largest_use("responses", responses, prompt_tokens=lambda b: 1, default_max=9).completion == 7


def test_a_request_without_max_tokens_reserves_the_edges_default_and_says_so() -> None:
    need = largest_use("completions", {"prompt": ["a", "b"]}, prompt_tokens=lambda b: 4, default_max=100)
    assert need.completion == 200 and need.max_tokens_default
    assert need.as_json()["max_tokens_from"] == "default"


def test_an_embedding_reserves_its_input_only() -> None:
    need = largest_use("embeddings", {"input": "hello", "max_tokens": 99}, prompt_tokens=lambda b: 2, default_max=9)
    assert need.tokens == 2


def test_without_a_tokenizer_the_prompt_is_bounded_by_its_bytes() -> None:
    messages = [{"role": "user", "content": "预算还剩多少"}]
    assert byte_bound({"messages": messages}) == len(json.dumps(messages, ensure_ascii=False).encode())
    assert byte_bound({"prompt": [1, 2, 3]}) == 3
    need = largest_use("chat.completions", {"messages": messages, "max_tokens": 1}, prompt_tokens=no_tokenizer,
                       default_max=9)  # fmt: skip
    assert need.prompt > 18  # six characters of three bytes each, and the JSON around them


# --- the store ------------------------------------------------------------------------------


def test_threads_racing_for_one_budget_reserve_exactly_its_room(prefix: str) -> None:
    reservations = store(prefix)
    results = race(lambda i: reservations.reserve(f"r{i}", 10, [(1, ROOM)])[0] is None, attempts=300, threads=32)
    assert results.count(True) == ROOM // 10 and len(results) == 300
    assert reservations.held(1) == ROOM


def test_processes_racing_for_one_budget_reserve_exactly_its_room(prefix: str) -> None:
    """Four processes (the edges of one deployment), 16 threads each, one Redis."""
    context = multiprocessing.get_context("fork")
    with context.Pool(4) as pool:
        counts = pool.starmap(_reserve_in_a_process, [(prefix, p) for p in range(4)])
    assert sum(counts) == ROOM // 7 and store(prefix).held(1) == ROOM // 7 * 7


def _reserve_in_a_process(prefix: str, process: int) -> int:
    reservations = store(prefix)  # a client of this process's own
    ok = race(lambda i: reservations.reserve(f"p{process}-{i}", 7, [(1, ROOM)])[0] is None, attempts=100, threads=16)
    return ok.count(True)


def test_a_request_is_reserved_against_every_budget_that_covers_it_or_none(prefix: str) -> None:
    reservations = store(prefix)
    assert reservations.reserve("a", 40, [(1, 100), (2, 50)]) == (None, [0, 0])
    assert reservations.reserve("b", 40, [(1, 100), (2, 50)]) == (1, [40])  # the second budget has no room
    assert (reservations.held(1), reservations.held(2)) == (40, 40)  # nothing of "b" was kept
    assert reservations.reserve("c", 60, [(1, 100)]) == (None, [40])


def test_settling_keeps_the_real_use_and_releases_the_rest(prefix: str) -> None:
    reservations = store(prefix)
    reservations.reserve("a", 500, [(1, ROOM)])
    reservations.reserve("b", 500, [(1, ROOM)])
    assert reservations.reserve("c", 100, [(1, ROOM)])[0] == 0
    reservations.settle("a", [1], 120)  # it used 120 of its 500
    reservations.settle("b", [1], None)  # its use is unknown: its 500 stand
    assert reservations.held(1) == 620
    assert reservations.reserve("c", 380, [(1, ROOM)])[0] is None
    reservations.settle("c", [1], 0)  # never reached the engine
    assert reservations.held(1) == 620


def test_the_reservations_of_an_edge_that_died_expire(prefix: str) -> None:
    dead = store(prefix, ttl=0)  # its reservations expire at once: as if their time ran out
    assert dead.reserve("a", ROOM, [(1, ROOM)])[0] is None
    live = store(prefix)
    assert live.reserve("b", ROOM, [(1, ROOM)]) == (None, [0])


def test_a_settled_use_expires_after_the_hold(prefix: str) -> None:
    reservations = store(prefix, hold=0)  # the platform's figure counts it from now on
    reservations.reserve("a", 300, [(1, ROOM)])
    reservations.settle("a", [1], 200)
    assert reservations.reserve("b", ROOM, [(1, ROOM)]) == (None, [0])


# --- the gate: 429 for a request without room ------------------------------------------------


def gate(prefix: str) -> BudgetGate:
    held = BudgetGate(lambda: {"budgets": [BUDGET]}, interval=60, reservations=store(prefix))
    assert held.poll()
    return held


def test_concurrent_requests_through_the_gate_never_reserve_past_the_limit(prefix: str) -> None:
    held = gate(prefix)
    need = Need(prompt=20, completion=16, max_tokens=16, max_tokens_default=False)
    refusals: list[Any] = []

    def admit(i: int) -> bool:
        refusal = held.check(SEARCH, f"r{i}", lambda: need)
        if refusal is not None:
            refusals.append(refusal)
        return refusal is None

    results = race(admit, attempts=64, threads=32)
    assert results.count(True) == ROOM // need.tokens
    refusal = refusals[0]
    assert refusal.status == 429 and int(refusal.headers["Retry-After"]) > 0 and refusal.reason == "room"
    error = json.loads(refusal.body)["error"]
    assert error["code"] == "budget_exceeded" and error["budget"]["id"] == BUDGET["id"]
    assert error["budget"]["limit_tokens"] == 1_500 and error["budget"]["used_tokens"] == 500
    assert error["reservation"]["tokens"] == 36 and error["reservation"]["held_tokens"] == 27 * 36
    assert "no room for this request" in error["message"]


def test_a_settled_record_frees_what_it_did_not_use(prefix: str) -> None:
    held = gate(prefix)
    need = Need(prompt=400, completion=500, max_tokens=500, max_tokens_default=False)
    assert held.check(SEARCH, "a", lambda: need) is None
    assert held.check(SEARCH, "b", lambda: need) is not None
    held.settle_record({"record_id": "a", "tokens": {"prompt": 400, "completion": 3}, "outcome": {"status": "ok"}})
    assert held.reservations is not None and held.reservations.held(BUDGET["id"]) == 403
    assert held.check(SEARCH, "b", lambda: Need(400, 100, 100, False)) is None


def test_another_line_and_an_overridden_budget_reserve_nothing(prefix: str) -> None:
    overridden = dict(BUDGET, override_until="2099-01-01T00:00:00+00:00")
    held = BudgetGate(lambda: {"budgets": [overridden]}, interval=60, reservations=store(prefix))
    held.poll()
    big = Need(prompt=10**6, completion=0, max_tokens=0, max_tokens_default=False)
    assert held.check(SEARCH, "a", lambda: big) is None
    assert gate(prefix).check({"business_line": "ads"}, "b", lambda: big) is None


def test_an_unreachable_store_fails_as_the_gate_is_set(prefix: str) -> None:
    gone = Reservations(redis.Redis(port=1, socket_connect_timeout=1), ttl=60, hold=60, prefix=prefix)
    need = Need(1, 1, 1, False)
    for closed, status in ((False, None), (True, 503)):
        held = BudgetGate(lambda: {"budgets": [BUDGET]}, interval=60, fail_closed=closed, reservations=gone)
        held.poll()
        refusal = held.check(SEARCH, "a", lambda: need)
        assert (refusal.status if refusal else None) == status


def test_a_stored_records_use_is_held_only_until_the_polls_read_it(prefix: str) -> None:
    """Once the shipper says the platform stored the record (BudgetGate.acked), its settled use
    is held for two polls and a second, not the whole hold."""
    held = BudgetGate(lambda: {"budgets": [BUDGET]}, interval=0.5, reservations=store(prefix, hold=600))
    held.poll()
    assert held.check(SEARCH, "a", lambda: Need(10, 10, 10, False)) is None
    assert held.check(SEARCH, "b", lambda: Need(10, 10, 10, False)) is None
    for request_id in ("a", "b"):
        held.settle_record({"record_id": request_id, "tokens": {"prompt": 10, "completion": 5}, "outcome": {}})

    held.acked([json.dumps({"record_id": "a", "tokens": {"prompt": 10}}).encode(), b"not json"])

    client = redis.Redis.from_url(redis_url())
    seconds, micros = client.time()
    now_ms = seconds * 1000 + micros // 1000
    until = f"{prefix}:{BUDGET['id']}:until"
    assert client.zscore(until, "a") <= now_ms + held.acked_hold * 1000  # two polls and a second
    assert client.zscore(until, "b") > now_ms + 590_000  # not stored yet: the whole hold
    assert store(prefix).held(BUDGET["id"]) == 30  # both still counted until then


def test_shortening_to_nothing_releases_a_stored_use(prefix: str) -> None:
    reservations = store(prefix)
    reservations.reserve("a", 300, [(1, ROOM)])
    reservations.settle("a", [1], 200)
    reservations.shorten(["a", "unknown"], [1], 0)
    assert reservations.reserve("b", ROOM, [(1, ROOM)]) == (None, [0])
