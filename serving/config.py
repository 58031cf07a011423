"""Settings of the instrumentation, read from the environment the launcher prepares.

vLLM builds the middleware and the stat logger itself, with no arguments of ours, so
`python -m serving` hands its options down as environment variables (each also works
when vLLM is started by hand).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

from wire import budgets
from wire.attribution import ENV_MAP
from wire.keys import ENV_COLLECTOR_KEY, hash_key, secret

ENV_URL = "COSTPLATFORM_URL"
ENV_KEY = ENV_COLLECTOR_KEY

ENV_SPOOL = "COSTPLATFORM_SPOOL"
ENV_SOURCE = "COSTPLATFORM_SOURCE"
ENV_DIMS = "COSTPLATFORM_DIMS"
ENV_MODEL_VERSION = "COSTPLATFORM_MODEL_VERSION"
ENV_CACHE_SALT = "COSTPLATFORM_CACHE_SALT_DIM"
ENV_TOKENIZER = "COSTPLATFORM_TOKENIZER"
ENV_SEGMENTS = "COSTPLATFORM_SEGMENTS"
ENV_STATS_WAIT = "COSTPLATFORM_STATS_WAIT"
ENV_ATTRIBUTION_MAP = ENV_MAP


def parse_dims(text: str | None) -> dict[str, str]:
    """`business_line=search,env=prod` -> {"business_line": "search", "env": "prod"}."""
    dims: dict[str, str] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{ENV_DIMS}: expected key=value, got {part!r}")
        dims[key.strip()] = value.strip()
    return dims


@dataclass(frozen=True)
class ServingConfig:
    platform_url: str
    collector_key: str
    spool_dir: Path
    source: str = field(default_factory=socket.gethostname)
    dims: dict[str, str] = field(default_factory=dict)
    hash_key: bytes = b""
    model_version: str | None = None
    cache_salt_dim: str | None = None
    tokenizer: str | None = None
    segments: bool = True
    stats_wait: float = 2.0
    attribution_map: Path | None = None  # none: the safe defaults (business_line, team from `dims` only)
    budget_poll: float = 0.0  # seconds between polls of the budget state; 0: hard budgets not held here
    budget_fail_closed: bool = False
    budget_stale: float | None = None
    budget_reserve: str | None = None  # Redis URL of the deployment's reservations (wire/reservations.py)
    budget_max_tokens: int = budgets.DEFAULT_MAX_TOKENS  # reserved for a request that sets no max_tokens
    budget_hold: float | None = None  # seconds a settled use stays reserved (default: budgets.default_hold)
    budget_ttl: float = budgets.DEFAULT_TTL  # seconds an unsettled reservation lives

    @classmethod
    def from_env(cls) -> ServingConfig | None:
        """None when the platform is not configured: the instrumentation then stays inert."""
        url, key = os.environ.get(ENV_URL), secret(ENV_KEY)
        if not url or not key:
            return None
        spool = Path(os.environ.get(ENV_SPOOL) or Path.home() / ".cache" / "costplatform" / "spool")
        poll, fail, stale = (os.environ.get(n) for n in (budgets.ENV_POLL, budgets.ENV_FAIL, budgets.ENV_STALE))
        numbers = {n: os.environ.get(n) for n in (budgets.ENV_MAX_TOKENS, budgets.ENV_HOLD, budgets.ENV_TTL)}
        problem = budgets.config_error(poll, fail, **numbers)
        if problem:
            raise ValueError(problem)
        max_tokens, hold, ttl = numbers.values()
        return cls(
            platform_url=url.rstrip("/"),
            collector_key=key,
            spool_dir=spool,
            source=os.environ.get(ENV_SOURCE) or socket.gethostname(),
            dims=parse_dims(os.environ.get(ENV_DIMS)),
            hash_key=hash_key(spool),
            model_version=os.environ.get(ENV_MODEL_VERSION) or None,
            cache_salt_dim=os.environ.get(ENV_CACHE_SALT) or None,
            tokenizer=os.environ.get(ENV_TOKENIZER) or None,
            segments=os.environ.get(ENV_SEGMENTS, "1") not in ("0", "false", "no", "off"),
            stats_wait=float(os.environ.get(ENV_STATS_WAIT) or 2.0),
            attribution_map=Path(os.environ[ENV_ATTRIBUTION_MAP]) if os.environ.get(ENV_ATTRIBUTION_MAP) else None,
            budget_poll=float(poll or 0),
            budget_fail_closed=fail == "closed",
            budget_stale=float(stale) if stale else None,
            budget_reserve=os.environ.get(budgets.ENV_RESERVE) or None,
            budget_max_tokens=int(float(max_tokens)) if max_tokens else budgets.DEFAULT_MAX_TOKENS,
            budget_hold=float(hold) if hold else None,
            budget_ttl=float(ttl) if ttl else budgets.DEFAULT_TTL,
        )
