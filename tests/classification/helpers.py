"""Storing records through ingest and reading the class rollup by names (ids differ between
transactions that were rolled back)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from typing import Any

import msgspec
from django.db import connection

from apps.classification.models import DirtyDay
from apps.classification.services import rule_add, ruleset_activate, ruleset_draft_create
from apps.ingest.contract import RecordV1
from apps.pipeline.records import records_store

Key = tuple[Any, ...]

_SNAPSHOT = """
SELECT c.hour, k.name, m.name, m.version, d.dims::text, s.version, r.name, c.component, c.tokens
FROM classification_hourlyclass c
JOIN accounts_collectorkey k ON k.id = c.source_id JOIN ingest_servedmodel m ON m.id = c.model_id
JOIN ingest_dimset d ON d.id = c.dims_id JOIN classification_ruleset s ON s.id = c.ruleset_id
JOIN classification_reason r ON r.id = c.reason_id
"""


def store(source_id: int, records: Iterable[dict[str, Any]]) -> None:
    typed = [msgspec.convert(r, RecordV1, strict=False) for r in records]
    if typed:
        records_store(source_id=source_id, records=typed)


def snapshot() -> dict[Key, int]:
    """The class rollup: (hour, source, model, version, rollup dims, rule set version, reason,
    component) -> tokens."""
    with connection.cursor() as cursor:
        cursor.execute(_SNAPSHOT)
        rows = cursor.fetchall()
    result = {tuple(row[:-1]): row[-1] for row in rows}
    assert len(result) == len(rows)
    return result


def on_days(classes: dict[Key, int], days: set[date], *, keep: bool) -> dict[Key, int]:
    return {key: n for key, n in classes.items() if (key[0].date() in days) == keep}


def dirty_days() -> set[date]:
    return set(DirtyDay.objects.values_list("day", flat=True))


def ruleset_activated(*, moves: Iterable[tuple[str, str, str]] = (), disabled: Iterable[str] = ()) -> Any:
    """A new active rule set: the active one's rules plus these (expression, components, target)
    moves and disabled built-ins."""
    draft = ruleset_draft_create()
    for i, (expression, components, target) in enumerate(moves):
        rule_add(ruleset=draft, name=f"move {i}", expression=expression, components=components, target=target)
    for name in disabled:
        rule_add(ruleset=draft, name=f"no {name}", action="disable", builtin=name)
    return ruleset_activate(ruleset=draft)
