"""Business-line scopes where people write: budgets in the Django admin, and rule sets (API,
admin, the rules page), which only a user who sees every business line may write or activate.
The walk of every admin URL for scoped users of each role is in test_urlconf.py."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.test import Client

from apps.accounts.admin_scope import ScopedModelAdmin
from apps.accounts.models import UserScope
from apps.classification.models import RuleSet
from apps.classification.services import ruleset_draft_create
from apps.plans.models import Budget
from apps.plans.planning import budget_set
from tests import factories

pytestmark = pytest.mark.django_db

MINE, OTHER = "bl-mine", "bl-other-k3"
MONTH = datetime.now(UTC).date().replace(day=1)
# The models whose rows belong to one business line; every other model spans lines.
LINE_BOUND = {
    "alerts.alert",
    "alerts.rule",
    "classification.healththreshold",
    "ingest.dimset",
    "ledger.costcentre",
    "ledger.elasticwindow",
    "ledger.finding",
    "plans.budget",
    "plans.revenue",
}


def staff(role: str, *, name: str, lines: list[str] | None = None) -> tuple[User, Client]:
    """A staff user in one role, scoped to `lines` when given, and a client logged in as them."""
    user = factories.finance_user(name, role=role)
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    if lines:
        UserScope.objects.create(user=user, business_lines=lines)
    client = Client()
    client.force_login(user)
    return user, client


@pytest.fixture
def budgets() -> dict[str, Budget]:
    return {
        line: budget_set(business_line=line, month=MONTH, amount=Decimal("100"), currency="CNY")
        for line in (MINE, OTHER)
    }


def budget_form(line: str, amount: str = "250.00") -> dict[str, Any]:
    return {"business_line": line, "month": f"{MONTH:%Y-%m-%d}", "currency": "CNY", "amount": amount, "tokens": ""}


def test_every_model_in_the_admin_is_scoped_and_says_where_its_line_is():
    line_fields = {}
    for model, model_admin in admin.site._registry.items():
        assert isinstance(model_admin, ScopedModelAdmin), f"{model._meta.label} is not a ScopedModelAdmin"
        if model_admin.line_field is not None:
            line_fields[model._meta.label_lower] = model_admin.line_field
            model._meta.get_field(model_admin.line_field)  # a real field of the model
    assert set(line_fields) == LINE_BOUND


def test_it_refuses_a_scoped_finance_user_another_lines_budget_in_the_admin(budgets):
    _, scoped = staff("finance", name="fin-scoped", lines=[MINE])
    _, everyone = staff("finance", name="fin-all")
    other = budgets[OTHER]
    change, delete = f"/admin/plans/budget/{other.pk}/change/", f"/admin/plans/budget/{other.pk}/delete/"

    assert OTHER in everyone.get("/admin/plans/budget/").content.decode()  # the row is there to hide
    assert everyone.get(change).status_code == 200
    listed = scoped.get("/admin/plans/budget/")
    assert listed.status_code == 200 and MINE in listed.content.decode() and OTHER not in listed.content.decode()
    assert scoped.get(change).status_code == 404
    assert scoped.get(f"/admin/plans/budget/{other.pk}/history/").status_code == 404
    assert scoped.post(change, budget_form(MINE, amount="1.00")).status_code == 404
    assert scoped.post(delete, {"post": "yes"}).status_code == 404
    scoped.post("/admin/plans/budget/", {"action": "delete_selected", "_selected_action": [other.pk], "post": "yes"})

    other.refresh_from_db()  # still there, unchanged
    assert (other.business_line, other.amount) == (OTHER, Decimal("100.00"))


def test_it_refuses_a_scoped_finance_user_a_budget_for_another_line(budgets):
    _, scoped = staff("finance", name="fin-scoped", lines=[MINE])
    Budget.objects.filter(business_line=OTHER).delete()
    mine = budgets[MINE]

    form = scoped.get("/admin/plans/budget/add/").content.decode()
    created = scoped.post("/admin/plans/budget/add/", budget_form(OTHER))
    moved = scoped.post(f"/admin/plans/budget/{mine.pk}/change/", budget_form(OTHER))

    assert f'value="{MINE}"' in form and OTHER not in form  # the form offers only their lines
    assert created.status_code == 200 and "Select a valid choice" in created.content.decode()
    assert moved.status_code == 200 and "Select a valid choice" in moved.content.decode()
    assert not Budget.objects.filter(business_line=OTHER).exists()
    mine.refresh_from_db()
    assert mine.business_line == MINE


def test_a_scoped_finance_user_edits_their_own_lines_budget(budgets):
    user, scoped = staff("finance", name="fin-scoped", lines=[MINE])
    mine = budgets[MINE]

    answer = scoped.post(f"/admin/plans/budget/{mine.pk}/change/", budget_form(MINE, amount="300.00"))

    assert answer.status_code == 302
    mine.refresh_from_db()
    assert (mine.amount, mine.updated_by) == (Decimal("300.00"), user)


def test_a_scoped_user_gets_no_model_that_spans_business_lines_in_the_admin():
    _, scoped = staff("admin", name="admin-scoped", lines=[MINE])
    _, everyone = staff("admin", name="admin-all")

    for url in ("/admin/auth/user/", "/admin/accounts/userscope/", "/admin/classification/ruleset/"):
        assert everyone.get(url).status_code == 200
        assert scoped.get(url).status_code == 403
    index = scoped.get("/admin/").content.decode()
    assert "/admin/plans/budget/" in index and "/admin/auth/user/" not in index
    users = "/admin/autocomplete/?app_label=accounts&model_name=userscope&field_name=user&term="
    assert (everyone.get(users).status_code, scoped.get(users).status_code) == (200, 403)


def test_every_admin_form_offers_a_scoped_user_only_their_lines():
    _, scoped = staff("admin", name="admin-scoped", lines=[MINE])
    _, everyone = staff("admin", name="admin-all")
    forms = 0
    for model, model_admin in admin.site._registry.items():
        add = f"/admin/{model._meta.app_label}/{model._meta.model_name}/add/"
        if model_admin.line_field is None or everyone.get(add).status_code != 200:
            continue  # read-only models (alerts, findings, dimension sets) have no form
        page = scoped.get(add).content.decode()
        options = re.findall(
            r'<option value="([^"]*)"', page.split(f'name="{model_admin.line_field}"')[1].split("</select>")[0]
        )
        assert options == [MINE], model._meta.label
        assert f'type="text" name="{model_admin.line_field}"' in everyone.get(add).content.decode()
        forms += 1
    assert forms == 6  # budgets, revenue, elastic windows, alert rules, cost centres, health thresholds


# --- rule sets: writing and activating needs every business line ---------------------------


def draft() -> RuleSet:
    factories.active_ruleset()
    return ruleset_draft_create(name="candidate")


def test_it_refuses_a_scoped_engineer_creating_or_activating_a_rule_set_over_the_api():
    _, scoped = staff("engineer", name="eng-scoped", lines=[MINE])
    candidate = draft()
    rule = {"name": "r", "builtin": "", "target": "waste.r", "expression": "tokens.prompt > 1"}

    created = scoped.post("/api/v1/rulesets", {"name": "mine"}, content_type="application/json")
    added = scoped.post(f"/api/v1/rulesets/{candidate.version}/rules", rule, content_type="application/json")
    activated = scoped.post(f"/api/v1/rulesets/{candidate.version}/activate", content_type="application/json")

    assert (created.status_code, added.status_code, activated.status_code) == (403, 403, 403)
    assert "every business line" in activated.json()["detail"]
    assert RuleSet.objects.count() == 2 and not candidate.rules.filter(name="r").exists()
    candidate.refresh_from_db()
    assert candidate.status == RuleSet.Status.DRAFT


def test_an_engineer_who_sees_every_line_creates_and_activates_a_rule_set_over_the_api():
    _, everyone = staff("engineer", name="eng-all")
    factories.active_ruleset()

    created = everyone.post("/api/v1/rulesets", {"name": "mine"}, content_type="application/json")
    version = created.json()["version"]
    activated = everyone.post(f"/api/v1/rulesets/{version}/activate", content_type="application/json")

    assert (created.status_code, activated.status_code) == (201, 200)
    assert RuleSet.objects.get(version=version).status == RuleSet.Status.ACTIVE


@pytest.mark.parametrize("action", ["activate", "new_draft"])
def test_it_refuses_a_scoped_engineer_the_rule_set_actions_in_the_admin(action):
    _, scoped = staff("engineer", name="eng-scoped", lines=[MINE])
    candidate = draft()
    form = {"action": action, "_selected_action": [candidate.pk]}

    answer = scoped.post("/admin/classification/ruleset/", form)

    assert answer.status_code == 403
    assert scoped.get(f"/admin/classification/ruleset/{candidate.pk}/change/").status_code == 404
    assert RuleSet.objects.count() == 2
    candidate.refresh_from_db()
    assert candidate.status == RuleSet.Status.DRAFT


def test_an_engineer_who_sees_every_line_activates_a_draft_in_the_admin():
    _, everyone = staff("engineer", name="eng-all")
    candidate = draft()

    everyone.post("/admin/classification/ruleset/", {"action": "activate", "_selected_action": [candidate.pk]})

    candidate.refresh_from_db()
    assert candidate.status == RuleSet.Status.ACTIVE


def test_a_viewer_cannot_run_the_rule_set_actions_in_the_admin():
    # Admin actions without `permissions` run for anyone who can view the list.
    _, viewer = staff("viewer", name="viewer-all")
    candidate = draft()

    viewer.post("/admin/classification/ruleset/", {"action": "activate", "_selected_action": [candidate.pk]})
    viewer.post("/admin/classification/ruleset/", {"action": "new_draft", "_selected_action": [candidate.pk]})

    candidate.refresh_from_db()
    assert candidate.status == RuleSet.Status.DRAFT and RuleSet.objects.count() == 2


def test_it_refuses_a_scoped_engineer_a_new_draft_on_the_rules_page():
    _, scoped = staff("engineer", name="eng-scoped", lines=[MINE])
    factories.active_ruleset()

    assert scoped.post("/rules/draft/", {"name": "mine"}).status_code == 403
    assert "/rules/draft/" not in scoped.get("/rules/").content.decode()  # no form to make one
    assert RuleSet.objects.count() == 1
