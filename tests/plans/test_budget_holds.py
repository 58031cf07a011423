"""Hard budgets on the platform: the state the edge polls (GET /api/v1/budgets/state, collector
keys only, each key its own lines), its figures from ingested records, finance's override from
the budgets page (audit-logged), and the state on /metrics and the page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from apps.auditlog.models import AuditEntry
from apps.common.buckets import month_end, month_of
from apps.metrics.collector import platform_collector
from apps.plans.budget_state import budget_states
from apps.plans.models import Budget, BudgetOverride
from apps.plans.planning import budget_set
from tests import factories
from tests.conftest import Collector

pytestmark = pytest.mark.books_in("UTC")  # its days and months are UTC's

STATE = "/api/v1/budgets/state"


def spend(collector: Collector, line: str, tokens: int, team: str = "web", count: int = 1, caller: str = "") -> None:
    dims = {"business_line": line, "team": team} | ({"caller": caller} if caller else {})
    records = [
        factories.record(**{"dims": dims, "tokens": {"prompt": tokens - 10, "completion": 10}}) for _ in range(count)
    ]
    response = collector.send(records)
    assert response.status_code == 200 and response.json()["accepted"] == count, response.content


def hard(line: str, tokens: int, team: str = "", caller: str = "") -> Budget:
    month = month_of(datetime.now(UTC))
    return budget_set(business_line=line, team=team, caller=caller, month=month, tokens=tokens, hard=True)


def state_of(client: Client, secret: str) -> dict[str, Any]:
    response = client.get(STATE, HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert response.status_code == 200, response.content
    return {(b["business_line"], b["team"], b["caller"]): b for b in response.json()["budgets"]}


@pytest.mark.parametrize("authorization", [None, "Bearer cpk_not-a-key", "Basic dGVzdGVyOnB3"])
def test_it_refuses_the_state_without_a_collector_key(db: None, client: Client, authorization: str | None) -> None:
    hard("search", 100)
    headers = {"HTTP_AUTHORIZATION": authorization} if authorization else {}

    response = client.get(STATE, **headers)

    assert response.status_code in (401, 403)
    assert "budgets" not in response.json()


def test_it_refuses_the_state_to_a_logged_in_person(db: None, client: Client) -> None:
    client.force_login(factories.finance_user())

    assert client.get(STATE).status_code in (401, 403)


def test_it_tells_a_key_only_the_budgets_of_its_lines(db: None, client: Client) -> None:
    hard("search", 100)
    hard("ads", 100)
    search_only = factories.collector_key(business_lines=["search"]).secret
    every_line = factories.collector_key().secret

    assert set(state_of(client, search_only)) == {("search", "", "")}
    assert set(state_of(client, every_line)) == {("search", "", ""), ("ads", "", "")}


def test_a_hard_budget_holds_once_its_line_used_it_and_not_before(
    db: None, client: Client, collector: Collector
) -> None:
    hard("search", 1000)
    budget_set(business_line="ads", month=month_of(datetime.now(UTC)), tokens=1000)  # soft: never holds
    spend(collector, "search", 400, count=2)
    spend(collector, "ads", 600, count=2)

    before = state_of(client, collector.secret)
    spend(collector, "search", 300)
    after = state_of(client, collector.secret)

    assert (before[("search", "", "")]["used_tokens"], before[("search", "", "")]["holds"]) == (800, False)
    assert (after[("search", "", "")]["used_tokens"], after[("search", "", "")]["holds"]) == (1100, True)
    assert after[("ads", "", "")]["spent"] and not after[("ads", "", "")]["holds"]
    resets = month_end(month_of(datetime.now(UTC)))
    assert datetime.fromisoformat(after[("search", "", "")]["resets_at"]) == resets


def test_a_team_budget_counts_its_team_only(db: None, client: Client, collector: Collector) -> None:
    hard("search", 500, team="web")
    hard("search", 5000)
    spend(collector, "search", 400, team="web")
    spend(collector, "search", 900, team="app")

    state = state_of(client, collector.secret)

    assert state[("search", "web", "")]["used_tokens"] == 400 and not state[("search", "web", "")]["holds"]
    assert state[("search", "", "")]["used_tokens"] == 1300
    spend(collector, "search", 200, team="web")
    assert state_of(client, collector.secret)[("search", "web", "")]["holds"]


def test_a_caller_budget_counts_that_callers_requests_only(db: None, client: Client, collector: Collector) -> None:
    hard("search", 500, caller="search-web")
    hard("search", 300, team="web", caller="search-app")
    hard("search", 5000)
    spend(collector, "search", 400, caller="search-web")
    spend(collector, "search", 250, team="web", caller="search-app")
    spend(collector, "search", 250, team="app", caller="search-app")  # another team: not that budget's
    spend(collector, "search", 900)  # the map's default caller: no caller dim
    dims = {"business_line": "search", "caller": "search-web"}
    rejected = factories.record(dims=dims, outcome={"status": "rejected"}, tokens={"prompt": 0, "completion": 0})
    assert collector.send([rejected]).json()["accepted"] == 1

    state = state_of(client, collector.secret)

    web, app, line = (
        state[("search", "", "search-web")],
        state[("search", "web", "search-app")],
        state[("search", "", "")],
    )
    assert (web["used_tokens"], web["holds"]) == (400, False)
    assert (app["used_tokens"], line["used_tokens"]) == (250, 1800)
    spend(collector, "search", 200, caller="search-web")
    after = state_of(client, collector.secret)
    assert after[("search", "", "search-web")]["holds"]
    assert not after[("search", "web", "search-app")]["holds"] and not after[("search", "", "")]["holds"]
    states = {s.scope: s for s in budget_states(now=datetime.now(UTC))}
    assert (states["search caller=search-web"].refused, states["search/web caller=search-app"].refused) == (1, 0)
    assert states["search"].refused == 1


def test_a_caller_budget_sums_that_callers_priced_hours(db: None, client: Client) -> None:
    now = datetime.now(UTC)
    month, hour = month_of(now), now.replace(minute=0, second=0, microsecond=0)
    for caller in ("search-web", "search-app"):
        budget_set(
            business_line="search", caller=caller, month=month, amount=Decimal("10.00"), currency="CNY", hard=True
        )
    budget_set(business_line="search", month=month, amount=Decimal("100.00"), currency="CNY", hard=True)
    for caller, cost in (("search-web", "12.5"), ("search-app", "3"), ("", "1.25")):
        dims = {"business_line": "search"} | ({"caller": caller} if caller else {})
        factories.hourly_cost(hour=hour, dims=dims, cost=cost, currency="CNY")

    state = state_of(client, factories.collector_key().secret)

    web, app, line = state[("search", "", "search-web")], state[("search", "", "search-app")], state[("search", "", "")]
    assert (web["used_amount"], web["holds"], app["used_amount"], app["holds"]) == ("12.50", True, "3.00", False)
    assert (line["used_amount"], line["holds"]) == ("16.75", False)


def test_finance_sets_a_caller_budget_next_to_the_lines_own_through_the_api(db: None, client: Client) -> None:
    client.force_login(factories.finance_user())
    month = f"{month_of(datetime.now(UTC)):%Y-%m}"
    url = "/api/v1/ledger/budgets"

    mine = client.put(url, {"business_line": "search", "month": month, "tokens": 100, "caller": "search-web",
                            "hard": True}, content_type="application/json")  # fmt: skip
    line = client.put(url, {"business_line": "search", "month": month, "tokens": 1000}, content_type="application/json")
    again = client.put(url, {"business_line": "search", "month": month, "tokens": 200, "caller": "search-web"},
                       content_type="application/json")  # fmt: skip

    assert (mine.status_code, line.status_code, again.status_code) == (200, 200, 200), mine.content
    assert (mine.json()["caller"], line.json()["caller"]) == ("search-web", "")
    stored = {(b.caller, b.tokens, b.hard) for b in Budget.objects.all()}
    assert stored == {("search-web", 200, True), ("", 1000, False)}
    rows = client.get(f"{url}?period={month}").json()["rows"]
    assert sorted(r["caller"] for r in rows) == ["", "search-web"]


def test_a_money_budget_holds_on_the_priced_hours(db: None, client: Client) -> None:
    now = datetime.now(UTC)
    budget_set(business_line="search", month=month_of(now), amount=Decimal("10.00"), currency="CNY", hard=True)
    secret = factories.collector_key().secret
    factories.hourly_cost(hour=now.replace(minute=0, second=0, microsecond=0), dims={"business_line": "search"},
                          cost="12.5", currency="CNY")  # fmt: skip

    state = state_of(client, secret)[("search", "", "")]

    assert (state["used_amount"], state["amount"], state["holds"]) == ("12.50", "10.00", True)


def grant(client: Client, budget: Budget, until: datetime, reason: str = "launch week") -> Any:
    local = until.astimezone(UTC).strftime("%Y-%m-%dT%H:%M")  # the tests' accounting zone is UTC
    return client.post(f"/budgets/{budget.id}/override/", {"until": local, "reason": reason})


def test_a_finance_override_lets_a_spent_line_be_served_and_is_audit_logged(
    db: None, client: Client, collector: Collector
) -> None:
    budget = hard("search", 100)
    spend(collector, "search", 150)
    assert state_of(client, collector.secret)[("search", "", "")]["holds"]
    finance = factories.finance_user()
    client.force_login(finance)
    until = (datetime.now(UTC) + timedelta(hours=2)).replace(second=0, microsecond=0)
    until = min(until, month_end(budget.month))

    response = grant(client, budget, until)

    assert response.status_code == 302
    state = state_of(client, collector.secret)[("search", "", "")]
    assert state["spent"] and not state["holds"]
    assert datetime.fromisoformat(state["override_until"]) == until
    override = BudgetOverride.objects.get(budget=budget)
    entry = AuditEntry.objects.get(model="plans.BudgetOverride", object_id=str(override.pk))
    assert (entry.action, entry.actor, entry.source) == ("create", finance, "web")
    assert entry.after["reason"] == "launch week" and entry.after["budget_id"] == budget.id


def test_it_refuses_an_override_without_a_reason_or_in_the_past(db: None, client: Client) -> None:
    budget = hard("search", 100)
    client.force_login(factories.finance_user())

    grant(client, budget, datetime.now(UTC) + timedelta(minutes=30), reason=" ")
    grant(client, budget, datetime.now(UTC) - timedelta(hours=1))

    assert not BudgetOverride.objects.exists()


def test_it_lets_no_engineer_grant_an_override(db: None, client: Client) -> None:
    budget = hard("search", 100)
    client.force_login(factories.finance_user("eng", role="engineer"))

    response = grant(client, budget, datetime.now(UTC) + timedelta(minutes=30))

    assert response.status_code == 403 and not BudgetOverride.objects.exists()


def test_the_budgets_page_shows_what_each_budget_used_its_kind_state_and_rejections(
    db: None, client: Client, collector: Collector
) -> None:
    hard("search", 100)
    budget_set(business_line="ads", month=month_of(datetime.now(UTC)), tokens=1000)
    spend(collector, "search", 150)
    rejected = factories.record(**{"dims": {"business_line": "search"}, "outcome": {"status": "rejected"},
                                   "tokens": {"prompt": 0, "completion": 0}})  # fmt: skip
    assert collector.send([rejected]).json()["accepted"] == 1
    client.force_login(factories.finance_user())

    page = client.get("/budgets/").content.decode()

    assert 'id="budget-holds"' in page
    rows = page[page.index('id="holds"') :].split("</table>")[0].split("<tr ")
    (search,) = [row for row in rows if '<td class="text">search</td>' in row]
    assert 'data-state="refusing"' in search and ">hard<" in search and ">150<" in search and ">1<" in search
    assert "Grant override" in search


def test_metrics_show_each_budget_its_use_and_whether_it_holds(db: None, client: Client, collector: Collector) -> None:
    hard("search", 100)
    hard("search", 1000, caller="search-web")
    spend(collector, "search", 150)
    spend(collector, "search", 40, caller="search-web")
    platform_collector.clear()

    text = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()

    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(text)
               for s in f.samples}  # fmt: skip
    scope = (("business_line", "search"), ("caller", ""), ("team", ""))
    assert samples[("costplatform_budget_holding", scope)] == 1
    used = (("business_line", "search"), ("caller", ""), ("kind", "hard"), ("team", ""), ("unit", "tokens"))
    assert samples[("costplatform_budget_used", used)] == 190
    assert samples[("costplatform_budget_limit", used)] == 100
    caller = (("business_line", "search"), ("caller", "search-web"), ("team", ""))
    assert samples[("costplatform_budget_holding", caller)] == 0
    caller_used = (("business_line", "search"), ("caller", "search-web"), ("kind", "hard"), ("team", ""),
                   ("unit", "tokens"))  # fmt: skip
    assert (
        samples[("costplatform_budget_used", caller_used)],
        samples[("costplatform_budget_limit", caller_used)],
    ) == (
        40,
        1000,
    )


def test_copying_last_months_budgets_keeps_a_hard_budget_hard(db: None) -> None:
    from apps.common.buckets import next_month
    from apps.plans.planning import plans_copy_previous

    month = month_of(datetime.now(UTC))
    budget_set(business_line="search", month=month, tokens=100, hard=True)
    budget_set(business_line="ads", month=month, tokens=100)

    plans_copy_previous(month=next_month(month))

    copied = {b.business_line: b.hard for b in Budget.objects.filter(month=next_month(month))}
    assert copied == {"search": True, "ads": False}


def test_a_rollup_dims_setting_without_caller_is_warned_of(settings: Any) -> None:
    from apps.plans.checks import budget_scope_dims_check

    assert budget_scope_dims_check() == []
    settings.ROLLUP_DIMS = ["business_line", "team", "feature"]

    (warning,) = budget_scope_dims_check()

    assert warning.id == "plans.W001" and "lacks caller" in warning.msg
