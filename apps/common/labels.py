"""Human names of the keys a reader meets on the pages: the dims records carry, the fields of a
record (token counts, timings), the token components the rules classify. One mapping, so the
filters, the breakdown headers, the record page, the grouped waste page and the overview name a
key the same way in every language. A key not listed (a dim configured in
COSTPLATFORM_ROLLUP_DIMS, a dim a collector sends) is shown as it is sent: it is the reader's own
name."""

from __future__ import annotations

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

LABELS: dict[str, Promise] = {
    # dims, and what the waste page groups by
    "business_line": _("business line"),
    "team": _("team"),
    "caller": _("caller"),
    "project": _("project"),
    "feature": _("feature"),
    "step": _("step"),
    "env": _("environment"),
    "conversation_id": _("conversation"),
    "model": _("model"),
    "reason": _("reason"),
    "conversation": _("conversation"),
    # a record's token counts
    "prompt": _("prompt tokens"),
    "prompt_cached": _("cached prompt tokens"),
    "completion": _("completion tokens"),
    "system": _("system prompt tokens"),
    "tool": _("tool tokens"),
    "structural": _("structural tokens"),
    "padding": _("padding tokens"),
    "draft": _("draft tokens"),
    "draft_accepted": _("accepted draft tokens"),
    "recomputed": _("recomputed tokens"),
    "reasoning": _("reasoning tokens"),
    "prompt_cache_write": _("prompt tokens written to the cache"),
    # a record's timings (milliseconds)
    "queued": _("queued"),
    "ttft": _("time to first token"),
    "prefill": _("prefill"),
    "decode": _("decode"),
    "e2e": _("end to end"),
    # the token components the rules classify
    "cached_prompt": _("cached prompt"),
    "uncached_prompt": _("uncached prompt"),
    "output": _("output"),
    "spec_rejected": _("rejected draft"),
    "cache_write": _("cache write"),
    # what a price is per million of (a price version's kinds)
    "input": _("input"),
    "cached_input": _("cached input"),
}


def label(key: str) -> str:
    """The reader's name of a dim or field key; an unknown key as it is."""
    found = LABELS.get(key)
    return str(found) if found is not None else key


def dims_text(dims: dict[str, str]) -> str:
    """'business line = search, feature = faq' in the reader's language; '(no dims)' for none."""
    return ", ".join(f"{label(k)} = {v}" for k, v in sorted(dims.items())) or str(_("(no dims)"))
