"""Evaluation over the rollups: the state machine (fire once, deduplicate, resolve, cooldown),
muting, budget levels, and the sources of each detector."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from apps.accounts.models import CollectorKey
from apps.alerts.evaluation import rule_evaluate
from apps.alerts.models import Alert, AlertState, Notification
from apps.ingest.models import HourlyUsage, Rejection, ServedModel
from tests import factories

pytestmark = [pytest.mark.django_db, pytest.mark.books_in("UTC")]
NOW = datetime(2026, 11, 30, 10, 30, tzinfo=UTC)
HOUR = NOW.replace(minute=0)


def usage(hour: datetime, tokens: int, business_line: str = "search", model: str = "qwen2.5-7b-instruct") -> None:
    key = CollectorKey.objects.filter(name="vllm-test").first() or factories.collector_key("vllm-test").key
    dims = factories.dimset({"business_line": business_line} if business_line else {})
    row, _ = HourlyUsage.objects.get_or_create(
        hour=hour,
        source_id=key.id,
        model=ServedModel.objects.get_or_create(name=model, version="")[0],
        dims=dims,
        endpoint=1,
        status=0,
    )
    HourlyUsage.objects.filter(id=row.id).update(prompt=tokens - tokens // 4, completion=tokens // 4, prompt_cached=0)


def weekly_baseline(tokens: int = 50_000, **kw) -> None:
    for weeks in range(1, 5):
        usage(HOUR - timedelta(weeks=weeks), tokens, **kw)


def test_it_fires_once_deduplicates_and_resolves(receiver):
    factories.channel("slack", url=receiver.url())
    rule = factories.alert_rule("spike", params={"by": "business_line"})
    weekly_baseline()
    usage(HOUR, 60_000)  # half an hour gone: 2.4x the pro-rated median

    [fired] = rule_evaluate(rule_id=rule.id, now=NOW)
    assert (fired.status, fired.subject, fired.figures["ratio"]) == ("firing", "search", 2.4)
    assert "dims.business_line=search" in fired.link
    assert Notification.objects.filter(alert=fired).count() == 1
    assert rule_evaluate(rule_id=rule.id, now=NOW + timedelta(minutes=1)) == []  # still firing: deduplicated

    usage(HOUR, 20_000)
    [resolved] = rule_evaluate(rule_id=rule.id, now=NOW + timedelta(minutes=2))
    assert resolved.status == "resolved"
    assert AlertState.objects.get(rule=rule).status == "resolved"


def test_it_waits_for_the_cooldown_before_firing_again(receiver):
    rule = factories.alert_rule("spike", cooldown=timedelta(minutes=20))
    weekly_baseline()
    usage(HOUR, 60_000)
    rule_evaluate(rule_id=rule.id, now=NOW)
    usage(HOUR, 20_000)
    rule_evaluate(rule_id=rule.id, now=NOW + timedelta(minutes=1))
    usage(HOUR, 90_000)
    assert rule_evaluate(rule_id=rule.id, now=NOW + timedelta(minutes=5)) == []  # cooling down
    assert rule_evaluate(rule_id=rule.id, now=NOW + timedelta(minutes=20)) == []
    [again] = rule_evaluate(rule_id=rule.id, now=NOW + timedelta(minutes=22))
    assert again.status == "firing" and AlertState.objects.get(rule=rule).episode == 2


def test_it_fires_per_model_too():
    rule = factories.alert_rule("spike", params={"by": "model"})
    weekly_baseline(model="big-model")
    weekly_baseline(business_line="ads", model="big-model")
    usage(HOUR, 70_000, model="big-model")
    usage(HOUR, 70_000, business_line="ads", model="big-model")
    [fired] = rule_evaluate(rule_id=rule.id, now=NOW)
    assert fired.subject == "model big-model" and "model=big-model" in fired.link


def test_it_writes_but_sends_nothing_for_a_muted_rule(receiver):
    factories.channel("slack", url=receiver.url())
    rule = factories.alert_rule("spike", muted_until=NOW + timedelta(hours=1))
    weekly_baseline()
    usage(HOUR, 60_000)
    [muted] = rule_evaluate(rule_id=rule.id, now=NOW)
    assert muted.suppressed == "muted" and not muted.notifications.exists()


def test_it_sends_again_when_a_budget_level_rises(receiver):
    from apps.plans.models import Budget

    factories.channel("slack", url=receiver.url())
    Budget.objects.create(business_line="search", month=NOW.date().replace(day=1), currency="CNY", amount=Decimal(1000))
    factories.hourly_cost(hour=NOW - timedelta(days=2), cost="850", dims={"business_line": "search"})
    rule = factories.alert_rule("budget")
    [warned] = rule_evaluate(rule_id=rule.id, now=NOW)
    assert (warned.level, warned.severity) == ("80", 20)
    factories.hourly_cost(hour=NOW - timedelta(days=1), cost="200", dims={"business_line": "search"})
    [exceeded] = rule_evaluate(rule_id=rule.id, now=NOW)
    assert (exceeded.level, exceeded.severity) == ("100", 30)
    assert rule_evaluate(rule_id=rule.id, now=NOW) == []


def test_a_teams_and_a_callers_budget_alert_on_their_own_use():
    from apps.plans.models import Budget

    month = NOW.date().replace(day=1)
    Budget.objects.create(business_line="search", month=month, currency="CNY", amount=Decimal(10_000))
    Budget.objects.create(business_line="search", team="web", month=month, currency="CNY", amount=Decimal(1000))
    Budget.objects.create(business_line="search", caller="search-app", month=month, tokens=10_000)
    factories.hourly_cost(hour=NOW - timedelta(days=2), cost="850", dims={"business_line": "search", "team": "web"})
    batch = {"business_line": "search", "team": "batch"}
    factories.hourly_cost(hour=NOW - timedelta(days=2), cost="900", model="llama-3-70b", dims=batch)
    usage_dims = {"business_line": "search", "caller": "search-app"}
    factories.hourly_cost(hour=NOW - timedelta(days=1), cost="1", dims={"business_line": "search", "caller": "other"})
    key = factories.collector_key("vllm-budget").key
    model = ServedModel.objects.get_or_create(name="qwen2.5-7b-instruct", version="")[0]
    HourlyUsage.objects.create(
        hour=HOUR, source_id=key.id, model=model, dims=factories.dimset(usage_dims), endpoint=1, status=0,
        prompt=9000, completion=1200, prompt_cached=0,
    )  # fmt: skip
    rule = factories.alert_rule("budget", params={"forecast": False})

    fired = {a.subject: a for a in rule_evaluate(rule_id=rule.id, now=NOW)}

    assert set(fired) == {"search/web", "search caller=search-app tokens"}  # the line: 1,751 of 10,000
    assert fired["search/web"].level == "80" and fired["search/web"].business_line == "search"
    # Who spent it: the team's own records, not the line's (llama-3-70b is the batch team's).
    assert [c["model"] for c in fired["search/web"].figures["_contributors"]] == ["qwen2.5-7b-instruct"]
    assert fired["search caller=search-app tokens"].level == "100"


def test_it_fires_on_three_days_of_rising_unit_cost():
    rule = factories.alert_rule("trend")
    for day, cost in enumerate(["1.0", "1.1", "1.2", "1.3"]):
        hour = NOW.replace(hour=3) - timedelta(days=4 - day)
        factories.hourly_cost(hour=hour, cost=cost, tokens=1000, dims={"business_line": "search"})
    [fired] = rule_evaluate(rule_id=rule.id, now=NOW)
    assert fired.subject == "search CNY" and fired.figures["days"] == [1.0, 1.1, 1.2, 1.3]


def test_it_reads_health_ratios_from_the_class_rollup():
    rule = factories.alert_rule("health", params={"min_tokens": 1000})
    dims = {"business_line": "search"}
    factories.dimset(dims)
    factories.hourly_class(hour=HOUR, tokens=6000, reason="effective.input", dims=dims)
    factories.hourly_class(hour=HOUR, tokens=4000, reason="waste.failed", dims=dims)
    usage(HOUR, 8000)
    [fired] = rule_evaluate(rule_id=rule.id, now=NOW)
    assert fired.figures["breaches"] == ["effective", "waste", "cache_hit"]
    assert fired.figures["reasons"] == [{"class": "waste", "share": 0.4, "top": [{"reason": "failed", "share": 1.0}]}]


def test_it_judges_each_line_by_its_row_of_the_thresholds_table():
    from apps.classification.models import HealthThreshold

    rule = factories.alert_rule("health", params={"min_tokens": 1000})
    for line, effective, waste in (("search", 7000, 3000), ("batch", 7000, 3000)):
        dims = {"business_line": line}
        factories.dimset(dims)
        factories.hourly_class(hour=HOUR, tokens=effective, reason="effective.input", dims=dims)
        factories.hourly_class(hour=HOUR, tokens=waste, reason="waste.timeout", dims=dims)
        usage(HOUR, 8000, business_line=line)  # nothing from the cache
    HealthThreshold.objects.create(business_line="batch", effective_min="0.65", waste_max="0.35", cache_hit_min="0")
    fired = rule_evaluate(rule_id=rule.id, now=NOW)
    assert [(a.subject, a.figures["breaches"]) for a in fired] == [("search", ["effective", "waste", "cache_hit"])]
    assert fired[0].figures["_limits"]["effective"] == "≥ 75%"


def test_it_fires_when_unattributed_tokens_grow():
    rule = factories.alert_rule("unattributed", params={"window_hours": 24, "windows": 7})
    for day in range(1, 8):
        usage(HOUR - timedelta(days=day), 95_000)
        usage(HOUR - timedelta(days=day), 5_000, business_line="")
    usage(HOUR, 80_000)
    usage(HOUR, 20_000, business_line="")
    [fired] = rule_evaluate(rule_id=rule.id, now=NOW)
    assert (fired.figures["share"], fired.figures["baseline_share"]) == (0.2, 0.05)
    assert fired.figures["_window"] == [(NOW - timedelta(days=1)).isoformat(), NOW.isoformat()]


def test_it_evaluates_a_rule_only_when_its_interval_has_passed():
    from apps.alerts.evaluation import rules_due
    from apps.alerts.models import Rule

    Rule.objects.all().delete()
    fast = factories.alert_rule("spike")
    slow = factories.alert_rule("trend", every=timedelta(hours=1))
    assert rules_due(now=NOW) == [fast.id, slow.id]
    rule_evaluate(rule_id=fast.id, now=NOW)
    rule_evaluate(rule_id=slow.id, now=NOW)
    assert rules_due(now=NOW + timedelta(seconds=30)) == [fast.id]
    assert rules_due(now=NOW + timedelta(hours=1)) == [fast.id, slow.id]


def test_it_fires_when_rejections_grow():
    rule = factories.alert_rule("dead_letters")
    key = factories.collector_key("vllm-a").key
    Rejection.objects.bulk_create([Rejection(source=key, raw="{}", errors=["bad"]) for _ in range(25)])
    [fired] = rule_evaluate(rule_id=rule.id)
    assert fired.figures["rejected"] == 25


def test_it_fires_for_a_silent_collector_and_resolves_when_it_reports():
    rule = factories.alert_rule("collector_silent")
    key = factories.collector_key("vllm-b").key
    CollectorKey.objects.filter(id=key.id).update(last_seen_at=NOW - timedelta(hours=2))
    [fired] = rule_evaluate(rule_id=rule.id, now=NOW)
    assert fired.subject == "vllm-b"
    CollectorKey.objects.filter(id=key.id).update(last_seen_at=NOW)
    [resolved] = rule_evaluate(rule_id=rule.id, now=NOW + timedelta(minutes=1))
    assert resolved.status == "resolved"


def test_it_delivers_each_ledger_finding_once(receiver):
    from apps.ledger.models import Finding

    factories.channel("slack", url=receiver.url())
    finding = Finding.objects.create(
        kind="effective_share_low",
        action="notify_product_owner",
        period=NOW.date().replace(day=1, month=10),
        business_line="search",
        message="Effective share 62 % < 70 %",
    )
    rule = factories.alert_rule("ledger_finding")
    [event] = rule_evaluate(rule_id=rule.id, now=NOW)
    assert event.status == "event" and event.business_line == "search"
    finding.refresh_from_db()
    assert finding.delivered_at == NOW
    assert rule_evaluate(rule_id=rule.id, now=NOW) == []
    assert Alert.objects.count() == 1


def usage_of(hour: datetime, tokens: int, dims: dict[str, str]) -> None:
    """`usage` of records carrying more dims than the line (a caller's, a user's)."""
    key = CollectorKey.objects.filter(name="vllm-test").first() or factories.collector_key("vllm-test").key
    row, _ = HourlyUsage.objects.get_or_create(
        hour=hour,
        source_id=key.id,
        model=ServedModel.objects.get_or_create(name="qwen2.5-7b-instruct", version="")[0],
        dims=factories.dimset(dims),
        endpoint=1,
        status=0,
    )
    HourlyUsage.objects.filter(id=row.id).update(prompt=tokens - tokens // 4, completion=tokens // 4, prompt_cached=0)


def test_it_fires_on_one_caller_whose_use_spikes_while_its_line_does_not(receiver):
    line = factories.alert_rule("spike", name="by line", params={"by": "business_line"})
    callers = factories.alert_rule("spike", name="by caller", params={"by": "caller", "min_tokens": 1_000})
    for weeks in range(1, 5):
        usage_of(HOUR - timedelta(weeks=weeks), 200_000, {"business_line": "search", "caller": "batch"})
        usage_of(HOUR - timedelta(weeks=weeks), 4_000, {"business_line": "search", "caller": "web-app"})
    usage_of(HOUR, 90_000, {"business_line": "search", "caller": "batch"})  # on its pace
    usage_of(HOUR, 12_000, {"business_line": "search", "caller": "web-app"})  # 6x its pro-rated median

    assert rule_evaluate(rule_id=line.id, now=NOW) == []  # the line as a whole is quiet
    [fired] = rule_evaluate(rule_id=callers.id, now=NOW)
    assert fired.subject == "caller web-app (search)" and fired.figures["ratio"] == 6.0
    assert "dims.caller=web-app" in fired.link and "dims.business_line=search" in fired.link
    state = AlertState.objects.get(rule=callers)
    assert state.subject == fired.subject and state.status == "firing"


def test_a_dim_the_rollup_does_not_keep_is_refused_in_words(settings):
    rule = factories.alert_rule("spike", params={"by": "user_id"})
    with pytest.raises(ValueError, match="not by 'user_id'"):
        rule_evaluate(rule_id=rule.id, now=NOW)
    rule.refresh_from_db()  # kept on the rule, where the admin shows it
    assert "not by 'user_id'" in rule.last_error and "COSTPLATFORM_ROLLUP_DIMS" in rule.last_error

    settings.ROLLUP_DIMS = [*settings.ROLLUP_DIMS, "user_id"]  # the operator rolls the user id up
    usage_of(HOUR, 50_000, {"business_line": "search", "user_id": "u-42"})
    [fired] = rule_evaluate(rule_id=rule.id, now=NOW)  # no history: a new subject fires
    assert fired.subject == "user_id u-42 (search)" and "dims.user_id=u-42" in fired.link


def test_the_rule_form_refuses_a_spike_by_a_dim_the_rollup_does_not_keep():
    from apps.alerts.admin import RuleForm

    fields = {"name": "spikes", "detector": "spike", "severity": 20, "cooldown": "01:00:00", "every": "00:01:00"}
    refused = RuleForm(data={**fields, "params": '{"by": "user_id"}'})
    assert not refused.is_valid() and "not by 'user_id'" in refused.errors["params"][0]
    accepted = RuleForm(data={**fields, "params": '{"by": "caller"}', "enabled": "on"})
    assert accepted.is_valid(), accepted.errors


def test_a_users_budget_alerts_at_80_percent_named_by_its_scope_and_linked_to_its_records(receiver, settings):
    from urllib.parse import parse_qs, urlsplit

    from apps.alerts.messages import message_for
    from apps.plans.models import Budget

    settings.ROLLUP_DIMS = [*settings.ROLLUP_DIMS, "user"]  # the operator rolls the user id up
    factories.channel("slack", url=receiver.url())
    month = NOW.date().replace(day=1)
    Budget.objects.create(business_line="search", dim="user", value="u-42", month=month, tokens=10_000, hard=True)
    Budget.objects.create(business_line="search", month=month, tokens=100_000)  # the line: 17,500 of it
    usage_of(HOUR - timedelta(days=1), 8_500, {"business_line": "search", "user": "u-42"})
    usage_of(HOUR - timedelta(days=1), 9_000, {"business_line": "search", "user": "u-7"})
    strict = factories.alert_rule("budget", name="at 90 %", params={"forecast": False, "warn_at": 0.9})
    muted = factories.alert_rule(
        "budget", name="muted", params={"forecast": False}, muted_until=NOW + timedelta(hours=1)
    )
    rule = factories.alert_rule("budget", params={"forecast": False})

    [fired] = rule_evaluate(rule_id=rule.id, now=NOW)

    assert (fired.subject, fired.level, fired.business_line) == ("search user=u-42 tokens", "80", "search")
    link = urlsplit(fired.link)
    query = parse_qs(link.query)
    assert (link.path, query["dims.user"], query["dims.business_line"]) == ("/overview/", ["u-42"], ["search"])
    assert (query["from"], query["to"]) == (["2026-11-01T00:00:00+00:00"], ["2026-11-30T11:00:00+00:00"])
    assert message_for(fired, "en").title.endswith("search · user u-42 (tokens)")
    assert Notification.objects.filter(alert=fired).count() == 1
    assert rule_evaluate(rule_id=strict.id, now=NOW) == []  # 85 % is under its 90 %
    [quiet] = rule_evaluate(rule_id=muted.id, now=NOW)
    assert quiet.suppressed == "muted" and not quiet.notifications.exists()
