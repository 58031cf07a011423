"""Reservations against hard token budgets, shared by every edge of a deployment in one Redis.

Before an edge serves a request it reserves the request's largest possible use (`Need`: its
prompt tokens plus what it may generate) against every hard token budget that covers it; a
reservation that would take a budget past its room (limit - the use the platform last reported)
is refused, and the edge answers 429. After the answer (or the client's disconnect, or an
error) the edge settles the reservation to the real use, which stays reserved for `hold`
seconds: the time for the request's record to reach the platform and a poll to read it back,
after which the platform's own figure counts it; once the platform acknowledges the record the
hold is cut to the polls that read it (`shorten`). A reservation never settled (its edge died)
expires after `ttl` seconds.

Why Redis, with one Lua script per operation: a script runs alone on the server, so the check
of every covering budget and the reservation against all of them are one atomic step across the
threads, processes and machines of every edge that shares the Redis; it costs one round trip
on loopback or the LAN, and the time inside comes from Redis's own clock, so edges with skewed
clocks expire alike. The platform's database would serialise each budget's requests behind a
row lock and put a platform round trip on every request's way (docs/budgets.md, "Reservations").

Each budget is three keys under one hash tag (one slot in a Redis Cluster): a hash of request id
-> reserved tokens, a sorted set of request id -> expiry (ms, Redis time) and the running total.
Standard library and redis-py only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PREFIX = "{costplatform-budgets}"
KEEP_MS = 60_000  # a budget's keys outlive its longest entry by this much, then Redis drops them

_PURGE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function purge(h, z, s)
  local gone = redis.call('ZRANGEBYSCORE', z, '-inf', now)
  local freed = 0
  for _, id in ipairs(gone) do
    freed = freed + tonumber(redis.call('HGET', h, id) or '0')
    redis.call('HDEL', h, id)
  end
  if #gone > 0 then redis.call('ZREMRANGEBYSCORE', z, '-inf', now) end
  return tonumber(redis.call('DECRBY', s, freed))
end
local function keep(i, ms)
  for k = 3 * i - 2, 3 * i do redis.call('PEXPIRE', KEYS[k], ms) end
end
"""

# KEYS: per budget its hash, its expiry set and its total. ARGV: request id, tokens, ttl ms,
# keep ms, then each budget's room. Answers {0, held...} when reserved against every budget,
# else {i, held by budget i before this request} for the first budget without room.
RESERVE = (
    _PURGE
    + """
local id, amount, ttl, keep_ms = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local n = #KEYS / 3
local held = {}
for i = 1, n do held[i] = purge(KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]) end
for i = 1, n do
  if held[i] + amount > tonumber(ARGV[4 + i]) then return {i, held[i]} end
end
for i = 1, n do
  local old = tonumber(redis.call('HGET', KEYS[3 * i - 2], id) or '0')
  redis.call('HSET', KEYS[3 * i - 2], id, amount)
  redis.call('ZADD', KEYS[3 * i - 1], now + ttl, id)
  redis.call('INCRBY', KEYS[3 * i], amount - old)
  keep(i, keep_ms)
end
local out = {0}
for i = 1, n do out[i + 1] = held[i] end
return out
"""
)

# KEYS as RESERVE's. ARGV: request id, the real use (-1: unknown, keep what was reserved), hold
# ms, keep ms. The use stays reserved for the hold (0: released now); a reservation that had
# expired meanwhile is put back with the real use, which was spent all the same.
SETTLE = (
    _PURGE
    + """
local id, used, hold, keep_ms = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
for i = 1, #KEYS / 3 do
  local h, z, s = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  purge(h, z, s)
  local old = tonumber(redis.call('HGET', h, id) or '0')
  local now_used = used
  if used < 0 then now_used = old end
  if now_used > 0 and hold > 0 then
    redis.call('HSET', h, id, now_used)
    redis.call('ZADD', z, now + hold, id)
  else
    redis.call('HDEL', h, id)
    redis.call('ZREM', z, id)
    now_used = 0
  end
  redis.call('INCRBY', s, now_used - old)
  keep(i, keep_ms)
end
return 0
"""
)


# KEYS as RESERVE's. ARGV: hold ms, then request ids. Each of those whose entry would live
# longer than the hold from now lives that long (their records are stored on the platform).
SHORTEN = (
    _PURGE
    + """
local cut = now + tonumber(ARGV[1])
for i = 1, #KEYS / 3 do
  local z = KEYS[3 * i - 1]
  purge(KEYS[3 * i - 2], z, KEYS[3 * i])
  for k = 2, #ARGV do
    local at = redis.call('ZSCORE', z, ARGV[k])
    if at and tonumber(at) > cut then redis.call('ZADD', z, 'XX', cut, ARGV[k]) end
  end
end
return 0
"""
)


@dataclass(frozen=True)
class Need:
    """The most a request can use: its prompt and what it may generate (max_tokens x choices, or
    the edge's default where the request sets no max_tokens)."""

    prompt: int
    completion: int
    max_tokens: int
    max_tokens_default: bool  # max_tokens was the edge's default, not the request's

    @property
    def tokens(self) -> int:
        return self.prompt + self.completion

    def as_json(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "prompt_tokens": self.prompt,
            "max_tokens": self.max_tokens,
            "max_tokens_from": "default" if self.max_tokens_default else "request",
            "completion_tokens": self.completion,
        }


# The field that caps what each endpoint generates, in the order an endpoint reads them.
MAX_FIELDS = {
    "chat.completions": ("max_completion_tokens", "max_tokens"),
    "completions": ("max_tokens",),
    "responses": ("max_output_tokens",),
    "embeddings": (),
    "messages": ("max_tokens",),
}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def sequences(endpoint: str, body: Mapping[str, Any]) -> int:
    """How many answers a request generates: n choices, of each prompt of a completions list."""
    n = _int(body.get("n")) or 1
    prompt = body.get("prompt")
    if endpoint == "completions" and isinstance(prompt, list) and prompt and not isinstance(prompt[0], int):
        return n * len(prompt)
    return n


def byte_bound(body: Mapping[str, Any]) -> int:
    """An upper bound of a request's prompt tokens without its tokenizer: the UTF-8 bytes of what
    it asks (messages with their roles and JSON punctuation, tools, a prompt or an input). A
    byte-level BPE or byte-fallback tokenizer makes at most one token of each byte; the JSON
    around each message stands for the chat template's own tokens. Token-id prompts count
    their ids."""
    prompt = body.get("prompt")
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return len(prompt)
    if isinstance(prompt, list) and prompt and all(isinstance(p, list) for p in prompt):
        return sum(len(p) for p in prompt)
    parts = [body.get(name) for name in ("system", "messages", "prompt", "input", "instructions", "tools")]
    return sum(len(json.dumps(part, ensure_ascii=False).encode()) for part in parts if part is not None)


def largest_use(
    endpoint: str, body: Mapping[str, Any], *, prompt_tokens: Callable[[Mapping[str, Any]], int], default_max: int
) -> Need:
    """The request's Need: `prompt_tokens(body)` (0: not counted, the byte bound instead) and its
    max_tokens times its answers, `default_max` where it sets none."""
    prompt = prompt_tokens(body) or byte_bound(body)
    fields = MAX_FIELDS.get(endpoint, ("max_tokens",))
    asked = next((v for v in (_int(body.get(f)) for f in fields) if v is not None), None)
    if not fields:
        return Need(prompt, 0, 0, False)
    max_tokens = asked if asked is not None else default_max
    return Need(prompt, max_tokens * sequences(endpoint, body), max_tokens, asked is None)


class Reservations:
    """The reservations of one deployment's edges in one Redis (redis-py client)."""

    def __init__(self, client: Any, *, ttl: float, hold: float, prefix: str = PREFIX) -> None:
        self.client = client
        self.ttl_ms = int(ttl * 1000)
        self.hold_ms = int(hold * 1000)
        self.keep_ms = max(self.ttl_ms, self.hold_ms) + KEEP_MS
        self.prefix = prefix
        self._reserve = client.register_script(RESERVE)
        self._settle = client.register_script(SETTLE)
        self._shorten = client.register_script(SHORTEN)

    @classmethod
    def from_url(cls, url: str, *, ttl: float, hold: float, timeout: float = 2.0) -> Reservations:
        import redis

        client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
        return cls(client, ttl=ttl, hold=hold)

    def keys(self, budget_ids: Sequence[int]) -> list[str]:
        return [f"{self.prefix}:{b}:{part}" for b in budget_ids for part in ("held", "until", "total")]

    def reserve(self, request_id: str, tokens: int, rooms: Sequence[tuple[int, int]]) -> tuple[int | None, list[int]]:
        """Reserve `tokens` for the request against each (budget id, room), all or none: (None,
        what each budget held before) when reserved, else (the index of the first budget
        without room, [what it held])."""
        answer = self._reserve(
            keys=self.keys([b for b, _ in rooms]),
            args=[request_id, tokens, self.ttl_ms, self.keep_ms, *(room for _, room in rooms)],
        )
        first, *held = (int(v) for v in answer)
        return (None, held) if first == 0 else (first - 1, held)

    def settle(self, request_id: str, budget_ids: Sequence[int], tokens: int | None) -> None:
        """The request's real use (None: unknown, its reservation stands) reserved for the hold."""
        args = [request_id, -1 if tokens is None else tokens, self.hold_ms, self.keep_ms]
        self._settle(keys=self.keys(budget_ids), args=args)

    def shorten(self, request_ids: Sequence[str], budget_ids: Sequence[int], hold: float) -> None:
        """The settled uses of these requests stay reserved `hold` seconds from now at most."""
        self._shorten(keys=self.keys(budget_ids), args=[int(hold * 1000), *request_ids])

    def held(self, budget_id: int) -> int:
        """Tokens the budget holds now (expired entries included until the next operation)."""
        return int(self.client.get(self.keys([budget_id])[2]) or 0)
