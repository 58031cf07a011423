"""Plain functions that build test data through the real services."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from apps.accounts.services import NewCollectorKey, collector_key_create

_ids = itertools.count(1)


def collector_key(name: str | None = None, **limits: Any) -> NewCollectorKey:
    """A key with the product's default limits, unless `limits` (business_lines,
    reconciliation, backdate_days, backfill) say otherwise."""
    return collector_key_create(name=name or f"source-{next(_ids)}", **limits)


def record(**overrides: Any) -> dict[str, Any]:
    """A valid token record v1 (as JSON-ready dict); nested keys via dotted names."""
    data: dict[str, Any] = {
        "record_id": f"chatcmpl-{next(_ids):08d}",
        "ts": (datetime.now(UTC) - timedelta(minutes=5)).isoformat(),
        "model": "qwen2.5-7b-instruct",
        "model_version": "awq-int4",
        "endpoint": "chat.completions",
        "dims": {"business_line": "customer-service", "team": "cs-bot", "feature": "faq", "env": "prod"},
        "tokens": {"prompt": 1200, "prompt_cached": 512, "completion": 180, "system": 400, "tool": 300},
        "outcome": {"status": "ok", "finish_reason": "stop"},
        "timing": {"queued": 3, "ttft": 120, "prefill": 90, "decode": 800, "e2e": 930},
        "prompt_hash": "9f86d081884c7d659a2feaa0c55ad015",
    }
    for dotted, value in overrides.items():
        *parents, leaf = dotted.split(".")
        target = data
        for part in parents:
            target = target.setdefault(part, {})
        if value is _DELETE:
            target.pop(leaf, None)
        else:
            target[leaf] = value
    return data


_DELETE = object()
DELETE = _DELETE


def hourly_class(
    *,
    hour: datetime,
    tokens: int,
    component: str = "uncached_prompt",
    model: str = "qwen2.5-7b-instruct",
    reason: str = "effective.input",
    source: str = "vllm-test",
    dims: dict[str, str] | None = None,
    ruleset: Any = None,
) -> Any:
    """An HourlyClass row as classification writes it at ingest (under the active rule set,
    unless `ruleset` says another)."""
    import hashlib
    import json

    from apps.accounts.models import CollectorKey
    from apps.classification.engine import COMPONENTS
    from apps.classification.models import HourlyClass
    from apps.ingest.models import DimSet, ServedModel

    key = CollectorKey.objects.filter(name=source).first()
    if key is None:
        collector_key(source)
        key = CollectorKey.objects.get(name=source)
    dims = {"business_line": "customer-service"} if dims is None else dims
    digest = hashlib.md5(json.dumps(dims, sort_keys=True).encode()).digest()
    dimset, _ = DimSet.objects.get_or_create(digest=digest, defaults={"dims": dims})
    return HourlyClass.objects.create(
        hour=hour,
        source=key,
        model=ServedModel.objects.get_or_create(name=model, version="")[0],
        dims=dimset,
        ruleset=ruleset or active_ruleset(),
        reason=reason_row(reason),
        component=COMPONENTS.index(component),
        tokens=tokens,
    )


def price_version(
    *, effective_from: datetime, prices: dict[str, tuple[str, str, str]], currency: str = "CNY", name: str = ""
) -> Any:
    """A price version through the service: prices[pattern] = (input, cached_input, output) per million."""
    from decimal import Decimal

    from apps.pricing.services import price_version_create

    return price_version_create(
        effective_from=effective_from,
        currency=currency,
        name=name,
        prices={
            pattern: {"input": Decimal(i), "cached_input": Decimal(c), "output": Decimal(o)}
            for pattern, (i, c, o) in prices.items()
        },
    )


def cost_pool(**overrides: Any) -> Any:
    """A cost pool through the service: 2 GPUs at 10.00 CNY an hour serving qwen2.5-* from 2025-03-01."""
    from decimal import Decimal

    from apps.pricing.services import cost_pool_create

    fields: dict[str, Any] = {
        "name": f"pool-{next(_ids)}",
        "gpus": 2,
        "cost_per_gpu_hour": Decimal("10.00"),
        "model_patterns": ["qwen2.5-*"],
        "capacity": 1_000_000,
        "w_uncached_prompt": Decimal(1),
        "w_cached_prompt": Decimal("0.1"),
        "w_output": Decimal(4),
        "effective_from": datetime(2025, 3, 1, tzinfo=UTC),
    }
    return cost_pool_create(**(fields | overrides))


# --- ledger ---------------------------------------------------------------------------------


def dimset(dims: dict[str, str]) -> Any:
    """A rollup DimSet as ingest stores it (business_line column filled from the dims), with the
    digest `hourly_class` uses, so hourly_class(dims=...) finds it."""
    import hashlib
    import json

    from apps.ingest.models import DimSet

    digest = hashlib.md5(json.dumps(dims, sort_keys=True).encode()).digest()
    found, _ = DimSet.objects.get_or_create(
        digest=digest, defaults={"dims": dims, "business_line": dims.get("business_line", "")}
    )
    return found


def hourly_cost(
    *,
    hour: datetime,
    cost: Any,
    tokens: int = 1000,
    model: str = "qwen2.5-7b-instruct",
    reason: str = "effective.input",
    component: str = "uncached_prompt",
    dims: dict[str, str] | None = None,
    currency: str = "CNY",
    source: str = "vllm-test",
) -> Any:
    """A priced hourly row written directly (as pricing writes it), under a price version of
    the row's currency that starts at 2020-01-01."""
    from decimal import Decimal

    from apps.accounts.models import CollectorKey
    from apps.classification.engine import COMPONENTS
    from apps.ingest.models import ServedModel
    from apps.pricing.models import HourlyCost, PriceVersion

    key = CollectorKey.objects.filter(name=source).first()
    if key is None:
        collector_key(source)
        key = CollectorKey.objects.get(name=source)
    start = datetime(2020, 1, 1, tzinfo=UTC) + timedelta(hours={"CNY": 0, "USD": 1}[currency])
    version = PriceVersion.objects.filter(effective_from=start).first() or price_version(
        effective_from=start, prices={}, currency=currency
    )
    return HourlyCost.objects.create(
        hour=hour,
        source=key,
        model=ServedModel.objects.get_or_create(name=model, version="")[0],
        dims=dimset({"business_line": "customer-service"} if dims is None else dims),
        reason=reason_row(reason),
        component=COMPONENTS.index(component),
        tokens=tokens,
        cost=Decimal(cost),
        currency=currency,
        price_version=version,
    )


def finance_user(username: str = "fin", role: str = "finance") -> Any:
    """A user in one role group (admin, finance, engineer, viewer)."""
    from django.contrib.auth.models import Group, User

    user = User.objects.create_user(username, password="pw-for-tests-only")
    user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


def reason_row(name: str) -> Any:
    """The Reason of a class.reason. Tests that commit are followed by a flush that also empties
    the rows the migrations seeded, so the built-ins are made again when missing."""
    from apps.classification.services import builtins_ensure, reason_ensure

    builtins_ensure()
    return reason_ensure(name=name)


def active_ruleset() -> Any:
    from apps.classification.services import active_ruleset as active

    return active()


# --- alerts ---------------------------------------------------------------------------------


def channel(kind: str = "webhook", **overrides: Any) -> Any:
    """An alert channel; names are unique per call."""
    from apps.alerts.models import Channel

    fields: dict[str, Any] = {"name": f"{kind}-{next(_ids)}", "kind": kind, "language": "en", "min_severity": 10}
    return Channel.objects.create(**(fields | overrides))


def alert_rule(detector: str, **overrides: Any) -> Any:
    from apps.alerts.models import Rule

    fields: dict[str, Any] = {"name": f"{detector}-{next(_ids)}", "detector": detector}
    return Rule.objects.create(**(fields | overrides))
