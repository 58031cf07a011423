"""The business lines the platform knows, to check a person's scope against.

Accounts is the lowest app and names no other: the apps holding lines (ingest's dim sets, the
ledger's cost centres and budgets) register a reader of theirs here (`lines_source`) in their
AppConfig.ready. A scope naming a line none of them knows is a typo until someone confirms it
("serach" would show its user empty pages)."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

_SOURCES: list[Callable[[], Iterable[str]]] = []


def lines_source(read: Callable[[], Iterable[str]]) -> Callable[[], Iterable[str]]:
    """Register `read`, which returns business lines an app holds."""
    if read not in _SOURCES:
        _SOURCES.append(read)
    return read


def business_lines_known() -> set[str]:
    """Every business line some app holds, and those collector keys are limited to."""
    from apps.accounts.models import CollectorKey

    known = {line for read in _SOURCES for line in read()}
    for lines in CollectorKey.objects.values_list("business_lines", flat=True):
        known.update(lines)
    known.discard("")
    return known


@dataclass(frozen=True)
class UnknownLine:
    name: str
    near: list[str]  # known lines spelled alike, the likely meaning of a typo

    def __str__(self) -> str:
        return f"{self.name!r} (did you mean {' or '.join(map(repr, self.near))}?)" if self.near else repr(self.name)


def business_lines_unknown(lines: Iterable[str]) -> list[UnknownLine]:
    """The lines of `lines` the platform does not know, each with the known ones spelled alike."""
    known = business_lines_known()
    return [
        UnknownLine(line, difflib.get_close_matches(line, sorted(known), n=2, cutoff=0.6))
        for line in dict.fromkeys(lines)
        if line not in known
    ]
