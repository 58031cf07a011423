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
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings

from apps.alerts.models import Alert, Severity

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
        "view": "Open the drill-down",
        "test_body": "This channel is set up correctly.",
    },
    "zh-hans": {
        "spike": "Token 用量突增:{subject}",
        "trend": "单位成本连续上升:{subject}",
        "budget": "预算{level}:{subject}",
        "health": "Token 健康指标越界:{subject}",
        "unattributed": "未归属 Token 增长",
        "dead_letters": "被拒记录增长",
        "collector_silent": "采集器无上报:{subject}",
        "ledger_finding": "月末检查:{subject}",
        "test": "costplatform 测试消息",
        "resolved": "已恢复:{title}",
        "severity": "级别",
        "view": "查看明细",
        "test_body": "此通道配置正确。",
    },
}
LABELS: dict[str, dict[str, str]] = {
    "en": {
        "tokens": "Tokens in the window",
        "baseline": "Baseline (median)",
        "ratio": "Ratio to baseline",
        "factor": "Threshold factor",
        "days": "Daily cost per 1k tokens",
        "spent": "Spent this month",
        "budget": "Budget",
        "used": "Used",
        "forecast": "Forecast at month end",
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
        "breaches": "Out of range",
    },
    "zh-hans": {
        "tokens": "窗口内 Token",
        "baseline": "基线(中位数)",
        "ratio": "相对基线倍数",
        "factor": "阈值倍数",
        "days": "每日每千 Token 成本",
        "spent": "本月已花费",
        "budget": "预算",
        "used": "已使用",
        "forecast": "月末预测",
        "effective": "有效 Token 率",
        "waste": "浪费率",
        "cache_hit": "缓存命中率",
        "shadow": "影子 Token 率",
        "share": "未归属占比",
        "baseline_share": "基线占比",
        "rejected": "窗口内被拒记录",
        "baseline_rejected": "每窗口基线",
        "last_seen": "最后上报",
        "silent_minutes": "静默时长(分钟)",
        "message": "发现",
        "period": "期间",
        "breaches": "越界指标",
    },
}
LEVELS = {
    "en": {"80": "80 % used", "100": "exceeded", "forecast": "forecast to be exceeded"},
    "zh-hans": {"80": "已用 80%", "100": "已超支", "forecast": "预计月末超支"},
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

    @property
    def view_label(self) -> str:
        return CATALOGUE[self.language]["view"]


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


def message_for(alert: Alert, language: str) -> Message:
    """The message of `alert` in `language` (en or zh-hans)."""
    text = CATALOGUE.get(language) or CATALOGUE["en"]
    language = language if language in CATALOGUE else "en"
    labels = LABELS[language]
    if alert.title:  # a broadcast: title and body as the caller wrote them
        title, lines = alert.title, []
    else:
        level = LEVELS[language].get(alert.level, alert.level)
        title = text.get(alert.kind, alert.kind).format(subject=alert.subject or alert.business_line, level=level)
        lines = [(labels.get(k, k), _value(v)) for k, v in alert.figures.items() if not k.startswith("_")]
        if alert.kind == "test":
            lines = [("", text["test_body"])]
    if alert.status == Alert.Status.RESOLVED:
        title = text["resolved"].format(title=title)
    lines.append((text["severity"], SEVERITY[language][Severity(alert.severity)]))
    return Message(
        title=title,
        lines=lines,
        body_markdown=alert.body_markdown,
        link=absolute(alert.link),
        severity=alert.severity,
        resolved=alert.status == Alert.Status.RESOLVED,
        language=language,
    )


def markdown(message: Message, *, bold: str = "**", escape: Callable[[str], str] = markup) -> str:
    """The body as markdown (Feishu lark_md, DingTalk, WeCom; Slack's mrkdwn with bold='*'),
    the figures' values through `escape` (`plain` for email)."""
    body = message.body_markdown
    if body and bold == "*":  # Slack mrkdwn: *bold*, <url|text>
        body = re.sub(r"\[([^\]]+)\]\(([^)]+)\)", r"<\2|\1>", re.sub(r"\*\*(.+?)\*\*", r"*\1*", body))
    parts = [body] if body else []
    parts += [f"{bold}{label}{bold}: {escape(value)}" if label else escape(value) for label, value in message.lines]
    return "\n".join(parts)
