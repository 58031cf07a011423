"""Plain functions that build test data through the real services."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from apps.accounts.services import NewCollectorKey, collector_key_create

_ids = itertools.count(1)


def collector_key(name: str | None = None) -> NewCollectorKey:
    return collector_key_create(name=name or f"source-{next(_ids)}")


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
