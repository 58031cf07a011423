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


def user_spend(collector: Collector, tokens: int, user: str, team: str = "web", status: str = "ok") -> None:
    dims = {"business_line": "search", "team": team, "user": user}
    counts = {"prompt": tokens - 10, "completion": 10} if tokens else {"prompt": 0, "completion": 0}
    record = factories.record(dims=dims, tokens=counts, outcome={"status": status})
    assert collector.send([record]).json()["accepted"] == 1


def dim_state_of(client: Client, secret: str) -> dict[tuple[str, ...], dict[str, Any]]:
    response = client.get(STATE, HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert response.status_code == 200, response.content
    keys = ("business_line", "team", "caller", "dim", "value")
    return {tuple(b[k] for k in keys): b for b in response.json()["budgets"]}


def test_finance_is_refused_a_budget_of_a_dim_the_rollup_does_not_keep(db: None, client: Client, settings: Any) -> None:
    client.force_login(factories.finance_user())
    month = f"{month_of(datetime.now(UTC)):%Y-%m}"
    body = {"business_line": "search", "month": month, "dim": "user", "value": "u-42", "tokens": 100000, "hard": True}

    def put(**fields: Any) -> Any:
        return client.put("/api/v1/ledger/budgets", body | fields, content_type="application/json")

    unkept, own_field = put(), put(dim="team", value="web")
    settings.ROLLUP_DIMS = [*settings.ROLLUP_DIMS, "user"]  # the operator rolls the user id up
    no_value, kept = put(value=""), put()

    assert (unkept.status_code, own_field.status_code, no_value.status_code) == (400, 400, 400)
    (refusal,) = unkept.json()["budget"]
    assert "not of 'user'" in refusal and "COSTPLATFORM_ROLLUP_DIMS" in refusal, refusal
    assert "team has a field of its own" in own_field.json()["budget"][0]
    assert "needs its value" in no_value.json()["budget"][0]
    assert kept.status_code == 200, kept.content
    assert (kept.json()["dim"], kept.json()["value"], kept.json()["hard"]) == ("user", "u-42", True)
    (budget,) = Budget.objects.all()
    assert (budget.dim, budget.value, budget.tokens) == ("user", "u-42", 100000)
    assert str(budget) == f"search user=u-42 {month}"


def test_the_admin_refuses_a_budget_of_a_dim_the_rollup_does_not_keep(db: None, client: Client, settings: Any) -> None:
    admin = factories.finance_user("staff-admin", role="admin")
    admin.is_staff = True
    admin.save()
    client.force_login(admin)
    month = f"{month_of(datetime.now(UTC)):%Y-%m-%d}"
    form = {"business_line": "search", "month": month, "tokens": "100000", "dim": "user", "value": "u-42", "hard": "on"}

    refused = client.post("/admin/plans/budget/add/", form)
    settings.ROLLUP_DIMS = [*settings.ROLLUP_DIMS, "user"]
    added = client.post("/admin/plans/budget/add/", form)

    assert refused.status_code == 200 and "not of &#x27;user&#x27;" in refused.content.decode()
    assert added.status_code == 302, added.content.decode()[-2000:]
    (budget,) = Budget.objects.all()
    assert (budget.dim, budget.value, budget.hard, budget.updated_by) == ("user", "u-42", True, admin)


def test_a_dim_budget_counts_the_records_of_that_value_from_the_rollups(
    db: None, client: Client, collector: Collector, settings: Any
) -> None:
    settings.ROLLUP_DIMS = [*settings.ROLLUP_DIMS, "user"]
    month = month_of(datetime.now(UTC))
    budget_set(business_line="search", dim="user", value="u-42", month=month, tokens=1000, hard=True)
    budget_set(business_line="search", team="web", dim="user", value="u-42", month=month, tokens=300, hard=True)
    hard("search", 5000)
    user_spend(collector, 250, "u-42")
    user_spend(collector, 400, "u-42", team="app")  # another team: the line's user budget only
    user_spend(collector, 900, "u-7")  # another user
    spend(collector, "search", 600)  # no user at all
    user_spend(collector, 0, "u-42", status="rejected")

    state = dim_state_of(client, collector.secret)

    user, in_team = state[("search", "", "", "user", "u-42")], state[("search", "web", "", "user", "u-42")]
    assert (user["used_tokens"], user["holds"], in_team["used_tokens"], in_team["holds"]) == (650, False, 250, False)
    assert state[("search", "", "", "", "")]["used_tokens"] == 2150
    user_spend(collector, 100, "u-42")
    after = dim_state_of(client, collector.secret)
    assert after[("search", "web", "", "user", "u-42")]["holds"]
    assert not after[("search", "", "", "user", "u-42")]["holds"] and not after[("search", "", "", "", "")]["holds"]
    states = {s.scope: s for s in budget_states(now=datetime.now(UTC))}
    assert (states["search user=u-42"].refused, states["search/web user=u-42"].refused) == (1, 1)


def test_a_dim_budget_sums_that_values_priced_hours(db: None, client: Client, settings: Any) -> None:
    settings.ROLLUP_DIMS = [*settings.ROLLUP_DIMS, "user"]
    now = datetime.now(UTC)
    month, hour = month_of(now), now.replace(minute=0, second=0, microsecond=0)
    budget_set(business_line="search", dim="user", value="u-42", month=month, amount=Decimal(10), currency="CNY")
    for user, cost in (("u-42", "7.5"), ("u-7", "30")):
        factories.hourly_cost(hour=hour, dims={"business_line": "search", "user": user}, cost=cost, currency="CNY")
    factories.hourly_cost(hour=hour, dims={"business_line": "search", "caller": "x", "user": "u-42"}, cost="4")

    (state,) = dim_state_of(client, factories.collector_key().secret).values()

    assert (state["dim"], state["value"], state["used_amount"], state["spent"]) == ("user", "u-42", "11.50", True)


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


def test_metrics_show_each_budget_its_use_and_whether_it_holds(
    db: None, client: Client, collector: Collector, settings: Any
) -> None:
    settings.ROLLUP_DIMS = [*settings.ROLLUP_DIMS, "user"]
    hard("search", 100)
    hard("search", 1000, caller="search-web")
    budget_set(business_line="search", dim="user", value="u-42", month=month_of(datetime.now(UTC)), tokens=20)
    spend(collector, "search", 150)
    spend(collector, "search", 40, caller="search-web")
    user_spend(collector, 30, "u-42")
    platform_collector.clear()

    text = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()

    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(text)
               for s in f.samples}  # fmt: skip
    scope = (("business_line", "search"), ("caller", ""), ("dim", ""), ("team", ""), ("value", ""))
    assert samples[("costplatform_budget_holding", scope)] == 1
    used = (("business_line", "search"), ("caller", ""), ("dim", ""), ("kind", "hard"), ("team", ""),
            ("unit", "tokens"), ("value", ""))  # fmt: skip
    assert samples[("costplatform_budget_used", used)] == 220
    assert samples[("costplatform_budget_limit", used)] == 100
    caller = (("business_line", "search"), ("caller", "search-web"), ("dim", ""), ("team", ""), ("value", ""))
    assert samples[("costplatform_budget_holding", caller)] == 0
    user = (("business_line", "search"), ("caller", ""), ("dim", "user"), ("kind", "soft"), ("team", ""),
            ("unit", "tokens"), ("value", "u-42"))  # fmt: skip
    assert (samples[("costplatform_budget_used", user)], samples[("costplatform_budget_limit", user)]) == (30, 20)
    caller_used = (("business_line", "search"), ("caller", "search-web"), ("dim", ""), ("kind", "hard"),
                   ("team", ""), ("unit", "tokens"), ("value", ""))  # fmt: skip
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
