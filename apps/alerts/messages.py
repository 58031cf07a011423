"""What an alert says, in a channel's language: a title, figure lines and a link.

Rendering happens at delivery from the Alert row's figures, so a retry sends the same
message and a channel's language can be changed without re-evaluating anything.

Business lines, models and findings come from the records, that is from callers: a line
named `[click](http://evil)`, `<!channel>` or `@all` must reach the chat as inert text, not
as a link or a ping to everyone. The Message holds the text as found; each transport shows it
through `plain` (plain-text fields) or `markup` (markdown and Slack mrkdwn), and whoever
writes a broadcast's markdown passes the data it quotes through `markup`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings

from apps.alerts.models import Alert, Severity
from apps.common.buckets import accounting_zone, zone_name

# Per language: titles per detector (firing, resolved) and labels of the figures.
CATALOGUE: dict[str, dict[str, str]] = {
    "en": {
        "spike": "Token spike: {subject}",
        "trend": "Unit cost rising: {subject}",
        "budget": "Budget {level}: {subject}",
        "health": "Token health out of range: {subject}",
        "unattributed": "Unattributed tokens growing",
        "dead_letters": "Rejected records growing",
        "collector_silent": "Collector silent: {subject}",
        "ledger_finding": "Month-end check: {subject}",
        "test": "Test message from costplatform",
        "resolved": "Resolved: {title}",
        "severity": "Severity",
        "view": "Open the page",
        "test_body": "This channel is set up correctly.",
        "model_subject": "model {name}",
        "tokens_subject": "{name} (tokens)",
        "team_subject": "team {name}",
        "caller_subject": "caller {name}",
        "unattributed_subject": "(unattributed)",
        "all_lines": "the company",
        "waste_class": "waste",
        "shadow_class": "shadow",
    },
    "zh-hans": {
        "spike": "词元用量突增:{subject}",
        "trend": "单位成本连续上升:{subject}",
        "budget": "预算{level}:{subject}",
        "health": "词元健康指标越界:{subject}",
        "unattributed": "未归属词元增长",
        "dead_letters": "被拒记录增长",
        "collector_silent": "采集器无上报:{subject}",
        "ledger_finding": "月末检查:{subject}",
        "test": "costplatform 测试消息",
        "resolved": "已恢复:{title}",
        "severity": "级别",
        "view": "打开页面",
        "test_body": "此通道配置正确。",
        "model_subject": "模型 {name}",
        "tokens_subject": "{name}(词元)",
        "team_subject": "团队 {name}",
        "caller_subject": "调用方 {name}",
        "unattributed_subject": "(未归属)",
        "all_lines": "全公司",
        "waste_class": "浪费",
        "shadow_class": "影子",
    },
}
LABELS: dict[str, dict[str, str]] = {
    "en": {
        "window": "Window",
        "tokens": "Tokens in the window",
        "threshold": "Fires at",
        "baseline": "Baseline (median)",
        "ratio": "Ratio to baseline",
        "factor": "Threshold factor",
        "days": "Daily cost per 1k tokens",
        "spent": "Spent this month",
        "budget": "Budget",
        "used": "Used",
        "forecast": "Forecast at month end",
        "breaches": "Out of range",
        "reasons": "Top reasons",
        "effective": "Effective ratio",
        "waste": "Waste rate",
        "cache_hit": "Cache hit rate",
        "shadow": "Shadow ratio",
        "share": "Unattributed share",
        "baseline_share": "Baseline share",
        "rejected": "Rejected in the window",
        "baseline_rejected": "Baseline per window",
        "last_seen": "Last seen",
        "silent_minutes": "Silent for (minutes)",
        "message": "Finding",
        "period": "Period",
        "contributors": "Top contributors (model · feature · step)",
        "since": "Firing since",
        "fired": "Fired at",
        "limit": "threshold",
    },
    "zh-hans": {
        "window": "时间窗口",
        "tokens": "窗口内词元",
        "threshold": "触发阈值",
        "baseline": "基线(中位数)",
        "ratio": "相对基线倍数",
        "factor": "阈值倍数",
        "days": "每日每千词元成本",
        "spent": "本月已花费",
        "budget": "预算",
        "used": "已使用",
        "forecast": "月末预测",
        "breaches": "越界指标",
        "reasons": "主要原因",
        "effective": "有效词元率",
        "waste": "浪费率",
        "cache_hit": "缓存命中率",
        "shadow": "影子词元率",
        "share": "未归属占比",
        "baseline_share": "基线占比",
        "rejected": "窗口内被拒记录",
        "baseline_rejected": "每窗口基线",
        "last_seen": "最后上报",
        "silent_minutes": "静默时长(分钟)",
        "message": "发现",
        "period": "期间",
        "contributors": "主要来源(模型 · 功能 · 步骤)",
        "since": "告警开始于",
        "fired": "告警开始于",
        "limit": "阈值",
    },
}
LEVELS = {
    "en": {"80": "80 % used", "100": "exceeded", "forecast": "forecast to be exceeded"},
    "zh-hans": {"80": "已用 80%", "100": "已超支", "forecast": "预计月末超支"},
}
# Figures in the order a reader takes them (stored figures come back from jsonb in its own order).
ORDER = {key: i for i, key in enumerate(LABELS["en"])}
# Units after a figure's value, per language (percentages and times are formatted by kind).
UNITS = {
    "en": {"tokens": " tokens", "threshold": " tokens", "baseline": " tokens", "ratio": " \u00d7", "factor": " \u00d7"},
    "zh-hans": {"tokens": " 词元", "threshold": " 词元", "baseline": " 词元", "ratio": " 倍", "factor": " 倍"},
}
PERCENT = frozenset({"share", "baseline_share"})
TIMES = frozenset({"last_seen"})
# A month-end finding in each language, from the check's numbers (apps/ledger/services/checks.py);
# a finding without them is sent as the ledger wrote it.
FINDING_KINDS = {
    "en": {
        "effective_share_low": "effective share low",
        "elastic_over_revenue": "elastic spend over revenue",
        "revenue_missing": "revenue missing",
        "structural_zero": "no structural spend",
        "bill_unreconciled": "supplier bill not reconciled",
    },
    "zh-hans": {
        "effective_share_low": "有效词元占比偏低",
        "elastic_over_revenue": "弹性支出超出收入",
        "revenue_missing": "缺少收入数据",
        "structural_zero": "无结构性支出",
        "bill_unreconciled": "供应商账单未对平",
    },
}
FINDINGS = {
    "en": {
        "effective_share_low": "Effective tokens were {share} of {who}'s computed tokens in {period}: notify the "
        "product owner to review prompts and output formats.",
        "revenue_missing": "{who} spent {elastic} {currency} on elastic tokens in {period} but no revenue was "
        "entered for it: enter the month's revenue to check elastic spend against it.",
        "elastic_over_revenue": "Elastic token spend of {who} in {period} was {elastic} {currency}, {ratio} of its "
        "revenue {revenue} {currency}: start a degradation-strategy audit.",
        "structural_zero": "{who} booked no structural token expense in {months}: nobody seems to maintain its "
        "prompt templates and output schemas (tech debt).",
        "bill_unreconciled": "Supplier bills of {period} leave unexplained differences over their threshold: "
        "{named}. Review them on the reconciliation page and post adjusting entries.",
    },
    "zh-hans": {
        "effective_share_low": "{period} {who} 的有效词元仅占实际计算词元的 {share}:"
        "请通知产品负责人检查提示词和输出格式。",
        "revenue_missing": "{period} {who} 的弹性词元支出为 {elastic} {currency},但未录入收入:"
        "请录入当月收入,以便对照弹性支出。",
        "elastic_over_revenue": "{period} {who} 的弹性词元支出为 {elastic} {currency},占其收入 "
        "{revenue} {currency} 的 {ratio}:请启动降级策略审计。",
        "structural_zero": "{who} 在 {months} 没有任何结构性词元支出:提示词模板和输出格式似乎无人维护(技术债)。",
        "bill_unreconciled": "{period} 的供应商账单有超出阈值的未解释差异:{named}。"
        "请在账单对账页面核对并过账调整分录。",
    },
}
SEVERITY = {
    "en": {Severity.INFO: "info", Severity.WARNING: "warning", Severity.CRITICAL: "critical"},
    "zh-hans": {Severity.INFO: "提示", Severity.WARNING: "警告", Severity.CRITICAL: "严重"},
}


# A zero-width space: invisible, and enough to stop a mention or link from being recognised.
ZWSP = "\u200b"
_MENTION = re.compile(r"@(?=\w)")  # @all, @here, @channel, @everyone, @someone
_WWW = re.compile(r"(?i)\b(www)\.")  # with "://", what chat clients turn into a link unasked


def plain(text: str) -> str:
    """Data shown as text, made inert: no mention, no auto-link, no tag (a `<` is followed by
    an invisible space) and no markdown link or reference (nor is a `]`)."""
    text = _MENTION.sub("@" + ZWSP, text).replace("://", ":" + ZWSP + "//")
    text = text.replace("<", "<" + ZWSP).replace("]", "]" + ZWSP)
    return _WWW.sub(lambda m: m.group(1) + ZWSP + ".", text)


def markup(text: str) -> str:
    """Data placed in markdown (DingTalk, Feishu lark_md, WeCom, Mattermost) or Slack mrkdwn:
    `&`, `<`, `>` as the entities these read (Slack's `<!channel>` and `<url|text>`, Feishu's
    `<at id=all>`, WeCom's `<@user>` are tags), then what `plain` does."""
    return plain(text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))


@dataclass(frozen=True)
class Message:
    title: str
    lines: list[tuple[str, str]]  # (label, value), already localised
    body_markdown: str  # broadcasts carry their own body; empty for rule alerts
    link: str
    severity: int
    resolved: bool
    language: str
    actions: list[tuple[str, str]] = field(default_factory=list)  # (label, absolute URL): mute, acknowledge

    @property
    def view_label(self) -> str:
        return CATALOGUE[self.language]["view"]


OPENED = "alert"  # the query parameter naming the alert a page was opened from (apps/alerts/web.py)


def alert_page_link(alert: Alert) -> str:
    """The page `alert` opens, naming a saved rule's alert, so that the page shows its banner
    (what it is, its actions) and marks its window on the charts."""
    if not alert.link or alert.pk is None or alert.rule_id is None:
        return alert.link
    return f"{alert.link}{'&' if '?' in alert.link else '?'}{OPENED}={alert.pk}"


def absolute(link: str) -> str:
    return link if "://" in link or not link else settings.ALERTS_SITE_URL.rstrip("/") + link


def _value(value: Any) -> str:
    if isinstance(value, float | Decimal):
        number = float(value)
        return f"{number:,.4g}" if abs(number) < 10 else f"{number:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list):
        return ", ".join(_value(v) for v in value)
    return str(value)


def _zone_label(at: datetime) -> str:
    offset = at.strftime("%z")
    return f"{zone_name()}, UTC{offset[:3]}:{offset[3:]}"


def when(value: str) -> str:
    """An instant (ISO) in the accounting zone, to the minute, with the zone and its offset."""
    at = datetime.fromisoformat(value).astimezone(accounting_zone())
    return f"{at:%Y-%m-%d %H:%M} ({_zone_label(at)})"


def window(start_iso: str, end_iso: str) -> str:
    """'2026-12-02 12:00 to 13:00' with an en dash and the zone: the end's date only when it differs."""
    zone = accounting_zone()
    start, end = (datetime.fromisoformat(v).astimezone(zone) for v in (start_iso, end_iso))
    tail = f"{end:%H:%M}" if start.date() == end.date() else f"{end:%Y-%m-%d %H:%M}"
    return f"{start:%Y-%m-%d %H:%M} \u2013 {tail} ({_zone_label(start)})"


def _figure(key: str, value: Any, language: str) -> str:
    if key == "breaches":
        return ", ".join(LABELS[language].get(name, name) for name in value)
    if key == "reasons" and isinstance(value, list):
        return reasons(value, language)
    if key in PERCENT and isinstance(value, int | float):
        return f"{value:.1%}"
    if key in TIMES and isinstance(value, str) and "T" in value:
        return when(value)
    return _value(value) + (UNITS[language].get(key, "") if value is not None else "")


def _pct(share: float) -> str:
    return f"{share * 100:.1f}".removesuffix(".0") + " %"


def reasons(found: list[dict[str, Any]], language: str = "en") -> str:
    """'waste 66.7 %: timeout 100 %; shadow 9.1 %: spec_rejected 80 %, recompute 20 %': each
    class out of range, its share of the computed tokens and its top reasons' shares of it."""
    parts = []
    for item in found:
        named = CATALOGUE[language].get(f"{item['class']}_class", item["class"])
        top = ", ".join(f"{r['reason']} {_pct(r['share'])}" for r in item["top"])
        parts.append(f"{named} {_pct(item['share'])}" + (f": {top}" if top else ""))
    return "; ".join(parts)


def contributors(top: list[dict[str, Any]]) -> str:
    """'qwen2.5-7b · faq · reason 62.0 %, …': each (model, feature, step) with its share."""
    named = (" · ".join(part for part in (c["model"], c["feature"], c["step"]) if part) for c in top)
    return ", ".join(f"{name} {c['share']:.1%}" for name, c in zip(named, top, strict=True))


def _scope_part(text: dict[str, str], dim: str, value: str) -> str:
    """One dim of a budget's scope in words: "team web", "caller search-app", "user u-42"."""
    return text[f"{dim}_subject"].format(name=value) if dim in ("team", "caller") else f"{dim} {value}"


def _subject(alert: Alert, language: str) -> str:
    text, subject = CATALOGUE[language], alert.subject or alert.business_line
    if alert.kind == "ledger_finding" and "_finding" in alert.figures:
        found = alert.figures["_finding"]
        kind = FINDING_KINDS[language].get(found.get("kind", ""), found.get("kind", ""))
        return f"{found.get('period', '')} {kind} {found.get('business_line') or text['all_lines']}"
    if alert.kind == "spike" and subject.startswith("model "):
        return text["model_subject"].format(name=subject[len("model ") :])
    if alert.kind == "budget":
        scope = alert.figures.get("_scope") or {}
        if scope:  # a team's, a caller's or a dim value's budget: its line, then each in words
            named = [_scope_part(text, dim, value) for dim, value in scope.items()]
            name = " · ".join([alert.business_line, *named])
        else:
            name = subject.removesuffix(" tokens")
        return text["tokens_subject"].format(name=name) if subject.endswith(" tokens") else name
    return subject.replace("(unattributed)", text["unattributed_subject"])


def _finding(figures: dict[str, Any], language: str) -> str:
    """A month-end finding's text in `language`, from the check's numbers."""
    found = figures.get("_finding") or {}
    template = FINDINGS[language].get(found.get("kind", ""))
    who = found.get("business_line") or CATALOGUE[language]["all_lines"]
    values = {**found, "who": who, "months": ", ".join(found.get("months") or [])}
    for key in ("share", "ratio"):
        if values.get(key) not in (None, ""):
            values[key] = f"{Decimal(str(values[key])):.1%}"
    try:
        return template.format(**values) if template else str(figures.get("message", ""))
    except (KeyError, ValueError, ArithmeticError):
        return str(figures.get("message", ""))


def _lines(alert: Alert, language: str) -> list[tuple[str, str]]:
    labels, figures = LABELS[language], alert.figures
    limits = figures.get("_limits") or {}
    lines = []
    if figures.get("_window"):
        lines.append((labels["window"], window(*figures["_window"])))
    for key, value in sorted(figures.items(), key=lambda kv: ORDER.get(kv[0], len(ORDER))):
        if key.startswith("_") or value is None:  # no baseline yet: no ratio to it
            continue
        shown = _finding(figures, language) if key == "message" and alert.kind == "ledger_finding" else None
        shown = shown if shown is not None else _figure(key, value, language)
        if key in limits:
            shown += f" ({labels['limit']} {limits[key]})"
        lines.append((labels.get(key, key), shown))
    if figures.get("_contributors"):
        lines.append((labels["contributors"], contributors(figures["_contributors"])))
    if figures.get("_since"):
        lines.append((labels["fired" if alert.status == Alert.Status.RESOLVED else "since"], when(figures["_since"])))
    return lines


def message_for(alert: Alert, language: str, *, actions: list[tuple[str, str]] | None = None) -> Message:
    """The message of `alert` in `language` (en or zh-hans), with `actions` (label, URL) as links."""
    language = language if language in CATALOGUE else "en"
    text = CATALOGUE[language]
    translated = (alert.figures.get("_i18n") or {}).get(language) if alert.title else None
    if alert.title:  # a broadcast: title and body as the caller wrote them (in this language if given)
        title, lines = (translated or {}).get("title", alert.title), []
    else:
        level = LEVELS[language].get(alert.level, alert.level)
        title = text.get(alert.kind, alert.kind).format(subject=_subject(alert, language), level=level)
        lines = [("", text["test_body"])] if alert.kind == "test" else _lines(alert, language)
    if alert.status == Alert.Status.RESOLVED:
        title = text["resolved"].format(title=title)
    lines.append((text["severity"], SEVERITY[language][Severity(alert.severity)]))
    return Message(
        title=title,
        lines=lines,
        body_markdown=(translated or {}).get("body", alert.body_markdown),
        link=absolute(alert_page_link(alert)),
        severity=alert.severity,
        resolved=alert.status == Alert.Status.RESOLVED,
        language=language,
        actions=actions or [],
    )


def links_markdown(message: Message) -> str:
    """The page and the actions as markdown links: '[Open the page](…) · [Mute 1 h](…) · …'."""
    links = ([(message.view_label, message.link)] if message.link else []) + message.actions
    return " · ".join(f"[{label}]({url})" for label, url in links)


def markdown(message: Message, *, bold: str = "**", escape: Callable[[str], str] = markup) -> str:
    """The body as markdown (Feishu lark_md, DingTalk, WeCom; Slack's mrkdwn with bold='*'),
    the figures' values through `escape` (`plain` for email)."""
    body = message.body_markdown
    if body and bold == "*":  # Slack mrkdwn: *bold*, <url|text>
        body = re.sub(r"\[([^\]]+)\]\(([^)]+)\)", r"<\2|\1>", re.sub(r"\*\*(.+?)\*\*", r"*\1*", body))
    parts = [body] if body else []
    parts += [f"{bold}{label}{bold}: {escape(value)}" if label else escape(value) for label, value in message.lines]
    return "\n".join(parts)
