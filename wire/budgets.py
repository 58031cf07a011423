"""Hard budgets at the edge: a poller that caches the platform's budget state and a gate that
refuses new requests of a business line, team, caller or dim value whose hard budget is spent.

One implementation for the serving middleware and the proxy. `BudgetGate` polls
GET <platform>/api/v1/budgets/state with the edge's collector key every `interval` seconds on
a thread of its own; `check(dims)` answers from the cache, never from the network, so a
request waits on nothing. A budget covers a request of its line and, where the budget names
them, of its team, of its caller (the `caller` dim the attribution map's decision sets,
wire/attribution.py) and carrying its value of its dim (`user` `u-42`). A refusal is an
OpenAI-style error (HTTP 429, type and code `budget_exceeded`) naming the budget, what was used,
the limit and when it resets, with Retry-After in seconds. Requests already running are never
touched: they finish.

When the state is unknown (no answer yet, or none for `stale` seconds) the gate fails open
(serves) or, with `fail_closed`, refuses every request with a 503 `budget_state_unavailable`.
Refusals are counted in costplatform_serving_budget_refused_total{business_line,reason}.

With `reservations` (wire/reservations.py, a Redis every edge of the deployment shares) the
gate also reserves each new request's largest use against every hard token budget that
covers it, and refuses it with the same 429 (reason `room`, the reservation in the body) when
that would take a budget past its limit; `settle` turns the reservation into the real use once
the request's record is built, and `acked` (told by the shipper, wire/shipper.py) shortens its
hold once the platform has stored the record: two polls more, and the platform's figure has it.
Concurrent requests then cannot spend a budget past its limit between two polls (docs/budgets.md, "Reservations").
Standard library, msgspec, prometheus_client, redis-py and wire/ only: no Django, no vLLM.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec
from prometheus_client import Counter, Gauge

from wire.attribution import CALLER_DIM
from wire.reservations import Need, Reservations

log = logging.getLogger("costplatform.budgets")

ENDPOINT = "/api/v1/budgets/state"
ENV_POLL = "COSTPLATFORM_BUDGET_POLL"  # seconds between polls; unset or 0: budgets are not held
ENV_FAIL = "COSTPLATFORM_BUDGET_FAIL"  # open (default) or closed
ENV_STALE = "COSTPLATFORM_BUDGET_STALE"  # seconds a state stays usable without a fresh answer
ENV_RESERVE = "COSTPLATFORM_BUDGET_RESERVE"  # Redis URL of the deployment's reservations; unset: none
ENV_MAX_TOKENS = "COSTPLATFORM_BUDGET_MAX_TOKENS"  # reserved for a request that sets no max_tokens
ENV_HOLD = "COSTPLATFORM_BUDGET_HOLD"  # seconds a settled request's use stays reserved
ENV_TTL = "COSTPLATFORM_BUDGET_RESERVE_TTL"  # seconds an unsettled reservation lives (its edge died)
DEFAULT_MAX_TOKENS = 4096
DEFAULT_TTL = 600.0
FAIL_MODES = ("open", "closed")
MIN_STALE = 30.0

REFUSED = Counter(
    "costplatform_serving_budget_refused",
    "New requests refused at the edge: reason spent (a hard budget is spent), room (its reservation does not fit "
    "a hard budget) or unknown (no budget state or no reservation store, fail-closed)",
    ["business_line", "reason"],
)
RESERVED = Counter(
    "costplatform_serving_budget_reservations",
    "Reservations against hard token budgets: result reserved, refused, error (the store unreachable), "
    "settled or settle_error",
    ["result"],
)
POLLS = Counter("costplatform_serving_budget_polls", "Polls of the platform's budget state", ["result"])
STATE_AGE = Gauge(
    "costplatform_serving_budget_state_age_seconds", "Seconds since the budget state was last read (-1: never)"
)


def default_hold(interval: float) -> float:
    """How long a settled use stays reserved unless set: the record's way to the platform (the
    spool's flush, a shipping round, seconds) and two polls to read it back."""
    return 3.0 + 2 * interval


def add_reserve_arguments(parser: Any, *, max_tokens_default: str) -> None:
    """The reservation options of an edge's command line (argparse), each None unless given."""
    parser.add_argument(
        "--budget-reserve",
        metavar="REDIS_URL",
        help="with --budget-poll: before serving a request, reserve its largest use (prompt + max_tokens) against "
        "the hard token budgets that cover it in this Redis, shared by every edge of the deployment, and refuse "
        "it (429) when it does not fit (docs/budgets.md, Reservations). Default: off",
    )
    parser.add_argument(
        "--budget-max-tokens",
        type=int,
        help=f"tokens reserved for the answer of a request that sets no max_tokens (default: {max_tokens_default})",
    )
    parser.add_argument(
        "--budget-hold",
        type=float,
        help="seconds a finished request's use stays reserved, until its record is on the platform and polled "
        "(default: 3 + 2 polls)",
    )
    parser.add_argument(
        "--budget-reserve-ttl",
        type=float,
        help=f"seconds a reservation never settled lives (an edge that died; default {DEFAULT_TTL:.0f})",
    )


def config_error(poll: str | None, fail: str | None, **numbers: str | None) -> str | None:
    """Why the budget settings are unusable, or None (`numbers`: other settings by their
    environment names, each 0 or more)."""
    for name, value in {ENV_POLL: poll, **numbers}.items():
        try:
            if value and float(value) < 0:
                return f"{name}={value!r}: 0 or more"
        except ValueError:
            return f"{name}={value!r}: not a number"
    if fail and fail not in FAIL_MODES:
        return f"{ENV_FAIL}={fail!r}: one of {', '.join(FAIL_MODES)}"
    return None


@dataclass(frozen=True)
class Budget:
    """One budget of the platform's answer (apps/plans/api/budget_state.py)."""

    id: int
    business_line: str
    team: str
    hard: bool
    holds: bool
    currency: str
    amount: str | None
    used_amount: str
    tokens: int | None
    used_tokens: int
    resets_at: str
    override_until: str | None = None
    caller: str = ""  # a platform that predates caller budgets does not send it: every caller
    dim: str = ""  # nor one before dim budgets: none
    value: str = ""

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> Budget:
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in doc.items() if k in names})

    def covers(self, dims: Mapping[str, str]) -> bool:
        """Whether a request with these (trusted) dims is charged to this budget."""
        if dims.get("business_line", "") != self.business_line:
            return False
        if self.team and dims.get("team", "") != self.team:
            return False
        if self.caller and dims.get(CALLER_DIM, "") != self.caller:
            return False
        return not self.dim or dims.get(self.dim, "") == self.value

    @property
    def scope(self) -> str:
        team = f", team {self.team!r}" if self.team else ""
        caller = f", caller {self.caller!r}" if self.caller else ""
        dim = f", {self.dim} {self.value!r}" if self.dim else ""
        return f"business line {self.business_line!r}{team}{caller}{dim}"

    def usage_text(self) -> str:
        parts = []
        if self.tokens is not None:
            parts.append(f"{self.used_tokens:,} of {self.tokens:,} tokens")
        if self.amount is not None:
            parts.append(f"{self.used_amount} of {self.amount} {self.currency}")
        return " and ".join(parts)


@dataclass(frozen=True)
class Refusal:
    """The answer to a refused request: status, OpenAI-style JSON body and headers."""

    status: int
    body: bytes
    headers: Mapping[str, str]
    business_line: str
    reason: str


def _error(message: str, kind: str, **extra: Any) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": kind, **extra}}).encode()


def spent_refusal(budget: Budget, now: datetime) -> Refusal:
    """429 naming the budget, what it used, its limit and when it resets."""
    message = (
        f"The hard budget of {budget.scope} is spent: used {budget.usage_text()}. "
        f"New requests are refused until it resets at {budget.resets_at} (or finance grants an override)."
    )
    detail = {
        "id": budget.id,
        "business_line": budget.business_line,
        "team": budget.team or None,
        "caller": budget.caller or None,
        "dim": budget.dim or None,
        "value": budget.value or None,
        "used_tokens": budget.used_tokens,
        "limit_tokens": budget.tokens,
        "used_amount": budget.used_amount if budget.amount is not None else None,
        "limit_amount": budget.amount,
        "currency": budget.currency or None,
        "resets_at": budget.resets_at,
    }
    retry = max(int((datetime.fromisoformat(budget.resets_at) - now).total_seconds()), 1)
    body = _error(message, "budget_exceeded", budget=detail)
    return Refusal(429, body, {"Retry-After": str(retry)}, budget.business_line, "spent")


def room_refusal(budget: Budget, need: Need, held: int, now: datetime) -> Refusal:
    """429 for a request whose reservation does not fit: today's refusal (same headers, same
    `budget`) with what the request would have reserved and what requests in flight hold."""
    spent = spent_refusal(budget, now)
    room = (budget.tokens or 0) - budget.used_tokens - held
    message = (
        f"The hard budget of {budget.scope} has no room for this request: it may use up to {need.tokens:,} tokens "
        f"({need.prompt:,} prompt + {need.completion:,} to generate), and {budget.usage_text()} used and "
        f"{held:,} reserved by requests in flight leave {max(room, 0):,}. A request with a smaller max_tokens "
        f"may fit; else new requests are refused until it resets at {budget.resets_at} (or finance grants an "
        "override)."
    )
    error = json.loads(spent.body)["error"]
    error["message"] = message
    error["reservation"] = {**need.as_json(), "held_tokens": held, "room_tokens": room}
    return Refusal(429, json.dumps({"error": error}).encode(), spent.headers, budget.business_line, "room")


def unknown_refusal(business_line: str, age: float | None) -> Refusal:
    since = "has not been read yet" if age is None else f"was last read {age:.0f} s ago"
    message = f"Budget state unknown (the platform's budget state {since}) and budgets are held fail-closed."
    body = _error(message, "budget_state_unavailable")
    return Refusal(503, body, {"Retry-After": "5"}, business_line, "unknown")


Fetch = Callable[[], Mapping[str, Any]]


def http_fetch(url: str, key: str, timeout: float) -> Fetch:
    """GET the state endpoint with the collector key."""
    endpoint = url.rstrip("/") + ENDPOINT

    def fetch() -> Mapping[str, Any]:
        request = urllib.request.Request(endpoint, headers={"Authorization": f"Bearer {key}"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            doc = json.loads(response.read())
        if not isinstance(doc, dict) or not isinstance(doc.get("budgets"), list):
            raise ValueError("not a budget state answer")
        return doc

    return fetch


class BudgetGate:
    """The cached budget state of one edge and the check each new request passes."""

    def __init__(
        self,
        fetch: Fetch,
        *,
        interval: float,
        fail_closed: bool = False,
        stale: float | None = None,
        reservations: Reservations | None = None,
    ) -> None:
        self.fetch = fetch
        self.interval = interval
        self.fail_closed = fail_closed
        self.stale = stale if stale is not None else max(MIN_STALE, 4 * interval)
        self.reservations = reservations
        self._holding: tuple[Budget, ...] = ()
        self._reserving: tuple[Budget, ...] = ()  # hard token budgets without an active override
        # request id -> (the budgets it reserved against, when): settled from the record's thread
        self._held: dict[str, tuple[tuple[int, ...], float]] = {}
        # request id -> (the same, when settled): until the platform acknowledges its record
        self._settled: dict[str, tuple[tuple[int, ...], float]] = {}
        self._held_lock = threading.Lock()
        self._read_at: float | None = None  # time.monotonic() of the last good answer
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        STATE_AGE.set_function(lambda: -1.0 if self._read_at is None else time.monotonic() - self._read_at)

    def start(self) -> BudgetGate:
        self._thread = threading.Thread(target=self._run, name="costplatform-budgets", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll()
            self._stop.wait(self.interval)

    def poll(self) -> bool:
        """Read the state once; a failure keeps the last state (until it is stale)."""
        try:
            doc = self.fetch()
            budgets = [Budget.of(b) for b in doc["budgets"]]
        except (OSError, ValueError, KeyError, TypeError, urllib.error.URLError) as exc:
            POLLS.labels("error").inc()
            log.warning("budget state not read: %s", exc)
            return False
        self._holding = tuple(b for b in budgets if b.holds)
        self._reserving = tuple(b for b in budgets if b.hard and b.tokens is not None and not b.override_until)
        self._read_at = time.monotonic()
        POLLS.labels("ok").inc()
        self._forget_unsettled()
        return True

    def age(self) -> float | None:
        return None if self._read_at is None else time.monotonic() - self._read_at

    @property
    def reserves(self) -> bool:
        return self.reservations is not None

    def check(
        self, dims: Mapping[str, str], request_id: str = "", need: Callable[[], Need] | None = None
    ) -> Refusal | None:
        """The refusal for a new request with these trusted dims, or None to serve it. With
        reservations and `need` (asked only when a hard token budget covers the request), a
        request served holds a reservation under `request_id` until `settle`."""
        line = dims.get("business_line", "")
        age = self.age()
        if age is None or age > self.stale:
            if not self.fail_closed:
                return None
            refusal: Refusal | None = unknown_refusal(line, age)
        else:
            budget = next((b for b in self._holding if b.covers(dims)), None)
            if budget is not None:
                refusal = spent_refusal(budget, datetime.now(UTC))
            elif self.reservations is not None and need is not None:
                refusal = self._reserve(dims, request_id, need)
            else:
                refusal = None
        if refusal is not None:
            REFUSED.labels(line, refusal.reason).inc()
        return refusal

    def _reserve(self, dims: Mapping[str, str], request_id: str, need: Callable[[], Need]) -> Refusal | None:
        assert self.reservations is not None
        covering = [b for b in self._reserving if b.covers(dims)]
        if not covering:
            return None
        wanted = need()
        rooms = [(b.id, (b.tokens or 0) - b.used_tokens) for b in covering]
        try:
            refused, held = self.reservations.reserve(request_id, wanted.tokens, rooms)
        except Exception as exc:  # the store unreachable: as an unknown state
            RESERVED.labels("error").inc()
            log.warning("budget reservation not made: %s", exc)
            return unknown_refusal(dims.get("business_line", ""), self.age()) if self.fail_closed else None
        if refused is not None:
            RESERVED.labels("refused").inc()
            return room_refusal(covering[refused], wanted, held[0], datetime.now(UTC))
        RESERVED.labels("reserved").inc()
        with self._held_lock:
            self._held[request_id] = (tuple(b.id for b in covering), time.monotonic())
        return None

    def settle(self, request_id: str, tokens: int | None) -> None:
        """Settle a served request's reservation to its real use (None: unknown, e.g. a client
        that went away before the engine's counts: what was reserved stands for the hold)."""
        if self.reservations is None:
            return
        with self._held_lock:
            held = self._held.pop(request_id, None)
        if held is None:
            return
        try:
            self.reservations.settle(request_id, held[0], tokens)
        except Exception as exc:  # it expires on its own
            RESERVED.labels("settle_error").inc()
            log.warning("budget reservation of %s not settled: %s", request_id, exc)
            return
        RESERVED.labels("settled").inc()
        with self._held_lock:
            self._settled[request_id] = (held[0], time.monotonic())

    @property
    def acked_hold(self) -> float:
        """How long a use stays reserved once its record is stored: until a poll begun after
        that has been read (two polls, and a second for the poll's own answer)."""
        return 2 * self.interval + 1.0

    def acked(self, lines: Sequence[bytes]) -> None:
        """The platform stored these records (JSON lines, the shipper's batch): the uses they
        settled stay reserved for acked_hold only, not the whole hold (which stays for records
        that never reach it)."""
        if self.reservations is None:
            return
        ids = [_record_id(line) for line in lines]
        groups: dict[tuple[int, ...], list[str]] = defaultdict(list)
        with self._held_lock:
            for request_id in ids:
                settled = self._settled.pop(request_id, None) if request_id else None
                if settled is not None:
                    groups[settled[0]].append(request_id)
        for budget_ids, request_ids in groups.items():
            try:
                self.reservations.shorten(request_ids, budget_ids, self.acked_hold)
            except Exception as exc:  # the hold runs its course
                log.warning("budget reservations of %d stored records not shortened: %s", len(request_ids), exc)

    def settle_record(self, record: Mapping[str, Any]) -> None:
        """settle() with a record's use: prompt + completion tokens, as a budget counts them; an
        aborted request that counted none is unknown."""
        tokens = record.get("tokens") or {}
        used = int(tokens.get("prompt") or 0) + int(tokens.get("completion") or 0)
        aborted = (record.get("outcome") or {}).get("status") == "aborted"
        self.settle(str(record.get("record_id")), None if aborted and not used else used)

    def _forget_unsettled(self) -> None:
        """Drop the local note of reservations never settled (a record that was not built):
        Redis expired them already."""
        if self.reservations is None:
            return
        now = time.monotonic()
        for notes, lifetime in ((self._held, self.reservations.ttl_ms), (self._settled, self.reservations.hold_ms)):
            with self._held_lock:
                for request_id in [r for r, (_, at) in notes.items() if at < now - lifetime / 1000]:
                    del notes[request_id]


class _RecordId(msgspec.Struct):
    record_id: str = ""


def _record_id(line: bytes) -> str:
    try:
        return msgspec.json.decode(line, type=_RecordId).record_id
    except msgspec.DecodeError:
        return ""


def polling_gate(
    url: str,
    key: str,
    *,
    interval: float,
    fail_closed: bool,
    stale: float | None = None,
    reservations: Reservations | None = None,
) -> BudgetGate:
    """A started gate polling the platform at `url` with the collector `key`."""
    fetch = http_fetch(url, key, timeout=min(10.0, max(interval, 1.0)))
    gate = BudgetGate(fetch, interval=interval, fail_closed=fail_closed, stale=stale, reservations=reservations)
    return gate.start()
