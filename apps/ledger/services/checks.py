"""Month-end checks (seed 003), run at close and stored as findings for the alerts app:

- effective ratio of a business line's computed tokens below the line's threshold (the health
  thresholds table, apps/classification/health.py: 75 % by default) -> notify the product owner
  (also for the company as a whole, business line "", against the defaults);
- structural spend = 0 for LEDGER_STRUCTURAL_ZERO_MONTHS (2) months running, for a business
  line with token expense in each of them -> tech-debt warning;
- and the checks of the apps built on the books, each registered by its app
  (`month_check_register` in its AppConfig.ready): elastic spend > LEDGER_ELASTIC_REVENUE_MAX
  (3 %) of the month's revenue -> degradation audit, no revenue entered while there is elastic
  spend -> a finding asking for it (apps/plans/findings.py); a supplier's bill leaving more
  unexplained money than its threshold -> reconcile the bill (apps/reconciliation/findings.py).

The token share reads the class rollup (all classified tokens, priced or not); spend reads the
journal lines of the month's usage days.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.db.models import F, Sum

from apps.classification.health import ratios_of, threshold_table
from apps.classification.models import HourlyClass, Reason
from apps.common.buckets import month_of, next_month, previous_month
from apps.common.composed import SQL, table, text
from apps.ingest.models import DimSet
from apps.ledger import conf
from apps.ledger.models import Account, Finding, JournalLine
from apps.ledger.services.accrual import analytic_cursor, month_window


def pct(value: Decimal) -> str:
    """A share as the findings' messages write it: 0.0312 -> '3.1 %'."""
    return f"{(value * 100).quantize(Decimal('0.1'))} %"


def month_checks(*, month: date) -> list[Finding]:
    """Run the checks for `month` and store their findings (replacing the month's earlier ones;
    an unchanged finding keeps its delivery state)."""
    month = month_of(month)
    found = month_findings(month=month)
    kept = []
    for finding in found:
        existing = Finding.objects.filter(kind=finding.kind, period=month, business_line=finding.business_line).first()
        if existing is not None and existing.figures == finding.figures:
            kept.append(existing)
            continue
        if existing is not None:
            existing.delete()
        finding.save()
        kept.append(finding)
    Finding.objects.filter(period=month).exclude(pk__in=[f.pk for f in kept]).delete()
    return kept


MonthCheck = Callable[[date], list[Finding]]
# The month-end checks by their place in the findings: the books' own here, those of the apps
# built on the books added by `month_check_register` (the books name none of them).
_CHECKS: dict[str, tuple[int, MonthCheck]] = {}


def month_check_register(name: str, check: MonthCheck, *, order: int) -> MonthCheck:
    """Run `check(month)` with the month-end checks, its findings placed by `order` (the books'
    own: 10 effective share, 20 elastic spend against revenue, 30 structural zero)."""
    _CHECKS[name] = (order, check)
    return check


def month_findings(*, month: date) -> list[Finding]:
    """What the checks find for `month` now, unsaved (the close checklist previews them)."""
    month = month_of(month)
    return [finding for _, check in sorted(_CHECKS.values(), key=lambda c: c[0]) for finding in check(month)]


def _instants(month: date) -> tuple[datetime, datetime]:
    window = month_window(month)
    return window.start, window.end


# Each cost centre's classified tokens of a month by class.
_CLASS_TOKENS = text(
    SQL(
        "SELECT COALESCE(NULLIF(d.business_line, ''), %s), split_part(r.name, '.', 1), SUM(h.tokens) "
        "FROM {classes} h JOIN {dims} d ON d.id = h.dims_id JOIN {reasons} r ON r.id = h.reason_id "
        "WHERE h.hour >= %s AND h.hour < %s GROUP BY 1, 2"
    ).format(classes=table(HourlyClass), dims=table(DimSet), reasons=table(Reason))
)


def _effective_share(month: date) -> list[Finding]:
    with analytic_cursor() as cursor:
        cursor.execute(_CLASS_TOKENS, [conf.get("LEDGER_UNASSIGNED"), *_instants(month)])
        rows = cursor.fetchall()
    tokens: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for bl, token_class, count in rows:
        tokens[bl][token_class] += int(count)
        tokens[""][token_class] += int(count)
    table = threshold_table()
    findings = []
    for bl, by_class in sorted(tokens.items()):
        # The effective ratio as every surface reads it (of the computed tokens), against the
        # line's threshold (the company as a whole: the defaults).
        thresholds = table.of(bl)
        ratio = ratios_of(by_class=by_class, prompt=0, prompt_cached=0).effective
        if ratio is not None and thresholds.state("effective", ratio) == "breach":
            share, minimum = Decimal(repr(ratio)), thresholds.effective_min
            who = bl or "the company"
            findings.append(
                Finding(
                    kind=Finding.Kind.EFFECTIVE_SHARE_LOW,
                    action=Finding.Action.NOTIFY_PRODUCT_OWNER,
                    period=month,
                    business_line=bl,
                    figures={
                        "tokens": dict(sorted(by_class.items())),
                        "share": str(share.quantize(Decimal("0.0001"))),
                        "minimum": str(minimum),
                    },
                    message=f"Effective tokens were {pct(share)} of {who}'s computed tokens in {month:%Y-%m} "
                    f"(healthy: at least {pct(minimum)}): notify the product owner to review prompts and "
                    "output formats.",
                )
            )
    return findings


def spend_of(start: date, end: date, role: str | None = None) -> dict[tuple[date, str, str], dict[str, Any]]:
    """Net expense and tokens per (month, cost centre, currency) of usage days in [start, end)."""
    lines = JournalLine.objects.filter(day__gte=start, day__lt=end, account__kind=Account.Kind.EXPENSE)
    if role is not None:
        lines = lines.filter(account__role=role)
    spend: dict[tuple[date, str, str], dict[str, Any]] = {}
    rows = lines.values("day", "cost_centre", "currency").annotate(
        net=Sum(F("debit") - F("credit")), tokens=Sum("tokens")
    )
    for row in rows:
        key = (month_of(row["day"]), row["cost_centre"], row["currency"])
        got = spend.setdefault(key, {"amount": Decimal(0), "tokens": 0})
        got["amount"] += row["net"]
        got["tokens"] += row["tokens"]
    return spend


def _structural_zero(month: date) -> list[Finding]:
    months = [month]
    for _ in range(int(conf.get("LEDGER_STRUCTURAL_ZERO_MONTHS")) - 1):
        months.insert(0, previous_month(months[0]))
    usage = spend_of(months[0], next_month(month))
    structural = spend_of(months[0], next_month(month), Account.Role.STRUCTURAL)
    active: dict[str, set[date]] = defaultdict(set)
    spent: dict[str, set[date]] = defaultdict(set)
    for (m, cc, _), got in usage.items():
        if got["tokens"] or got["amount"]:
            active[cc].add(m)
    for (m, cc, _), got in structural.items():
        if got["tokens"] or got["amount"]:
            spent[cc].add(m)
    labels = ", ".join(f"{m:%Y-%m}" for m in months)
    return [
        Finding(
            kind=Finding.Kind.STRUCTURAL_ZERO,
            action=Finding.Action.TECH_DEBT_WARNING,
            period=month,
            business_line=cc,
            figures={"months": [f"{m:%Y-%m}" for m in months]},
            message=f"{cc} booked no structural token expense in {labels}: nobody seems to maintain its prompt "
            "templates and output schemas (tech debt).",
        )
        for cc in sorted(active)
        if set(months) <= active[cc] and not spent[cc] & set(months)
    ]


month_check_register("effective_share", _effective_share, order=10)
month_check_register("structural_zero", _structural_zero, order=30)
