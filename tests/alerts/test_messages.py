"""What an on-call person gets: every detector's alert links to a page (never the API or the
admin) that a user of the right role opens, filtered to the alert's line, model and window;
and its message, in English and in Chinese, carries the window in the accounting zone, the
threshold, the measured value with its unit, since when it fires and the top contributors,
with no raw key left in it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from urllib.parse import parse_qs, urlsplit

import pytest
from django.urls import resolve

from apps.accounts.models import CollectorKey
from apps.alerts.evaluation import rule_evaluate
from apps.alerts.messages import markdown, message_for
from apps.alerts.models import Alert
from apps.ingest.models import Rejection
from tests import factories
from tests.alerts.test_evaluation import HOUR, NOW, usage, weekly_baseline
from tests.conftest import login_as

pytestmark = [pytest.mark.django_db, pytest.mark.books_in("UTC")]
LINE = {"business_line": "search"}


def spike() -> Alert:
    rule = factories.alert_rule("spike", params={"by": "business_line"})
    weekly_baseline()
    usage(HOUR, 45_000)
    usage(HOUR, 15_000, model="llama-3-70b")
    [fired] = rule_evaluate(rule_id=rule.id, now=NOW)
    return fired


def spike_by_model() -> Alert:
    rule = factories.alert_rule("spike", params={"by": "model"})
    weekly_baseline(model="big-model")
    usage(HOUR, 70_000, model="big-model")
    [fired] = rule_evaluate(rule_id=rule.id, now=NOW)
    return fired


def trend() -> Alert:
    rule = factories.alert_rule("trend")
    for day, cost in enumerate(["1.0", "1.1", "1.2", "1.3"]):
        factories.hourly_cost(hour=NOW.replace(hour=3) - timedelta(days=4 - day), cost=cost, dims=LINE)
    [fired] = rule_evaluate(rule_id=rule.id, now=NOW)
    return fired


def budget() -> Alert:
    from apps.plans.models import Budget

    Budget.objects.create(business_line="search", month=NOW.date().replace(day=1), currency="CNY", amount=Decimal(1000))
    factories.hourly_cost(hour=NOW - timedelta(days=2), cost="600", dims={**LINE, "feature": "rank"})
    factories.hourly_cost(hour=NOW - timedelta(days=2), cost="250", model="llama-3-70b", dims=LINE)
    [fired] = rule_evaluate(rule_id=factories.alert_rule("budget").id, now=NOW)
    return fired


def health() -> Alert:
    rule = factories.alert_rule("health", params={"min_tokens": 1000})
    for dims in ({**LINE, "feature": "rank"}, {**LINE, "step": "plan"}):
        factories.dimset(dims)  # with its business line
    factories.hourly_class(hour=HOUR, tokens=6000, reason="effective.input", dims={**LINE, "feature": "rank"})
    factories.hourly_class(hour=HOUR, tokens=3000, reason="waste.failed", dims={**LINE, "feature": "rank"})
    factories.hourly_class(hour=HOUR, tokens=1000, reason="waste.failed", dims={**LINE, "step": "plan"})
    usage(HOUR, 8000)
    [fired] = rule_evaluate(rule_id=rule.id, now=NOW)
    return fired


def unattributed() -> Alert:
    rule = factories.alert_rule("unattributed", params={"window_hours": 24, "windows": 7})
    for day in range(1, 8):
        usage(HOUR - timedelta(days=day), 95_000)
        usage(HOUR - timedelta(days=day), 5_000, business_line="")
    usage(HOUR, 80_000)
    usage(HOUR, 20_000, business_line="")
    [fired] = rule_evaluate(rule_id=rule.id, now=NOW)
    return fired


def dead_letters() -> Alert:
    key = factories.collector_key("vllm-a").key
    Rejection.objects.bulk_create([Rejection(source=key, raw="{}", errors=["bad"]) for _ in range(25)])
    [fired] = rule_evaluate(rule_id=factories.alert_rule("dead_letters").id)
    return fired


def collector_silent() -> Alert:
    key = factories.collector_key("vllm-b").key
    CollectorKey.objects.filter(id=key.id).update(last_seen_at=NOW - timedelta(hours=2))
    [fired] = rule_evaluate(rule_id=factories.alert_rule("collector_silent").id, now=NOW)
    return fired


def ledger_finding() -> Alert:
    from apps.ledger.models import Finding

    Finding.objects.create(
        kind="effective_share_low",
        action="notify_product_owner",
        period=NOW.date().replace(day=1, month=10),
        business_line="search",
        figures={"tokens": {"effective": 62, "waste": 38}, "share": "0.6200"},
        message="Effective tokens were 62.00 % of search's computed tokens in 2026-10 (healthy: at least 75.0 %): ...",
    )
    [event] = rule_evaluate(rule_id=factories.alert_rule("ledger_finding").id, now=NOW)
    return event


# kind -> (how it fires, the role that opens its link, the page)
KINDS: dict[str, tuple[Callable[[], Alert], str, str]] = {
    "spike": (spike, "viewer", "/overview/"),
    "spike_by_model": (spike_by_model, "engineer", "/overview/"),
    "trend": (trend, "engineer", "/overview/"),
    "budget": (budget, "finance", "/finance/"),
    "health": (health, "viewer", "/overview/"),
    "unattributed": (unattributed, "engineer", "/overview/"),
    "dead_letters": (dead_letters, "engineer", "/collectors/"),
    "collector_silent": (collector_silent, "engineer", "/collectors/"),
    "ledger_finding": (ledger_finding, "finance", "/finance/"),
}


@pytest.mark.parametrize("kind", KINDS)
def test_it_links_every_kind_of_alert_to_a_page_its_reader_opens(kind):
    fire, role, page = KINDS[kind]
    alert = fire()
    parts = urlsplit(alert.link)
    assert parts.path == page and not parts.path.startswith(("/api/", "/admin/"))
    assert resolve(parts.path).namespace in ("dashboards", "ledger", "")
    response = login_as(role).get(alert.link)
    assert response.status_code == 200, (kind, alert.link, response.content[:300])


def test_it_links_a_spike_to_the_overview_of_its_line_model_and_hour():
    alert = spike_by_model()
    response = login_as("engineer").get(alert.link)
    flt = response.context["flt"]
    assert (flt.start, flt.end, flt.model) == (HOUR, HOUR + timedelta(hours=1), "big-model")
    assert flt.dims == {}  # a rule over every line: the model on every line
    assert text_of(alert, "zh-hans").startswith("词元用量突增:模型 big-model\n")


def test_it_links_a_line_spike_to_its_line_and_the_page_keeps_the_hour_in_its_links():
    alert = spike()
    query = parse_qs(urlsplit(alert.link).query)
    assert query["dims.business_line"] == ["search"] and "T10:00" in query["from"][0]
    response = login_as("viewer").get(alert.link)
    flt = response.context["flt"]
    assert (flt.start, flt.end, flt.dims) == (HOUR, HOUR + timedelta(hours=1), {"business_line": "search"})
    again = login_as("viewer").get("/waste/" + flt.query()).context["flt"]
    assert (again.start, again.end) == (flt.start, flt.end)  # the drill-down's links keep the window


def test_a_channel_test_message_links_to_the_channels_page():
    from apps.alerts.services import channel_send_test

    notification = channel_send_test(channel=factories.channel("slack", url="http://127.0.0.1:9/"))
    assert notification.alert.link == "/alerts/channels/"
    assert login_as("engineer").get(notification.alert.link).status_code == 200


def text_of(alert: Alert, language: str) -> str:
    message = message_for(alert, language)
    return message.title + "\n" + markdown(message)


# Keys of figures, detectors and dims that must never reach a reader as they are.
RAW_KEYS = (
    "cache_hit",
    "business_line",
    "baseline_share",
    "baseline_rejected",
    "silent_minutes",
    "last_seen",
    "effective_share_low",
    "breaches",
    "_window",
    "_since",
    "_limits",
    "_contributors",
    "None",
)
# English words that are figure keys: none may stay in a Chinese message.
ZH_RAW = (*RAW_KEYS, "effective", "waste", "shadow", "spent", "forecast", "ratio", "factor", "threshold")


@pytest.mark.parametrize("kind", KINDS)
def test_it_writes_every_kind_in_english_and_chinese_without_raw_keys(kind, settings):
    settings.ACCOUNTING_TZ = "Asia/Shanghai"
    alert = KINDS[kind][0]()
    english, chinese = text_of(alert, "en"), text_of(alert, "zh-hans")
    for key in RAW_KEYS:
        assert key not in english, (key, english)
    for key in ZH_RAW:
        assert key not in chinese.replace(alert.business_line or "-", ""), (key, chinese)
    if "_window" in alert.figures:
        assert "(Asia/Shanghai, UTC+08:00)" in english and "时间窗口" in chinese
    assert "Severity" in english and "级别" in chinese


def test_a_spike_says_its_window_threshold_value_since_and_contributors(settings):
    settings.ACCOUNTING_TZ = "Asia/Shanghai"
    spike_alert = spike()
    english, chinese = text_of(spike_alert, "en"), text_of(spike_alert, "zh-hans")
    assert "**Window**: 2026-11-30 18:00 \u2013 19:00 (Asia/Shanghai, UTC+08:00)" in english
    assert "**Tokens in the window**: 60,000 tokens" in english
    assert "**Fires at**: 50,000 tokens" in english  # 2 x the median pro-rated to half the hour (25,000)
    assert "**Firing since**: 2026-11-30 18:30 (Asia/Shanghai, UTC+08:00)" in english
    assert "**Top contributors (model · feature · step)**: qwen2.5-7b-instruct 75.0%, llama-3-70b 25.0%" in english
    assert "**窗口内词元**: 60,000 词元" in chinese and "**触发阈值**: 50,000 词元" in chinese
    assert "**告警开始于**: 2026-11-30 18:30" in chinese and "主要来源" in chinese
    assert spike_alert.figures["_contributors"][0] == {
        "model": "qwen2.5-7b-instruct",
        "feature": "",
        "step": "",
        "share": 0.75,
    }


def test_health_names_its_breaches_and_thresholds_in_the_channels_language():
    alert = health()
    english, chinese = text_of(alert, "en"), text_of(alert, "zh-hans")
    assert "**Out of range**: Effective ratio, Waste rate, Cache hit rate" in english
    assert "**Effective ratio**: 60.0% (threshold ≥ 75%)" in english
    assert "**越界指标**: 有效词元率, 浪费率, 缓存命中率" in chinese
    assert "**浪费率**: 40.0% (阈值 ≤ 15%)" in chinese
    # which waste it is: the reasons' shares of the class
    assert "**Top reasons**: waste 40 %: failed 100 %" in english
    assert "**主要原因**: 浪费 40 %: failed 100 %" in chinese
    # the waste of the window, by where it came from
    assert "qwen2.5-7b-instruct · rank 75.0%, qwen2.5-7b-instruct · plan 25.0%" in english


def test_a_budget_says_money_with_its_currency_and_who_spent_it():
    alert = budget()
    english, chinese = text_of(alert, "en"), text_of(alert, "zh-hans")
    assert "**Spent this month**: 850.00 CNY" in english and "**Budget**: 1,000.00 CNY" in english
    assert "**Used**: 85% (threshold 80% / 100%)" in english
    assert "qwen2.5-7b-instruct · rank 70.6%, llama-3-70b 29.4%" in english
    assert "预算已用 80%:search" in chinese and "**本月已花费**: 850.00 CNY" in chinese


def test_a_month_end_finding_is_written_in_the_channels_language():
    alert = ledger_finding()
    chinese = text_of(alert, "zh-hans")
    assert "月末检查:2026-10 有效词元占比偏低 search" in chinese
    assert "2026-10 search 的有效词元仅占实际计算词元的 62.0%" in chinese
    assert "Effective tokens were 62.0% of search's computed tokens in 2026-10" in text_of(alert, "en")


def test_a_broadcast_is_sent_in_the_channels_language_when_the_caller_gave_it():
    from apps.alerts.services import broadcast

    broadcast(
        title="Token audit 2026-11",
        body_markdown="**Savings**: 1,234 CNY",
        link="/audits/2026-11/",
        business_line=None,
        severity="warning",
        kind="audit",
        translations={"zh-hans": ("Token 审计 2026-11", "**可节省**: 1,234 CNY")},
    )  # no channel: nothing is queued, the alert is still written
    alert = Alert.objects.get(kind="audit")
    assert text_of(alert, "zh-hans").startswith("Token 审计 2026-11\n**可节省**: 1,234 CNY")
    assert text_of(alert, "en").startswith("Token audit 2026-11\n**Savings**: 1,234 CNY")


def test_a_spike_without_a_baseline_yet_says_no_ratio_and_keeps_its_order():
    rule = factories.alert_rule("spike", params={"by": "business_line"})
    usage(HOUR, 60_000)  # a new line: no week before
    [fired] = rule_evaluate(rule_id=rule.id, now=NOW)
    alert = Alert.objects.get(id=fired.id)  # as delivery reads it back (jsonb keeps no key order)
    english = text_of(alert, "en")
    assert "None" not in english and "Ratio to baseline" not in english
    labels = [line.split("**")[1] for line in english.splitlines()[1:]]
    assert labels[:4] == ["Window", "Tokens in the window", "Fires at", "Baseline (median)"]
    assert labels[-3:] == ["Top contributors (model · feature · step)", "Firing since", "Severity"]


def test_the_pages_take_hour_windows_and_refuse_a_bad_one():
    viewer = login_as("viewer")
    flt = viewer.get("/overview/?from=2026-11-30T18:00%2B08:00&to=2026-11-30T20:00%2B08:00").context["flt"]
    assert (flt.start, flt.end) == (HOUR, HOUR + timedelta(hours=2))
    typed = viewer.get("/overview/?from=2026-11-30T18:00+08:00&to=2026-11-30T19:00+08:00").context["flt"]
    assert (typed.start, typed.end) == (HOUR, HOUR + timedelta(hours=1))  # a "+" typed in, read as a space
    assert viewer.get("/overview/?from=2026-11-30T18:00&to=yesterday").status_code == 404
    assert viewer.get("/overview/?from=2026-11-30T18:00&to=2026-11-30T17:00").status_code == 404
    days = viewer.get("/overview/?from=2026-11-29&to=2026-11-30").context["flt"]
    assert days.params()["to"] == "2026-11-30"  # days stay days


def test_a_callers_and_a_teams_budget_are_named_in_the_channels_language():
    from apps.plans.models import Budget

    month = NOW.date().replace(day=1)
    Budget.objects.create(business_line="search", caller="search-app", month=month, currency="CNY", amount=Decimal(500))
    Budget.objects.create(business_line="search", team="web", month=month, currency="CNY", amount=Decimal(100))
    factories.hourly_cost(hour=NOW - timedelta(days=2), cost="600", dims={**LINE, "caller": "search-app"})
    factories.hourly_cost(hour=NOW - timedelta(days=1), cost="200", dims={**LINE, "team": "web"})
    fired = {a.subject: a for a in rule_evaluate(rule_id=factories.alert_rule("budget").id, now=NOW)}

    caller, team = fired["search caller=search-app"], fired["search/web"]
    assert text_of(caller, "en").startswith("Budget exceeded: search · caller search-app\n")
    assert text_of(caller, "zh-hans").startswith("预算已超支:search · 调用方 search-app\n")
    assert text_of(team, "zh-hans").startswith("预算已超支:search · 团队 web\n")
    assert "caller=" not in text_of(caller, "zh-hans") + text_of(caller, "en")
