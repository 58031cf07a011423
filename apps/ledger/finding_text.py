"""A month-end finding's text in the reader's language. The checks store their message in
English with its figures in it (the close command, the audit's CSV, the API read it as it is);
the close page, its items and the audit report say it again in the active language from the
figures the finding keeps. A finding stored before a figure was kept reads as it was stored."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

from django.utils.translation import get_language, gettext_noop
from django.utils.translation import gettext as _

TEXTS = {
    "effective_share_low": gettext_noop(
        "Effective tokens were %(share)s of %(who)s's computed tokens in %(period)s (healthy: at least "
        "%(minimum)s): notify the product owner to review prompts and output formats."
    ),
    "revenue_missing": gettext_noop(
        "%(who)s spent %(elastic)s %(currency)s on elastic tokens in %(period)s but no revenue was entered for it: "
        "enter the month's revenue to check elastic spend against it."
    ),
    "elastic_over_revenue": gettext_noop(
        "Elastic token spend of %(who)s in %(period)s was %(elastic)s %(currency)s, %(ratio)s of its revenue "
        "%(revenue)s %(currency)s (limit %(limit)s): start a degradation-strategy audit."
    ),
    "structural_zero": gettext_noop(
        "%(who)s booked no structural token expense in %(months)s: nobody seems to maintain its prompt templates "
        "and output schemas (tech debt)."
    ),
    "bill_unreconciled": gettext_noop(
        "Supplier bills of %(period)s leave unexplained differences over their threshold: %(named)s. Review them "
        "on the reconciliation page and post adjusting entries."
    ),
}


def _pct(value: Any) -> str:
    return f"{Decimal(str(value)) * 100:.1f} %"  # as the stored message writes it


def finding_text(*, kind: str, business_line: str, period: date, figures: dict[str, Any], message: str) -> str:
    """`message` (English, as stored) in English; in another language the kind's text with the
    finding's figures, or `message` when the finding lacks one of them."""
    text = TEXTS.get(kind)
    if text is None or (get_language() or "en").startswith("en"):
        return message
    values = {
        **figures,
        "who": business_line or _("the company"),
        "period": f"{period:%Y-%m}",
        "months": ", ".join(figures.get("months") or []),
    }
    try:
        for key in ("share", "ratio", "minimum", "limit"):
            if key in values:
                values[key] = _pct(values[key]) if values[key] is not None else _("all")
        return _(text) % values
    except (KeyError, ValueError, ArithmeticError, TypeError):
        return message


def finding_text_of(finding: Any) -> str:
    """A month-end finding's text (ledger.Finding) in the reader's language: the close page's, the
    items page's and the month pack's."""
    return finding_text(
        kind=finding.kind,
        business_line=finding.business_line,
        period=finding.period,
        figures=finding.figures,
        message=finding.message,
    )
