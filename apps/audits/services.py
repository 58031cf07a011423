"""Writes of the audit: run a month's audit (replacing its report) and send its summary."""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import date, datetime
from decimal import Decimal

from django.db import connection, transaction
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from apps.audits import conf
from apps.audits.finders import FINDERS, AuditWindow, Draft
from apps.audits.models import KIND_LABELS, AuditFinding, AuditReport, FindingKind
from apps.audits.selectors import month_bounds, month_rates, month_tokens, report_findings
from apps.common.db import xact_lock
from apps.ingest.retention import records_available_check

log = logging.getLogger(__name__)

NOT_A_MONTH = "an audit covers a whole month: pass its first day"
_REPORT_LOCK = 0x41554454  # advisory lock namespace "AUDT": (namespace, yyyymm) serialises a month's report


def audit_run(*, month: date) -> AuditReport:
    """Run every finder over `month` and store the report, replacing the month's earlier one.

    The findings are computed outside any long transaction (each finder is one aggregate
    query); the replacement is one short transaction, so readers see the old report or the
    new one, never a mix."""
    if month.day != 1:
        raise ValueError(NOT_A_MONTH)
    started = timezone.now()
    start, end = month_bounds(month)
    # The finders read the month's records: without them the report would be replaced by an empty one.
    records_available_check(start=start, end=end, what=f"The audit of {month:%Y-%m}")
    window = AuditWindow(month=f"{month:%Y-%m}", start=start, end=end, rates=month_rates(start=start, end=end))
    drafts: list[Draft] = []
    for kind in KIND_LABELS:
        found = FINDERS[kind](window)
        log.info("audit %s: %s findings of %s", window.month, len(found), kind)
        drafts.extend(found)
    _not_counted_twice(drafts)
    return _report_replace(month, window, drafts, started=started, tokens=month_tokens(start=start, end=end))


def _not_counted_twice(drafts: list[Draft]) -> None:
    """A zombie's savings are all its tokens: other findings on the same dims are listed but
    not added to the total again."""
    zombie_dims = [d.dims for d in drafts if d.kind == FindingKind.ZOMBIE]
    for draft in drafts:
        if draft.kind != FindingKind.ZOMBIE and draft.counted:
            draft.counted = not any(z.items() <= draft.dims.items() for z in zombie_dims)


def _report_replace(
    month: date, window: AuditWindow, drafts: list[Draft], *, started: datetime, tokens: int
) -> AuditReport:
    counted = [d for d in drafts if d.counted]
    money = [d.savings for d in counted if d.savings is not None]
    with transaction.atomic():
        with connection.cursor() as cursor:
            # Two runs of one month take turns: the second replaces the first's report.
            xact_lock(cursor, _REPORT_LOCK, month.year * 100 + month.month)
        AuditReport.objects.filter(month=month).delete()
        report = AuditReport.objects.create(
            month=month,
            currency=window.rates.currency,
            tokens=tokens,
            savings_tokens=sum(d.savings_tokens for d in counted),
            savings=sum(money, Decimal(0)) if money or not counted else None,
            started_at=started,
            finished_at=timezone.now(),
        )
        AuditFinding.objects.bulk_create(
            AuditFinding(
                report=report,
                position=position,
                kind=d.kind,
                title=d.title[:500],
                dims=d.dims,
                model=d.model[:200],
                tokens=d.tokens,
                savings_tokens=d.savings_tokens,
                savings=d.savings,
                evidence=d.evidence[:2000],
                suggestion=d.suggestion,
                figures=d.figures,
                counted=d.counted,
            )
            for position, d in enumerate(_ordered(drafts), start=1)
        )
    return report


def _ordered(drafts: list[Draft]) -> list[Draft]:
    """Biggest savings first (money where priced, then tokens), kinds in registry order on ties."""
    order = {kind: i for i, kind in enumerate(KIND_LABELS)}
    return sorted(drafts, key=lambda d: (not d.counted, -(d.savings or 0), -d.savings_tokens, order[d.kind], d.title))


def report_broadcast(*, report_id: int) -> int:
    """Send the report's summary to the channels (once): one message for everyone and one per
    business line with findings, routed like alerts. Returns the messages written."""
    from apps.alerts.services import broadcast

    with transaction.atomic():
        claimed = AuditReport.objects.filter(pk=report_id, broadcast_at=None).update(broadcast_at=timezone.now())
        if not claimed:
            return 0
        report = AuditReport.objects.get(pk=report_id)
        findings = report_findings(report=report)
        link = f"/audits/{report.month:%Y-%m}/"  # made absolute with ALERTS_SITE_URL
        sent = 0
        for business_line, listed in _summaries(findings):
            whole = business_line is None
            broadcast(
                title=summary_title(report, business_line),
                body_markdown=summary_markdown(report, listed, whole=whole),
                translations={
                    lang: (
                        summary_title(report, business_line, language=lang),
                        summary_markdown(report, listed, whole=whole, language=lang),
                    )
                    for lang in TRANSLATED
                },
                link=link,
                business_line=business_line,
                severity=conf.get("AUDIT_BROADCAST_SEVERITY"),
                kind="audit",
            )
            sent += 1
    return sent


def _summaries(findings: list[AuditFinding]) -> list[tuple[str | None, list[AuditFinding]]]:
    by_line: dict[str, list[AuditFinding]] = defaultdict(list)
    for finding in findings:
        if finding.dims.get("business_line"):
            by_line[finding.dims["business_line"]].append(finding)
    return [(None, findings), *sorted(by_line.items())]


# Languages a channel may speak besides English (apps.alerts.models.Language).
TRANSLATED = ("zh-hans",)


def summary_title(report: AuditReport, business_line: str | None, *, language: str = "en") -> str:
    with translation.override(language):
        title = _("Token audit %(month)s") % {"month": f"{report.month:%Y-%m}"}
        return f"{title}: {business_line}" if business_line else title


def summary_markdown(
    report: AuditReport, findings: list[AuditFinding], *, whole: bool, top: int = 5, language: str = "en"
) -> str:
    """The chat summary in `language`: what to cut, biggest first, in tokens (money only when
    configured). Finding titles name business lines and models, which callers chose: they go in
    as inert text."""
    with translation.override(language):
        return _summary_lines(report, findings, whole=whole, top=top)


def _summary_lines(report: AuditReport, findings: list[AuditFinding], *, whole: bool, top: int) -> str:
    from apps.alerts.messages import markup

    with_money = conf.get("AUDIT_BROADCAST_MONEY")
    counted = [f for f in findings if f.counted]
    saved = report.savings_tokens if whole else sum(f.savings_tokens for f in counted)
    lines = [
        _("**%(count)s findings**, estimated savings **%(tokens)s tokens**")
        % {"count": len(findings), "tokens": f"{saved:,}"}
    ]
    if with_money:
        money = report.savings if whole else sum((f.savings or Decimal(0)) for f in counted)
        if money is not None:
            lines[0] += f" / **{money:,.2f} {report.currency}**"
    for finding in findings[:top]:
        money = f", {finding.savings:,.2f} {report.currency}" if with_money and finding.savings is not None else ""
        tokens = _("%(tokens)s tokens") % {"tokens": f"{finding.savings_tokens:,}"}
        lines.append(f"- {markup(finding.title_shown)} ({tokens}{money})")
    if len(findings) > top:
        lines.append("- " + _("... and %(count)s more in the report") % {"count": len(findings) - top})
    if not findings:
        lines.append(_("Nothing to cut this month."))
    pack = month_pack_link(report.month)
    if pack:
        name = _("Month pack %(month)s") % {"month": f"{report.month:%Y-%m}"}
        lines.append(f"[{name}]({pack})")
    return "\n".join(lines)


def month_pack_link(month: date) -> str | None:
    """The absolute URL of the month's pack (finance's workbook) when the month is closed."""
    from apps.alerts.messages import absolute
    from apps.finance.pack import month_pack_path
    from apps.ledger.models import Period

    if not Period.objects.filter(month=month, status=Period.Status.CLOSED).exists():
        return None
    return absolute(month_pack_path(month))
