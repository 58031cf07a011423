"""Reads of the audit: the month's money per token (its price basis), reports, CSV rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.utils.translation import pgettext, pgettext_lazy

from apps.audits.finders.base import Rates, fetch
from apps.audits.models import AuditFinding, AuditReport
from apps.classification.engine import COMPONENT_KIND
from apps.common.buckets import hour_floor, month_end, month_of, month_start
from apps.common.composed import SQL, Literal, table, text
from apps.ingest.models import HourlyUsage, ServedModel
from apps.pricing.book import PriceBook
from apps.pricing.models import HourlyCost
from apps.pricing.selectors import price_book_load

# The price kind of a cost row's component (engine.COMPONENT_KIND, by the component's index).
_KIND_OF_COMPONENT = SQL("(ARRAY[{}])[c.component + 1]").format(SQL(", ").join(map(Literal, COMPONENT_KIND)))
_RATES_SQL = text(
    SQL("""
SELECT m.name, c.currency, {kind}, sum(c.tokens)::bigint, sum(c.cost)
FROM {costs} c JOIN {models} m ON m.id = c.model_id
WHERE c.hour >= %(start)s AND c.hour < %(end)s AND c.tokens > 0
GROUP BY 1, 2, 3
""").format(kind=_KIND_OF_COMPONENT, costs=table(HourlyCost), models=table(ServedModel))
)
_TOKENS_SQL = text(
    SQL("""
SELECT coalesce(sum(u.prompt + u.completion), 0)::bigint FROM {} u
WHERE u.hour >= %(start)s AND u.hour < %(end)s
""").format(table(HourlyUsage))
)


def month_rates(*, start: datetime, end: datetime) -> Rates:
    """Money per token by model name and price kind in the month's main currency (the one with
    the most cost): what the month's priced rows cost per token, whatever priced them (a price
    version or a cost pool's allocation). What the priced rows lack comes from the price book's
    version in force mid-month, when it is in that currency."""
    rows = fetch(_RATES_SQL, {"start": start, "end": end})
    spend: dict[str, Decimal] = {}
    for _, currency, _, _, cost in rows:
        spend[currency] = spend.get(currency, Decimal(0)) + cost
    book = price_book_load()
    middle = start + (end - start) / 2
    currency = max(spend, key=lambda c: (spend[c], c)) if spend else _book_currency(book, middle)
    per_token = {(name, kind): cost / tokens for name, cur, kind, tokens, cost in rows if cur == currency}
    return Rates(currency=currency, per_token=per_token, fallback=_book_rates(book, middle, currency))


def _book_currency(book: PriceBook, at: datetime) -> str:
    version = book.version_at(at)
    return version.currency if version is not None else ""


def _book_rates(book: PriceBook, at: datetime, currency: str) -> Callable[[str], dict[str, Decimal]]:
    hour = hour_floor(at)

    def rates(model: str) -> dict[str, Decimal]:
        basis = book.basis(model, hour)
        if basis is None or basis.version is None or basis.version.currency != currency:
            return {}
        return {kind: Decimal(per_million) / 1_000_000 for kind, per_million in basis.prices.items()}

    return rates


def month_tokens(*, start: datetime, end: datetime) -> int:
    return int(fetch(_TOKENS_SQL, {"start": start, "end": end})[0][0])


def report_for_month(*, month: Any) -> AuditReport | None:
    return AuditReport.objects.filter(month=month).first()


def report_findings(*, report: AuditReport, business_lines: list[str] | None = None) -> list[AuditFinding]:
    """The report's findings in order; only those whose `business_line` dim is in
    `business_lines` unless it is None (findings without one are outside every scope)."""
    findings = report.findings.order_by("position")
    if business_lines is not None:
        findings = findings.filter(dims__business_line__in=business_lines)
    return list(findings)


# Who reads the audit: its pages, and the links other pages give to its findings.
READERS = ("finance", "engineer", "admin")


@dataclass(frozen=True)
class Flagged:
    """The audit findings on the scope a page shows: of the audits of the months its window
    touches, else (none audited yet) of the latest audit before it, which `earlier` says."""

    report: AuditReport
    findings: list[AuditFinding]
    earlier: bool


def findings_on_scope(
    *, start: datetime, end: datetime, dims: dict[str, str], model: str, lines: list[str] | None, top: int = 5
) -> Flagged | None:
    """What the audit found on the dims and model a page shows (a finding of other dims or model
    is elsewhere), in the reader's business lines, in the
    report's order (biggest savings first): the waste pages and the overview flag them, so a zombie job that is all
    effective tokens is still seen where engineers look."""
    months = AuditReport.objects.filter(month__gte=month_of(start), month__lte=month_of(end - _TICK))
    report = months.order_by("-month").first()
    earlier = report is None
    if report is None:
        report = AuditReport.objects.filter(month__lt=month_of(start)).order_by("-month").first()
    if report is None:
        return None
    found = [f for f in report_findings(report=report, business_lines=lines) if _meets(f, dims, model)]
    return Flagged(report, found[:top], earlier) if found else None


_TICK = timedelta(microseconds=1)


def _meets(finding: AuditFinding, dims: dict[str, str], model: str) -> bool:
    """Whether the finding is on the page's scope: each dim the page names is the finding's with
    the same value, or one the finding does not name within the finding's own business line (a
    line-wide finding holds for that line's features)."""
    if model and finding.model and finding.model != model:
        return False
    line = finding.dims.get("business_line")
    for name, value in dims.items():
        if finding.dims.get(name, value) != value or (name not in finding.dims and dims.get("business_line") != line):
            return False
    return True


def scope_totals(*, report: AuditReport, findings: list[AuditFinding]) -> None:
    """Replace the report's company-wide totals (in memory) by those of the given findings: the
    tokens they concern and the counted savings, for a user who sees only some business lines."""
    counted = [f for f in findings if f.counted]
    report.tokens = sum(f.tokens for f in findings)
    report.savings_tokens = sum(f.savings_tokens for f in counted)
    priced = [f.savings for f in counted if f.savings is not None]
    report.savings = sum(priced, Decimal(0)) if priced or not counted else None


CSV_COLUMNS = ("kind", "title", "dims", "model", "tokens", "savings_tokens", "evidence", "suggestion", "counted")
MONEY_COLUMNS = ("savings", "currency")
# The header in the reader's language: in English the keys a script reads; the kind and the dims
# stay keys in every language (what a filter names).
HEADERS = {
    name: pgettext_lazy("audit csv", name) for name in (*CSV_COLUMNS, *MONEY_COLUMNS)
}  # fmt: skip


def report_csv_rows(
    *, report: AuditReport, with_money: bool, business_lines: list[str] | None = None
) -> tuple[tuple[str, ...], list[list[Any]]]:
    """The header and rows of the report's CSV; money columns only `with_money`; findings of
    `business_lines` only unless it is None."""
    columns = (*CSV_COLUMNS, *MONEY_COLUMNS) if with_money else CSV_COLUMNS
    rows = []
    for f in report_findings(report=report, business_lines=business_lines):
        row: list[Any] = [f.kind, f.title_shown, f.dims_label, f.model, f.tokens, f.savings_tokens, f.evidence]
        row += [f.suggestion_shown, pgettext("audit csv", "yes") if f.counted else pgettext("audit csv", "no")]
        if with_money:
            row += ["" if f.savings is None else f"{f.savings:.2f}", report.currency]
        rows.append(row)
    return tuple(str(HEADERS[c]) for c in columns), rows


def month_bounds(month: Any) -> tuple[datetime, datetime]:
    """A month's instants in the accounting zone."""
    return month_start(month), month_end(month)
