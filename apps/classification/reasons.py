"""What each built-in reason means and what reduces it (from docs/classification.md), shown
beside the reason on the waste pages. A custom reason is explained by its rule (the rules page)."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from apps.classification.engine import BUILTIN_RULES


@dataclass(frozen=True)
class Explained:
    why: Promise | str
    reduce: Promise | str


REASONS: dict[str, Explained] = {
    "effective.input": Explained(
        _("Prompt tokens of a request that succeeded."), _("Shorter prompts and system prompts; cache shared prefixes.")
    ),
    "effective.structural": Explained(
        _("Structural output (tool calls, JSON scaffolding) of a request that succeeded."),
        _("Leaner schemas and tool definitions."),
    ),
    "effective.output": Explained(
        _("Output of a request that succeeded."), _("Ask for shorter answers (max_tokens, stop sequences).")
    ),
    "effective.reasoning": Explained(
        _("Reasoning (thinking) tokens of a request that succeeded: the part of its completion before the answer."),
        _("Lower the reasoning effort or budget where the task is simple; route easy requests to a model without it."),
    ),
    "effective.cache_write": Explained(
        _(
            "Prompt tokens of a request that succeeded that the provider wrote into its prompt cache: computed, "
            "and priced at the cache-write price where the price book sets one."
        ),
        _("Write a prefix to the cache only when it will be read again; keep cached prefixes stable."),
    ),
    "waste.reasoning_overspend": Explained(
        _("Reasoning of a request that thought more than N times its answer (N set in the rule that names it)."),
        _("Cap the reasoning budget for this feature; ask a model without reasoning; check the prompt is clear."),
    ),
    "cache.prefix_cache": Explained(
        _("Prompt tokens served from the prefix cache, whatever the outcome."),
        _("Good: keep shared prefixes stable (system prompt first, variable parts last)."),
    ),
    "waste.error": Explained(
        _("Prompt and output of a request that ended in an error."),
        _("Look at the failing feature's errors; fail fast before the model is called."),
    ),
    "waste.timeout": Explained(
        _("Prompt and output of a request that timed out."),
        _("Raise the client timeout or cap max_tokens; check queueing on the server."),
    ),
    "waste.aborted": Explained(
        _("Prompt and output of a request the client aborted."),
        _("Stop cancelling and re-sending; stream and stop early only when the answer is complete."),
    ),
    "waste.rejected": Explained(
        _("Prompt of a request the server rejected."), _("Check limits (context length, rate) before sending.")
    ),
    "waste.duplicate": Explained(
        _("A successful request repeating the same prompt to the same model for the same line within five minutes."),
        _("Cache answers of repeated prompts; deduplicate retries and double submits."),
    ),
    "waste.truncated": Explained(
        _("Output of a request cut off at max_tokens (finish reason length)."),
        _("Raise max_tokens or ask for shorter output; a cut answer is usually asked again."),
    ),
    "waste.padding": Explained(
        _("Padding tokens the server added to batch requests."),
        _("Batch requests of similar length; check the server's padding settings."),
    ),
    "shadow.spec_rejected": Explained(
        _("Draft tokens of speculative decoding that the model rejected."),
        _("Tune the draft model or the number of speculative tokens."),
    ),
    "shadow.recompute": Explained(
        _("Tokens computed again after a preemption."), _("Give the server more KV cache memory or lower concurrency.")
    ),
    "shadow.unattributed": Explained(
        _("Tokens the collector counted on the server but no record carried."),
        _("Make every caller send records; check the collector's gaps."),
    ),
}


def explained(name: str) -> Explained | None:
    return REASONS.get(name)


# What each built-in rule of the chain (apps.classification.engine.BUILTIN_RULES) writes.
CHAIN_REASONS: dict[str, tuple[str, ...]] = {
    "unattributed": ("shadow.unattributed",),
    "prefix_cache": ("cache.prefix_cache",),
    "failed": ("waste.error", "waste.timeout", "waste.aborted", "waste.rejected"),
    "duplicate": ("waste.duplicate",),
    "truncated": ("waste.truncated",),
    "padding": ("waste.padding",),
    "spec_rejected": ("shadow.spec_rejected",),
    "recompute": ("shadow.recompute",),
}


def builtin_chain() -> list[dict[str, object]]:
    """The built-in rules in the order they apply, each with the reasons it writes and why."""
    return [
        {"name": name, "reasons": CHAIN_REASONS[name], "explained": REASONS[CHAIN_REASONS[name][0]]}
        for name in BUILTIN_RULES
    ]
