"""The audit log: changes to rules, prices, mappings and periods, made in the admin or through
the API, are recorded with who, when, from where and before/after; the log is append-only."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import DatabaseError, transaction
from django.test import Client

from apps.auditlog.models import AuditEntry
from apps.audits.models import ModelDowngrade
from apps.ledger.models import Account, MappingRule
from apps.pricing.models import PriceVersion
from tests import factories

pytestmark = pytest.mark.django_db


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def entries(model: str, **filters: Any) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(model=model, **filters).order_by("id"))


@pytest.fixture
def admin_user() -> User:
    user = factories.finance_user("boss", role="admin")
    user.is_staff = True
    user.save()
    return user


def test_rule_changes_through_the_api_are_logged_with_the_engineer():
    engineer = factories.finance_user("eng", role="engineer")
    api = logged_in(engineer)
    factories.active_ruleset()
    previous = factories.active_ruleset()

    draft = api.post("/api/v1/rulesets", {"name": "tighter"}, content_type="application/json").json()
    rule = {"name": "long summaries", "expression": "tokens.completion > 900", "components": "completion"}
    api.post(f"/api/v1/rulesets/{draft['version']}/rules", rule | {"target": "waste.summary_too_long"})
    assert api.post(f"/api/v1/rulesets/{draft['version']}/activate").status_code == 200

    [created] = entries("classification.RuleSet", action="create", object_repr__contains="tighter")
    assert (created.actor, created.actor_name, created.source) == (engineer, "eng", "api")
    assert created.path == "/api/v1/rulesets" and created.after["name"] == "tighter"
    [added] = entries("classification.Rule", action="create", object_repr="long summaries")
    assert added.after["expression"] == "tokens.completion > 900" and added.before is None
    activated = entries("classification.RuleSet", action="update", object_id=str(created.object_id))
    assert activated[-1].changes["status"] == ["draft", "active"]
    [retired] = entries("classification.RuleSet", action="update", object_id=str(previous.pk))
    assert retired.changes["status"] == ["active", "retired"] and retired.actor == engineer


def test_price_versions_made_in_the_admin_are_logged_with_their_prices(admin_user):
    form = {
        "name": "list 2027",
        "effective_from_0": "2027-01-01",
        "effective_from_1": "00:00:00",
        "currency": "CNY",
        "note": "",
        "prices-TOTAL_FORMS": "1",
        "prices-INITIAL_FORMS": "0",
        "prices-MIN_NUM_FORMS": "0",
        "prices-MAX_NUM_FORMS": "1000",
        "prices-0-model_pattern": "qwen2.5-*",
        "prices-0-kind": "input",
        "prices-0-per_million": "2.500000",
    }
    answer = logged_in(admin_user).post("/admin/pricing/priceversion/add/", form)
    assert answer.status_code == 302, answer.content[-3000:]
    version = PriceVersion.objects.get(name="list 2027")

    [made] = entries("pricing.PriceVersion", object_id=str(version.pk))
    assert (made.action, made.actor, made.source) == ("create", admin_user, "admin")
    [price] = entries("pricing.Price", action="create")
    assert price.after["per_million"] == "2.500000" and price.after["model_pattern"] == "qwen2.5-*"

    price_id = version.prices.get().pk
    form |= {"prices-INITIAL_FORMS": "1", "prices-0-id": str(price_id), "prices-0-version": str(version.pk)}
    form["prices-0-per_million"] = "3.000000"
    answer = logged_in(admin_user).post(f"/admin/pricing/priceversion/{version.pk}/change/", form)
    assert answer.status_code == 302, answer.content[-3000:]
    [changed] = entries("pricing.Price", action="update")
    assert changed.changes == {"per_million": ["2.500000", "3.000000"]}


def test_mapping_rules_and_downgrades_changed_in_the_admin_are_logged(admin_user):
    admin = logged_in(admin_user)
    account = Account.objects.first()
    assert account is not None  # the seeded chart
    rule = MappingRule.objects.create(priority=5, name="cs to effective", account=account)
    form = {
        "priority": "5",
        "name": "cs to effective",
        "applies_to": "usage",
        "token_class": "",
        "reason": "",
        "dims": '{"business_line": "customer-service"}',
        "elastic": "any",
        "account": str(account.pk),
        "active": "on",
    }
    answer = admin.post(f"/admin/ledger/mappingrule/{rule.pk}/change/", form)
    assert answer.status_code == 302, answer.content[-3000:]
    [changed] = entries("ledger.MappingRule", action="update")
    assert changed.changes["dims"] == [{}, {"business_line": "customer-service"}]
    assert changed.changes["revision"] == [1, 2]  # read back after the trigger bumped it
    assert (changed.actor, changed.source) == (admin_user, "admin")
    [created] = entries("ledger.MappingRule", action="create")
    assert created.source == "system" and created.actor is None  # made outside a request

    answer = admin.post(
        "/admin/audits/modeldowngrade/add/",
        {"large_model": "qwen2.5-72b", "small_model": "qwen2.5-7b", "max_prompt_tokens": "1000",
         "max_completion_tokens": "200", "enabled": "on", "note": ""},
    )  # fmt: skip
    assert answer.status_code == 302, answer.content[-3000:]
    downgrade = ModelDowngrade.objects.get()
    assert admin.post(f"/admin/audits/modeldowngrade/{downgrade.pk}/delete/", {"post": "yes"}).status_code == 302
    made, deleted = entries("audits.ModelDowngrade")
    assert made.action == "create" and made.after["small_model"] == "qwen2.5-7b"
    assert deleted.action == "delete" and deleted.after is None and deleted.before["large_model"] == "qwen2.5-72b"


def test_closing_and_reopening_a_period_through_the_api_is_logged():
    finance = factories.finance_user("fin", role="finance")
    boss = factories.finance_user("boss", role="admin")
    closed = logged_in(finance).post("/api/v1/ledger/periods/2025-01/close")
    assert closed.status_code == 200, closed.content
    reopened = logged_in(boss).post(
        "/api/v1/ledger/periods/2025-01/reopen", {"reason": "late invoice"}, content_type="application/json"
    )
    assert reopened.status_code == 200, reopened.content

    changes = [(e.actor_name, e.action, e.changes.get("status")) for e in entries("ledger.Period")]
    assert changes == [
        ("fin", "create", [None, "open"]),
        ("fin", "update", ["open", "closed"]),
        ("boss", "update", ["closed", "open"]),
    ]
    close = entries("ledger.Period")[1]
    assert close.changes["closed_by_id"] == [None, finance.pk] and close.before["month"] == str(date(2025, 1, 1))


def test_collector_key_entries_hold_no_key_material():
    made = factories.collector_key("edge-1")
    from apps.accounts.services import collector_key_revoke

    collector_key_revoke(name="edge-1")
    for entry in entries("accounts.CollectorKey"):
        text = str(entry.before) + str(entry.after) + str(entry.changes)
        assert "key_hash" not in text and made.secret not in text
    assert entries("accounts.CollectorKey")[-1].changes["revoked_at"][0] is None


def test_the_log_is_append_only_in_the_database():
    factories.collector_key()
    entry = AuditEntry.objects.first()
    assert entry is not None
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEntry.objects.filter(pk=entry.pk).update(actor_name="someone else")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEntry.objects.filter(pk=entry.pk).delete()
    assert AuditEntry.objects.filter(pk=entry.pk, actor_name=entry.actor_name).exists()


def test_the_admin_shows_entries_but_offers_no_add_change_or_delete(admin_user):
    superuser = User.objects.create_superuser("root", password="pw-for-tests-only")
    factories.collector_key()
    entry = AuditEntry.objects.get()
    for user in (admin_user, superuser):
        admin = logged_in(user)
        assert admin.get("/admin/auditlog/auditentry/").status_code == 200
        page = admin.get(f"/admin/auditlog/auditentry/{entry.pk}/change/")
        assert page.status_code == 200 and b'name="_save"' not in page.content
        assert admin.get("/admin/auditlog/auditentry/add/").status_code == 403
        assert admin.post(f"/admin/auditlog/auditentry/{entry.pk}/change/", {"actor_name": "x"}).status_code == 403
        assert admin.post(f"/admin/auditlog/auditentry/{entry.pk}/delete/", {"post": "yes"}).status_code == 403
        bulk = {"action": "delete_selected", "_selected_action": [entry.pk], "post": "yes"}
        admin.post("/admin/auditlog/auditentry/", bulk)
    assert AuditEntry.objects.filter(pk=entry.pk).exists()


# Each app registers its own audited models (apps.auditlog.registry.audited, from its ready()).
AUDITED_BY_THEIR_APPS = {
    "accounts.CollectorKey",
    "accounts.UserScope",
    "audits.ModelDowngrade",
    "classification.Rule",
    "classification.RuleSet",
    "currencies.ExchangeRate",
    "ledger.Account",
    "ledger.CloseRequest",
    "ledger.CostCentre",
    "ledger.ElasticWindow",
    "ledger.FindingReview",
    "ledger.IdlePolicy",
    "ledger.MappingRule",
    "ledger.Period",
    "ledger.ReservedShare",
    "plans.Budget",
    "plans.BudgetOverride",
    "plans.Revenue",
    "pricing.CostPool",
    "pricing.Price",
    "pricing.PriceVersion",
    "reconciliation.BillAdjustment",
    "reconciliation.Supplier",
}


def test_every_app_registers_its_audited_models_and_each_save_is_heard() -> None:
    from django.db.models.signals import post_delete, post_save, pre_save

    from apps.auditlog.registry import audited_models

    models = audited_models()
    assert {m._meta.label for m in models} == AUDITED_BY_THEIR_APPS
    for model in models:
        for signal in (pre_save, post_save, post_delete):
            assert signal.has_listeners(model), (model, signal)
