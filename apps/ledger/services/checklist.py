"""The close checklist: what stands between a month and a clean close, computed live, each line
backed by its items (`CheckItem.items`: the models, days, hours, findings, budgets, suppliers it
counts), which the close page's line page lists exactly (`close_check` computes one line).

Findings are the month-end checks' (`findings_now`: live before the close, stored after it); a
finding that nobody resolved or accepted (`FindingReview`, apps/ledger/services/closing.py
`finding_review`) is open. Labels are English msgids; pages translate them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from django.db.models import F, Sum
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop, pgettext

from apps.classification.models import DirtyDay as ClassDirtyDay
from apps.classification.models import HourlyClass
from apps.common.buckets import day_of, month_days, month_of, next_month, zone_name
from apps.common.composed import SQL, table, text
from apps.currencies.rates import missing_rates
from apps.ingest.models import DimSet, ServedModel
from apps.ledger import conf
from apps.ledger.finding_text import finding_text_of
from apps.ledger.links import journal_href, month_waste_href, page_link
from apps.ledger.mapping import mapping_load
from apps.ledger.models import Account, AccrualDay, DirtyDay, Finding, FindingReview, JournalLine, Period
from apps.ledger.services.accrual import _fingerprints, analytic_cursor, month_window
from apps.ledger.services.checks import month_findings
from apps.pricing.models import DirtyHour
from apps.pricing.selectors import unpriced_models

UNKNOWN_CHECK = gettext_noop("the checklist has no line {key}")


class UnknownCheck(LookupError):
    pass


@dataclass(frozen=True)
class Entry:
    """One item behind a checklist line, as the line's page lists it: what it is, its figure and
    where it is acted on. A finding's entry carries the finding and its review (if any)."""

    name: str
    figure: str = ""
    link: str = ""
    tokens: int = 0
    finding: Finding | None = None
    review: FindingReview | None = None


@dataclass(frozen=True)
class CheckItem:
    key: str
    label: str  # an English msgid; pages translate it
    value: str | int
    ok: bool
    detail: str
    link: str = ""  # the page of its items
    items: tuple[Entry, ...] = ()  # what is not OK: as many as `value` counts (unattributed: its tokens)
    settled: tuple[Entry, ...] = ()  # findings: those resolved or accepted

    @property
    def reviews(self) -> list[dict[str, Any]]:
        """The findings' reviews: who resolved or accepted which, when and why (the label an
        English msgid)."""
        return [_review(e) for e in (*self.items, *self.settled) if e.review is not None]

    def as_json(self) -> dict[str, Any]:
        stored: dict[str, Any] = {
            "key": self.key,
            "label": self.label,
            "value": self.value,
            "ok": self.ok,
            "detail": self.detail,
        }
        if self.key == "open_findings":
            stored["reviews"] = [{**r, "at": r["at"].isoformat()} for r in self.reviews]
        return stored


def _review(entry: Entry) -> dict[str, Any]:
    review, finding = entry.review, entry.finding
    assert review is not None and finding is not None
    return {
        "kind": finding.kind,
        "label": FINDING_NAMES[Finding.Kind(finding.kind)],
        "business_line": finding.business_line,
        "decision": review.decision,
        "by": user_name(review.reviewed_by),
        "at": review.reviewed_at,
        "note": review.note,
    }


def close_checklist(
    *, month: date, business_lines: list[str] | None = None, now: datetime | None = None
) -> list[CheckItem]:
    """What stands between `month` and a clean close, computed now. Items naming business
    lines (findings, budgets) hold only `business_lines` unless it is None; the others are
    company-wide counts that name no line."""
    return [close_check(key=key, month=month, business_lines=business_lines, now=now) for key in CHECKS]


def close_check(
    *, key: str, month: date, business_lines: list[str] | None = None, now: datetime | None = None
) -> CheckItem:
    """One line of the checklist, with its items; UnknownCheck for a key the checklist lacks."""
    check = CHECKS.get(key)
    if check is None:
        raise UnknownCheck(_(UNKNOWN_CHECK).format(key=key))
    found = check(month_of(month), business_lines, now or timezone.now())
    return replace(found, link=reverse("finance-close-items", kwargs={"month": f"{month_of(month):%Y-%m}", "key": key}))


def _unpriced(month: date, business_lines: list[str] | None, now: datetime) -> CheckItem:
    window = month_window(month)
    models = unpriced_models(start=window.start, end=window.end)
    tokens = sum(m.tokens for m in models)
    listed = ", ".join(f"{m.model} ({m.tokens:,})" for m in models[:10])
    detail = (
        _("Models with tokens but neither a price nor a cost pool: %(models)s. Their cost is missing, not 0.")
        % {"models": listed}
        if models
        else _("Every model with tokens this month has a price or a cost pool.")
    )
    items = tuple(Entry(m.model, f"{m.tokens:,}", reverse("prices"), m.tokens) for m in models)
    return CheckItem("unpriced_models", gettext_noop("Unpriced models"), len(models), not tokens, detail, items=items)


def _missing_rates(month: date, business_lines: list[str] | None, now: datetime) -> CheckItem:
    missing = missing_rates(start=month, end=next_month(month))
    shown = [f"{m.day} {m.currency}/{m.to} ({m.amount.quantize(Decimal('0.01'))} {m.currency})" for m in missing]
    listed = ", ".join(shown[:15]) + (" …" if len(missing) > 15 else "")
    detail = (
        _(
            "Days with costs priced in another currency and no rate into the functional one: %(days)s. "
            "They are not booked (not booked as 0) until the rate is entered."
        )
        % {"days": listed}
        if missing
        else _("Every day's costs in other currencies have their day's rate.")
    )
    items = tuple(
        Entry(
            f"{m.day} {m.currency}/{m.to}",
            f"{m.amount.quantize(Decimal('0.01'))} {m.currency}",
            reverse("finance-rates"),
        )
        for m in missing
    )
    return CheckItem(
        "missing_rates", gettext_noop("Missing exchange rates"), len(missing), not missing, detail, items=items
    )


# Each model's classified tokens of the window without a business line, and all of them.
_UNASSIGNED_BY_MODEL = text(
    SQL(
        "SELECT m.name, COALESCE(SUM(h.tokens) FILTER (WHERE d.business_line = ''), 0), COALESCE(SUM(h.tokens), 0) "
        "FROM {classes} h JOIN {dims} d ON d.id = h.dims_id JOIN {models} m ON m.id = h.model_id "
        "WHERE h.hour >= %s AND h.hour < %s GROUP BY m.name ORDER BY 2 DESC, m.name"
    ).format(classes=table(HourlyClass), dims=table(DimSet), models=table(ServedModel))
)


def _unattributed(month: date, business_lines: list[str] | None, now: datetime) -> CheckItem:
    """The share of the month's tokens without a business line; its items are the models they
    were served by, each with its tokens without a line."""
    window = month_window(month)
    with analytic_cursor() as cursor:
        cursor.execute(_UNASSIGNED_BY_MODEL, [window.start, window.end])
        rows = cursor.fetchall()
    unassigned, total = sum(int(r[1]) for r in rows), sum(int(r[2]) for r in rows)
    share = Decimal(unassigned) / Decimal(total) if total else Decimal(0)
    money = _unassigned_money(month)
    spent = "; ".join(f"{amount:,} {currency}" for currency, amount in sorted(money.items()) if amount)
    detail = (
        _("%(tokens)s of %(total)s tokens carry no business line (booked to the cost centre “%(cc)s”: %(money)s).")
        % {"tokens": f"{unassigned:,}", "total": f"{total:,}", "cc": conf.get("LEDGER_UNASSIGNED"), "money": spent or 0}
        if unassigned
        else _("Every token of the month carries a business line.")
    )
    items = tuple(
        Entry(name, f"{int(tokens):,}", month_waste_href(month=month, business_line="", model=name), int(tokens))
        for name, tokens, _all in rows
        if tokens
    )
    value = f"{(share * 100).quantize(Decimal('0.1'))} %"
    return CheckItem("unattributed", gettext_noop("Unattributed share"), value, not unassigned, detail, items=items)


def _unassigned_money(month: date) -> dict[str, Decimal]:
    # Usage lines only: idle capacity (a pool line, no model) is booked to the same cost centre on purpose.
    rows = (
        JournalLine.objects.filter(
            day__gte=month,
            day__lt=next_month(month),
            account__kind=Account.Kind.EXPENSE,
            cost_centre=conf.get("LEDGER_UNASSIGNED"),
            model__isnull=False,
        )
        .values("currency")
        .annotate(net=Sum(F("debit") - F("credit")))
    )
    return {r["currency"]: r["net"] for r in rows}


def stale_days(*, month: date, now: datetime | None = None) -> list[date]:
    """Days of `month`, up to today, whose priced rows are not booked as they stand: priced but
    never accrued, or accrued from rows (or a mapping, or bounds) that changed since. The same
    fingerprints the accrual job compares."""
    month = month_of(month)
    today = day_of(now or timezone.now())
    prints = _fingerprints(month_window(month), mapping_load().version)
    stored = dict(
        AccrualDay.objects.filter(day__gte=month, day__lt=next_month(month)).values_list("day", "fingerprint")
    )
    return [
        day
        for day in month_days(month)
        if day <= today and (day in prints or day in stored) and stored.get(day) != prints.get(day, "")
    ]


def _not_accrued(month: date, business_lines: list[str] | None, now: datetime) -> CheckItem:
    days = stale_days(month=month, now=now)
    listed = ", ".join(f"{d:%m-%d}" for d in days[:15]) + (" …" if len(days) > 15 else "")
    detail = (
        _(
            "Priced days not booked as they stand: %(days)s. The accrual job books them within minutes; "
            "approval books them too."
        )
        % {"days": listed}
        if days
        else _("Every priced day up to today is booked as its rows stand.")
    )
    journal = journal_href(month=month)
    items = tuple(Entry(f"{d:%Y-%m-%d}", _("to book"), f"{journal}&day={d:%Y-%m-%d}" if journal else "") for d in days)
    return CheckItem("days_not_accrued", gettext_noop("Days not yet accrued"), len(days), not days, detail, items=items)


def _dirty(month: date, business_lines: list[str] | None, now: datetime) -> CheckItem:
    window = month_window(month)
    days = month_days(month)
    # A day is a date in the zone it was marked in: one day either side may belong to this month.
    near = (days[0] - timedelta(days=1), days[-1] + timedelta(days=1))
    ledger = sorted(set(DirtyDay.objects.filter(day__gte=near[0], day__lte=near[1]).values_list("day", flat=True)))
    hours = sorted(
        set(DirtyHour.objects.filter(hour__gte=window.start, hour__lt=window.end).values_list("hour", flat=True))
    )
    classes = sorted(ClassDirtyDay.objects.filter(day__gte=near[0], day__lte=near[1]).values_list("day", flat=True))
    total = len(ledger) + len(hours) + len(classes)
    detail = (
        _(
            "Waiting to be processed: %(ledger)s days to re-book, %(hours)s hours to re-price, %(classes)s days to "
            "re-classify. The jobs pick them up within minutes; the books may still change."
        )
        % {"ledger": len(ledger), "hours": len(hours), "classes": len(classes)}
        if total
        else _("No day of the month waits for re-classification, re-pricing or re-booking.")
    )
    zone, prices = ZoneInfo(zone_name()), reverse("prices")
    items = (
        *(Entry(f"{d:%Y-%m-%d}", _("to re-book"), prices) for d in ledger),
        *(Entry(f"{h.astimezone(zone):%Y-%m-%d %H:%M}", _("to re-price"), prices) for h in hours),
        *(Entry(f"{d:%Y-%m-%d}", _("to re-classify"), prices) for d in classes),
    )
    return CheckItem("dirty_days", gettext_noop("Dirty days"), total, not total, detail, items=items)


FINDING_NAMES = {
    Finding.Kind.EFFECTIVE_SHARE_LOW: gettext_noop("effective share low"),
    Finding.Kind.ELASTIC_OVER_REVENUE: gettext_noop("elastic spend over revenue"),
    Finding.Kind.REVENUE_MISSING: gettext_noop("revenue missing"),
    Finding.Kind.STRUCTURAL_ZERO: gettext_noop("no structural spend"),
    Finding.Kind.BILL_UNRECONCILED: gettext_noop("supplier bill not reconciled"),
}


def decision_label(decision: str) -> str:
    """A review's decision in the reader's language ("resolved" is a finding's word here, not an
    alert's)."""
    if decision == FindingReview.Decision.RESOLVED:
        return pgettext("finding", "resolved")
    return pgettext("finding", "accepted")


def findings_now(*, month: date) -> list[Finding]:
    """The month's findings: those stored at its close once it is closed, else what the
    month-end checks find now (unsaved)."""
    month = month_of(month)
    if Period.objects.filter(month=month, status=Period.Status.CLOSED).exists():
        return list(Finding.objects.filter(period=month).order_by("kind", "business_line"))
    return month_findings(month=month)


def reviews_of(*, month: date) -> dict[tuple[str, str], FindingReview]:
    """The month's reviews by their finding's (kind, business line)."""
    found = FindingReview.objects.filter(period=month_of(month)).select_related("reviewed_by")
    return {(r.kind, r.business_line): r for r in found}


def finding_name(finding: Finding) -> str:
    return f"{_(FINDING_NAMES[Finding.Kind(finding.kind)])}: {finding.business_line or _('the company')}"


def _key(finding: Finding) -> tuple[str, str]:
    return (finding.kind, finding.business_line)


def _finding_link(finding: Finding) -> str:
    """Where the finding's action is taken."""
    month, line = finding.period, finding.business_line
    if finding.kind in (Finding.Kind.ELASTIC_OVER_REVENUE, Finding.Kind.REVENUE_MISSING):
        return page_link("plans", month=f"{month:%Y-%m}")
    if finding.kind == Finding.Kind.BILL_UNRECONCILED:
        bills = page_link("bills")
        return f"{bills}?month={month:%Y-%m}" if bills else ""
    if finding.kind == Finding.Kind.STRUCTURAL_ZERO:
        return journal_href(month=month, cost_centre=line, expense=True)
    return month_waste_href(month=month, business_line=line)


def _findings(month: date, business_lines: list[str] | None, now: datetime) -> CheckItem:
    """Open: a finding of the month (live before the close, stored after it) that no named
    person has resolved or accepted yet."""
    found = findings_now(month=month)
    if business_lines is not None:
        found = [f for f in found if f.business_line in business_lines]
    reviews = reviews_of(month=month)
    entries = [
        Entry(finding_name(f), finding_text_of(f), _finding_link(f), finding=f, review=reviews.get(_key(f)))
        for f in found
    ]
    open_ = tuple(e for e in entries if e.review is None)
    settled = tuple(e for e in entries if e.review is not None)
    if open_:
        detail = _(
            "Month-end checks: %(findings)s. Each is resolved, or accepted with a reason, by a named person "
            "before the month is submitted."
        ) % {"findings": "; ".join(e.name for e in open_[:10])}
    elif settled:
        detail = _("%(count)s month-end findings, each resolved or accepted: %(findings)s.") % {
            "count": len(settled),
            "findings": "; ".join(f"{e.name} ({_settled(e)})" for e in settled[:10]),
        }
    else:
        detail = _("The month-end checks find nothing to act on.")
    return CheckItem(
        "open_findings", gettext_noop("Open findings"), len(open_), not open_, detail, items=open_, settled=settled
    )


def _settled(entry: Entry) -> str:
    assert entry.review is not None
    return _("%(decision)s by %(who)s") % {
        "decision": decision_label(entry.review.decision),
        "who": user_name(entry.review.reviewed_by),
    }


Check = Callable[[date, "list[str] | None", datetime], CheckItem]
# The checklist's lines by key, in their order: the books' own, and those of the apps built on
# the books, added by `checklist_line_register` in their AppConfig.ready (the books name none).
CHECKS: dict[str, Check] = {}
_ORDER: dict[str, int] = {}


def checklist_line_register(key: str, check: Check, *, order: int) -> Check:
    """A line of the close checklist computed by `check(month, business_lines, now)`, placed by
    `order` among the books' own (10 unpriced models ... 70 missing rates, by tens)."""
    _ORDER[key] = order
    CHECKS[key] = check
    for name in sorted(CHECKS, key=_ORDER.__getitem__):
        CHECKS[name] = CHECKS.pop(name)
    return check


def _books_lines_register() -> None:
    """The books' own lines, by tens."""
    for place, (key, check) in enumerate(
        (
            ("unpriced_models", _unpriced),
            ("unattributed", _unattributed),
            ("days_not_accrued", _not_accrued),
            ("dirty_days", _dirty),
            ("open_findings", _findings),
            ("missing_rates", _missing_rates),
        ),
        start=1,
    ):
        checklist_line_register(key, check, order=place * 10)


_books_lines_register()


def user_name(user: Any) -> str:
    return user.get_username() if user is not None else "system"
