"""The detector registry (PostHog's @register_detector idea).

A detector is a pure function from one subject's series and the rule's parameters to a
DetectionResult; its `source` (a selector) reads the series of every subject in one query.
Evaluation (apps/alerts/evaluation.py) runs both and owns the state machine; nothing here
writes or sends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class Subject:
    """What a detector judges: a business line, a model, a collector; with the page a receiver
    opens (`link`, a path), the window its figures were measured over (UTC instants), and what
    its top contributors are ranked by when it fires (a key of selectors.CONTRIBUTORS), among
    the records of its `dims` too (a team's or a caller's budget: (("team", "web"),))."""

    key: str
    business_line: str = ""
    link: str = ""
    model: str = ""
    window: tuple[datetime, datetime] | None = None
    rank_by: str = ""
    dims: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class DetectionResult:
    firing: bool
    figures: dict[str, Any] = field(default_factory=dict)
    level: str = ""  # for detectors with levels (budget: forecast < 80 < 100)
    critical: bool = False  # raises the alert to critical whatever the rule's severity


Params = dict[str, Any]


@dataclass(frozen=True)
class Detector:
    name: str
    detect: Callable[[Any, Params], DetectionResult]
    source: str  # the name of a selector in apps.alerts.selectors, read lazily (no import cycle)
    defaults: Params
    levels: tuple[str, ...] = ("",)
    events: bool = False  # each result is an event sent once (no ok/firing/resolved)

    def read(self, *, params: Params, business_line: str, now: datetime) -> Iterable[tuple[Subject, Any]]:
        from apps.alerts import selectors

        found: Iterable[tuple[Subject, Any]] = getattr(selectors, self.source)(
            params=params, business_line=business_line, now=now
        )
        return found

    def rank(self, level: str) -> int:
        return self.levels.index(level) if level in self.levels else -1


DETECTORS: dict[str, Detector] = {}


def register_detector(
    name: str, *, source: str, defaults: Params, levels: tuple[str, ...] = ("",), events: bool = False
) -> Callable[[Callable[[Any, Params], DetectionResult]], Callable[[Any, Params], DetectionResult]]:
    def register(detect: Callable[[Any, Params], DetectionResult]) -> Callable[[Any, Params], DetectionResult]:
        DETECTORS[name] = Detector(name, detect, source, defaults, levels, events)
        return detect

    return register
