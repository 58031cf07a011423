"""How a record's tokens are split into classes: the token components, the built-in rule
chain, and custom rules that move components to another class.reason.

Every record's processed tokens are cut into nine components, and each component lands in
exactly one class.reason, so the classes always sum to the processed total:

    cached_prompt + uncached_prompt + structural + output + padding + spec_rejected + recomputed + reasoning
    + cache_write = prompt + completion + padding + recomputed + (draft - draft_accepted)

(reasoning and structural are parts of completion; output is the rest of it; cached_prompt and
cache_write are parts of prompt, uncached_prompt the rest of it). Components are numbered in this
order and stored by number, so a new one is only ever appended.

Pure Python: the same decisions are compiled to SQL in sql.py for set-based reclassification.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from apps.ingest.contract import RECONCILIATION_DIM, RECONCILIATION_VALUE

COMPONENTS = (
    "cached_prompt",
    "uncached_prompt",
    "structural",
    "output",
    "padding",
    "spec_rejected",
    "recomputed",
    "reasoning",
    "cache_write",
)
CACHED, UNCACHED, STRUCTURAL, OUTPUT, PADDING, SPEC_REJECTED, RECOMPUTED, REASONING, CACHE_WRITE = range(
    len(COMPONENTS)
)
# Names a rule may use for several components at once.
COMPONENT_GROUPS = {
    "prompt": (CACHED, UNCACHED, CACHE_WRITE),
    "completion": (STRUCTURAL, OUTPUT, REASONING),
    "all": tuple(range(len(COMPONENTS))),
}
# The price kind of each component: rejected drafts, padding and recompute are priced as input;
# reasoning as output, unless the price book has a reasoning price. Prompt-cache writes are their
# own kind, cache_write, priced as input where the book has no cache-write price
# (pricing.book.component_price).
COMPONENT_KIND = ("cached_input", "input", "output", "output", "input", "input", "input", "output", "cache_write")

CLASSES = ("effective", "waste", "cache", "shadow")

# Built-in reasons with fixed ids (custom reasons get ids from 100 up, see models.Reason).
BUILTIN_REASONS: dict[int, str] = {
    1: "cache.prefix_cache",
    2: "effective.input",
    3: "effective.structural",
    4: "effective.output",
    5: "waste.error",
    6: "waste.timeout",
    7: "waste.aborted",
    8: "waste.rejected",
    9: "waste.duplicate",
    10: "waste.truncated",
    11: "waste.padding",
    12: "shadow.spec_rejected",
    13: "shadow.recompute",
    14: "shadow.unattributed",
    15: "effective.reasoning",
    16: "waste.reasoning_overspend",  # no built-in rule: a move rule names it, with its own N
    17: "effective.cache_write",
}
REASON_IDS = {name: pk for pk, name in BUILTIN_REASONS.items()}
CACHE_PREFIX, EFF_INPUT, EFF_STRUCTURAL, EFF_OUTPUT = 1, 2, 3, 4
WASTE_BY_STATUS = {"error": 5, "timeout": 6, "aborted": 7, "rejected": 8}
WASTE_DUPLICATE, WASTE_TRUNCATED, WASTE_PADDING = 9, 10, 11
SHADOW_SPEC, SHADOW_RECOMPUTE, SHADOW_UNATTRIBUTED = 12, 13, 14
EFF_REASONING, WASTE_REASONING_OVERSPEND = 15, 16
EFF_CACHE_WRITE = 17
FIRST_CUSTOM_REASON = 100

# Built-in rules, in the order they apply; each can be turned off by a rule set.
BUILTIN_RULES = (
    "unattributed",  # reconciliation records from collectors: everything to shadow.unattributed
    "prefix_cache",  # cached prompt tokens to cache.prefix_cache, whatever the status
    "failed",  # status != ok: uncached prompt and completion to waste.<status>
    "duplicate",  # an ok repeat within the window: uncached prompt and completion to waste.duplicate
    "truncated",  # finish_reason = length: completion to waste.truncated
    "padding",  # padding to waste.padding
    "spec_rejected",  # draft - draft_accepted to shadow.spec_rejected
    "recompute",  # recomputed to shadow.recompute
)
DUPLICATE_WINDOW_SECONDS = 300

Reasons = tuple[int, int, int, int, int, int, int, int, int]


def component_tokens(tokens: Any) -> tuple[int, int, int, int, int, int, int, int, int]:
    """The nine components of a record's `tokens` (a Tokens struct or any object alike)."""
    return (
        tokens.prompt_cached,
        tokens.prompt - tokens.prompt_cached - tokens.prompt_cache_write,
        tokens.structural,
        tokens.completion - tokens.structural - tokens.reasoning,
        tokens.padding,
        tokens.draft - tokens.draft_accepted,
        tokens.recomputed,
        tokens.reasoning,
        tokens.prompt_cache_write,
    )


def builtin_reasons(
    *, status: str, finish_reason: str | None, duplicate: bool, reconciliation: bool, disabled: frozenset[str]
) -> Reasons:
    """The reason of each component under the built-in rules (the ones not disabled).

    A disabled rule no longer claims its components: they follow the rest of the chain, and
    what no rule claims is effective (prompt-side components follow the uncached prompt,
    rejected drafts follow the output). Reasoning is decided with the rest of the completion:
    wasted with it when it is wasted, else `effective.reasoning`. Prompt-cache writes are
    computed prompt, decided with the uncached prompt: wasted with it, else `effective.cache_write`.
    """
    if reconciliation and "unattributed" not in disabled:
        return (SHADOW_UNATTRIBUTED,) * len(COMPONENTS)  # type: ignore[return-value]
    if status != "ok" and "failed" not in disabled:
        prompt = structural = output = reasoning = WASTE_BY_STATUS[status]
    elif duplicate and status == "ok" and "duplicate" not in disabled:
        prompt = structural = output = reasoning = WASTE_DUPLICATE
    elif finish_reason == "length" and status == "ok" and "truncated" not in disabled:
        prompt, structural, output, reasoning = EFF_INPUT, WASTE_TRUNCATED, WASTE_TRUNCATED, WASTE_TRUNCATED
    else:
        prompt, structural, output, reasoning = EFF_INPUT, EFF_STRUCTURAL, EFF_OUTPUT, EFF_REASONING
    return (
        CACHE_PREFIX if "prefix_cache" not in disabled else prompt,
        prompt,
        structural,
        output,
        WASTE_PADDING if "padding" not in disabled else prompt,
        SHADOW_SPEC if "spec_rejected" not in disabled else output,
        SHADOW_RECOMPUTE if "recompute" not in disabled else prompt,
        reasoning,
        EFF_CACHE_WRITE if prompt == EFF_INPUT else prompt,
    )


@lru_cache(maxsize=1024)
def _builtin_reasons(
    status: str, finish_reason: str | None, duplicate: bool, reconciliation: bool, disabled: frozenset[str]
) -> Reasons:
    """builtin_reasons, decided once per combination: a batch has a few dozen of them."""
    return builtin_reasons(
        status=status,
        finish_reason=finish_reason,
        duplicate=duplicate,
        reconciliation=reconciliation,
        disabled=disabled,
    )


@dataclass(frozen=True)
class Move:
    """A custom rule: when `matches(record)`, these components go to `reason_id`."""

    name: str
    matches: Callable[[Any], bool]
    components: tuple[int, ...]
    reason_id: int


@dataclass(frozen=True)
class Classifier:
    """A rule set ready to classify records: built-ins (minus disabled ones), then moves in
    order, a later move overriding an earlier one for the same component."""

    ruleset_id: int
    disabled: frozenset[str] = frozenset()
    moves: tuple[Move, ...] = field(default=())

    def classify(self, record: Any, *, duplicate: bool) -> Reasons:
        outcome = record.outcome
        reconciliation = record.dims.get(RECONCILIATION_DIM) == RECONCILIATION_VALUE
        reasons = _builtin_reasons(outcome.status, outcome.finish_reason, duplicate, reconciliation, self.disabled)
        if not self.moves:
            return reasons
        result = list(reasons)
        for move in self.moves:
            if move.matches(record):
                for component in move.components:
                    result[component] = move.reason_id
        return tuple(result)  # type: ignore[return-value]
