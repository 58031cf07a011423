"""Who pays for a request: the operator's attribution map, applied to what the caller claims.

One implementation for every edge that takes requests: the vLLM middleware, the proxy and
the OTLP receiver. A caller is known by the credential it sends (the vLLM `--api-key` value,
a proxy client token, an OTLP bearer token); the map names it and gives its default dims
and the values it may claim. Each dim has a policy:

  operator  the caller's value is ignored: the map's (or the server's) default stands
  allowed   the caller may choose within its allowed set (its default is always allowed)
  free      the caller decides (descriptive dims: feature, step, conversation_id, ...)

business_line and team are `operator` unless the map says otherwise; other dims are free.
Dims under `costplatform.` (the record kind), `source`, `caller` and `refused.` are never the
caller's. The platform sets `caller` itself: the name of the map's caller (`[callers.<name>]`)
that sent the request, absent for the default caller (no token or an unknown one), so the
rollups and the caller budgets (docs/budgets.md) know who called. A claim that is not obeyed is counted in
costplatform_serving_attribution_refused_total{dim} and kept on the record as
`refused.<dim>` (outside settings.ROLLUP_DIMS, so it reaches no rollup).

A record keeps at most 32 dims (wire.contract.MAX_DIMS). The trusted ones are set first and always
kept: the server's own, the map's for the caller, `caller`; a claim that would add a dim past the
cap is refused (counted under dim="cap"), so thirty free claims never push `caller` or the line
out of a record or out of the budget check.

The map is TOML, re-read when its file changes (checked at most once a second); a broken
edit keeps the last good map and logs why. See README "Writing an attribution map".
Pure Python: no Django, no vLLM.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import Counter

from wire.contract import MAX_DIMS, RECONCILIATION_DIM
from wire.record import clean_dims, valid_dim_key

log = logging.getLogger("costplatform.attribution")

ENV_MAP = "COSTPLATFORM_ATTRIBUTION_MAP"
OPERATOR, ALLOWED, FREE = "operator", "allowed", "free"
POLICIES = (OPERATOR, ALLOWED, FREE)
SAFE_POLICY: Mapping[str, str] = {"business_line": OPERATOR, "team": OPERATOR}
RESERVED_PREFIXES = ("costplatform.", "refused.")
CALLER_DIM = "caller"
RESERVED_DIMS = frozenset({"source", CALLER_DIM})
REFUSED_PREFIX = "refused."
CAP_LABEL = "cap"  # the counter's label of claims refused because the record's dims were full
_NAMED_RESERVED = frozenset({"source", CALLER_DIM, RECONCILIATION_DIM})  # reserved dims with a label of their own
RELOAD_INTERVAL = 1.0

REFUSED = Counter(
    "costplatform_serving_attribution_refused",
    "Attribution claims not obeyed (outside the caller's allowed set, or not the caller's to make)",
    ["dim"],
)


class MapError(ValueError):
    """The attribution map file is not valid; the message says where."""


def reserved(dim: str) -> bool:
    return dim in RESERVED_DIMS or dim.startswith(RESERVED_PREFIXES)


@dataclass(frozen=True)
class Caller:
    """One caller of the map: its name, default dims, allowed values and policy overrides."""

    name: str
    dims: Mapping[str, str] = field(default_factory=dict)
    allowed: Mapping[str, frozenset[str]] = field(default_factory=dict)
    policy: Mapping[str, str] = field(default_factory=dict)


ANONYMOUS = Caller(name="")


@dataclass(frozen=True)
class AttributionMap:
    policy: Mapping[str, str] = field(default_factory=dict)
    callers: Mapping[str, Caller] = field(default_factory=dict)  # by SHA-256 hex of the token
    default: Caller = ANONYMOUS

    def caller(self, token: str | None) -> Caller | None:
        """The caller a token names; None for a missing or unknown token."""
        if not token:
            return None
        return self.callers.get(token_sha256(token))

    def policy_of(self, caller: Caller, dim: str) -> str:
        return caller.policy.get(dim) or self.policy.get(dim) or SAFE_POLICY.get(dim, FREE)


EMPTY = AttributionMap()


@dataclass(frozen=True)
class Decision:
    """The trusted dims of a request (the platform's `caller` among them when the caller is
    known) and the claims that were not obeyed."""

    caller: str
    dims: dict[str, str]
    refused: dict[str, str]

    def record_dims(self) -> dict[str, str]:
        """The record's dims: the decided ones first, then each refused claim while the 32 last."""
        return clean_dims(self.dims | {REFUSED_PREFIX + k: v for k, v in self.refused.items()})


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def bearer(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def decide(
    claims: Mapping[str, str],
    *,
    amap: AttributionMap,
    caller: Caller | None,
    defaults: Mapping[str, str],
) -> Decision:
    """Apply the policy. The trusted dims first: the server's defaults, the caller's defaults and
    the platform's `caller` dim (the caller's name; none for the default caller). Then the claims
    the caller may make, while the record has room for a new dim (MAX_DIMS)."""
    who = caller or amap.default
    dims = {**defaults, **who.dims}
    dims.pop(CALLER_DIM, None)  # only ever the map's name of who sent the request
    if who.name:
        dims[CALLER_DIM] = who.name
    refused: dict[str, str] = {}
    for dim, value in claims.items():
        if dims.get(dim) == value:
            continue
        if not _obeyed(amap, who, dim, value):
            label = _label(amap, who, dim)
        elif dim in dims:  # a trusted dim the caller may set: it keeps its place
            dims[dim] = value
            continue
        elif not valid_dim_key(dim):  # a name the record refuses takes no place in it
            label = "other"
        elif len(dims) >= MAX_DIMS:
            label = CAP_LABEL
        else:
            dims[dim] = value
            continue
        refused[dim] = value
        REFUSED.labels(label).inc()
    return Decision(caller=who.name, dims=dims, refused=refused)


def _obeyed(amap: AttributionMap, caller: Caller, dim: str, value: str) -> bool:
    if reserved(dim):
        return False
    policy = amap.policy_of(caller, dim)
    if policy == FREE:
        return True
    return policy == ALLOWED and value in caller.allowed.get(dim, frozenset())


def _label(amap: AttributionMap, caller: Caller, dim: str) -> str:
    """The counter's label: dims the operator named, else a bucket (callers choose dim names)."""
    if dim in SAFE_POLICY or dim in amap.policy or dim in caller.policy or dim in _NAMED_RESERVED:
        return dim
    return "reserved" if reserved(dim) else "other"


# --- reading the map --------------------------------------------------------------------------

_CALLER_KEYS = {"tokens", "token_sha256", "dims", "allowed", "policy"}
_TOP_KEYS = {"policy", "default", "callers"}


def parse(text: str) -> AttributionMap:
    """An AttributionMap from TOML; raises MapError naming what is wrong."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MapError(f"not TOML: {exc}") from exc
    _only(data, _TOP_KEYS, "the map")
    policy = _policy(data.get("policy", {}), "[policy]")
    callers: dict[str, Caller] = {}
    for name, table in _table(data.get("callers", {}), "[callers]").items():
        caller = _caller(name, table, f"[callers.{name}]")
        tokens = _strings(table.get("tokens", []), f"[callers.{name}].tokens")
        digests = [token_sha256(t) for t in tokens] + [
            _digest(d, f"[callers.{name}].token_sha256") for d in _strings(table.get("token_sha256", []), name)
        ]
        if not digests:
            raise MapError(f"[callers.{name}]: no tokens or token_sha256")
        for digest in digests:
            if digest in callers:
                raise MapError(f"[callers.{name}]: a token of {callers[digest].name!r} too")
            callers[digest] = caller
    default_table = _table(data.get("default", {}), "[default]")
    if {"tokens", "token_sha256"} & default_table.keys():
        raise MapError("[default]: the default caller has no tokens (it is who sends none, or an unknown one)")
    return AttributionMap(policy=policy, callers=callers, default=_caller("", default_table, "[default]"))


def _caller(name: str, table: Mapping[str, Any], where: str) -> Caller:
    _only(table, _CALLER_KEYS, where)
    dims = {str(k): _scalar(v, f"{where}.dims.{k}") for k, v in _table(table.get("dims", {}), where).items()}
    for dim in dims:
        if reserved(dim):
            raise MapError(f"{where}.dims: {dim!r} is set by the platform, not by the map")
    allowed = {
        str(k): frozenset(_strings(v, f"{where}.allowed.{k}"))
        for k, v in _table(table.get("allowed", {}), where).items()
    }
    # A caller may always claim its own default.
    for dim, value in dims.items():
        allowed[dim] = allowed.get(dim, frozenset()) | {value}
    return Caller(name=name, dims=dims, allowed=allowed, policy=_policy(table.get("policy", {}), f"{where}.policy"))


def _policy(table: Any, where: str) -> dict[str, str]:
    policy = {str(k): str(v) for k, v in _table(table, where).items()}
    for dim, value in policy.items():
        if value not in POLICIES:
            raise MapError(f"{where}.{dim}: {value!r} is not one of {', '.join(POLICIES)}")
        if reserved(dim):
            raise MapError(f"{where}.{dim}: {dim!r} is never the caller's to set")
    return policy


def _table(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MapError(f"{where}: expected a table")
    return value


def _only(table: Mapping[str, Any], keys: set[str], where: str) -> None:
    unknown = sorted(set(table) - keys)
    if unknown:
        raise MapError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(keys))})")


def _strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise MapError(f"{where}: expected a list of non-empty strings")
    return value


def _scalar(value: Any, where: str) -> str:
    if not isinstance(value, str | int | float | bool):
        raise MapError(f"{where}: expected a string")
    return str(value)


def _digest(value: str, where: str) -> str:
    digest = value.strip().lower()
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise MapError(f"{where}: {value!r} is not a SHA-256 in hex (64 characters)")
    return digest


class MapFile:
    """An attribution map file, re-read when it changes. `current()` is cheap: it looks at
    the file at most every `interval` seconds, and a broken edit keeps the last good map."""

    def __init__(self, path: Path | str, *, interval: float = RELOAD_INTERVAL) -> None:
        self.path = Path(path)
        self.interval = interval
        self._lock = threading.Lock()
        self._stamp = self._stat()
        self._map = parse(self.path.read_text())  # a broken map at start-up is fatal
        self._checked = time.monotonic()

    def _stat(self) -> tuple[int, int, int]:
        st = os.stat(self.path)
        return st.st_mtime_ns, st.st_size, st.st_ino

    def current(self) -> AttributionMap:
        now = time.monotonic()
        if now - self._checked < self.interval:
            return self._map
        with self._lock:
            if now - self._checked >= self.interval:
                self._checked = now
                self._reload()
        return self._map

    def _reload(self) -> None:
        try:
            stamp = self._stat()
            if stamp == self._stamp:
                return
            self._map = parse(self.path.read_text())
            self._stamp = stamp
            log.info("attribution map %s reloaded", self.path)
        except (OSError, MapError, UnicodeDecodeError) as exc:
            log.error("attribution map %s not reloaded, the last good one stays: %s", self.path, exc)


class Policy:
    """The map of an edge (a MapFile, or none: the safe defaults) and its server defaults."""

    def __init__(
        self, path: Path | str | None, defaults: Mapping[str, str] | None = None, *, interval: float = RELOAD_INTERVAL
    ) -> None:
        self.file = MapFile(path, interval=interval) if path else None
        self.defaults = dict(defaults or {})

    def current(self) -> AttributionMap:
        return self.file.current() if self.file is not None else EMPTY

    def authenticate(self, authorization: str | None) -> Caller | None:
        """The caller named by an Authorization header; None when missing or unknown."""
        return self.current().caller(bearer(authorization))

    def decide(self, claims: Mapping[str, str], authorization: str | None) -> Decision:
        amap = self.current()
        return decide(claims, amap=amap, caller=amap.caller(bearer(authorization)), defaults=self.defaults)
