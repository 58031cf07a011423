"""Usage per class and reason with cost; rule sets and rules over the API, by role."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from apps.classification.models import RuleSet
from apps.pricing.services import hours_price, price_set
from tests.factories import record

T0 = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=5)


def user_with(django_user_model, role: str | None) -> Client:
    user = django_user_model.objects.create_user(f"user-{role}", password="pw-for-tests-only")
    if role:
        user.groups.add(Group.objects.get(name=role))
    client = Client()
    client.force_login(user)
    return client


def q(params: str) -> str:
    return params.replace("+", "%2B")


@pytest.fixture
def stored(collector):
    plain = {
        "tokens.system": 0,
        "tokens.tool": 0,
        "tokens.prompt": 1000,
        "tokens.prompt_cached": 600,
        "tokens.completion": 200,
        "ts": T0.isoformat(),
        "prompt_hash": None,
    }
    collector.send(
        [
            record(**plain, dims={"business_line": "support"}),
            record(**plain, dims={"business_line": "search"}, **{"outcome.status": "error"}),
            record(**plain, model="unpriced-model", dims={"business_line": "search"}),
        ]
    )


def test_usage_by_class_and_reason_with_cost(reader, stored, django_user_model):
    Group.objects.get_or_create(name="finance")[0].user_set.add(django_user_model.objects.get(username="reader"))
    price_set(
        model_pattern="qwen2.5-*",
        prices={"input": Decimal("2"), "cached_input": Decimal("0.5"), "output": Decimal("8")},
        effective_from=T0 - timedelta(days=1),
    )
    hours_price(start=T0, end=T0 + timedelta(hours=1))

    body = reader.get(
        q(
            f"/api/v1/usage/classes?from={T0.isoformat()}&to={(T0 + timedelta(hours=1)).isoformat()}"
            "&group_by=reason,model"
        )
    ).json()

    rows = {(r["reason"], r["model"]): r for r in body["rows"]}
    assert rows[("effective.input", "qwen2.5-7b-instruct")]["tokens"] == 400
    assert rows[("effective.input", "qwen2.5-7b-instruct")]["cost"] == {"CNY": "0.000800"}
    assert rows[("waste.error", "qwen2.5-7b-instruct")]["cost"] == {"CNY": "0.002400"}  # 400*2 + 200*8 per 1M
    assert rows[("cache.prefix_cache", "qwen2.5-7b-instruct")]["cost"] == {"CNY": "0.000600"}
    unpriced = rows[("effective.output", "unpriced-model")]
    assert (unpriced["cost"], unpriced["unpriced_tokens"]) == ({}, 200)
    assert "unpriced-model" in body["warnings"][0]


def test_usage_by_class_groups_by_any_rollup_dim(reader, stored):
    body = reader.get(
        q(
            f"/api/v1/usage/classes?from={T0.isoformat()}&to={(T0 + timedelta(hours=1)).isoformat()}"
            "&group_by=class,business_line"
        )
    ).json()

    got = {(r["class"], r["business_line"]): r["tokens"] for r in body["rows"]}
    assert got == {
        ("cache", "support"): 600,
        ("effective", "support"): 600,
        ("cache", "search"): 1200,
        ("waste", "search"): 600,
        ("effective", "search"): 600,
    }


def test_an_engineer_drafts_edits_and_activates_rules(django_user_model, db):
    engineer = user_with(django_user_model, "engineer")

    draft = engineer.post("/api/v1/rulesets", {"name": "summaries"}, content_type="application/json")
    assert draft.status_code == 201
    version = draft.json()["version"]
    rule = {
        "name": "long summaries",
        "expression": 'dims.feature == "summary" and tokens.completion > 500',
        "components": "completion",
        "target": "waste.summary_too_long",
    }
    assert engineer.post(f"/api/v1/rulesets/{version}/rules", rule, content_type="application/json").status_code == 201
    assert engineer.post(f"/api/v1/rulesets/{version}/activate").status_code == 200

    assert RuleSet.objects.get(status="active").version == version
    assert RuleSet.objects.get(version=1).status == "retired"


def test_a_rule_that_does_not_type_check_is_refused_with_its_position(django_user_model, db):
    engineer = user_with(django_user_model, "engineer")
    version = engineer.post("/api/v1/rulesets", {}, content_type="application/json").json()["version"]

    response = engineer.post(
        f"/api/v1/rulesets/{version}/rules",
        {"name": "bad", "expression": 'tokens.prompt > "many"', "components": "all", "target": "waste.x"},
        content_type="application/json",
    )

    assert response.status_code == 400
    message = json.dumps(response.json())
    assert "line 1" in message and "column" in message


def test_an_active_rule_set_cannot_be_edited(django_user_model, db):
    engineer = user_with(django_user_model, "engineer")

    response = engineer.post(
        "/api/v1/rulesets/1/rules",
        {"name": "x", "action": "disable", "builtin": "duplicate"},
        content_type="application/json",
    )

    assert response.status_code == 400
    assert "draft" in json.dumps(response.json())


@pytest.mark.parametrize("role", ["viewer", "finance", None])
def test_only_engineers_and_admins_edit_rules(django_user_model, db, role):
    someone = user_with(django_user_model, role)

    assert someone.post("/api/v1/rulesets", {}, content_type="application/json").status_code == 403
    assert someone.post("/api/v1/rulesets/1/activate").status_code == 403
    assert someone.get("/api/v1/rulesets").status_code == (200 if role else 403)  # reading needs a role


def test_an_engineer_tries_a_draft_against_recent_records(django_user_model, stored):
    engineer = user_with(django_user_model, "engineer")
    version = engineer.post("/api/v1/rulesets", {}, content_type="application/json").json()["version"]
    rule = {
        "name": "search is waste",
        "expression": 'dims.business_line == "search"',
        "components": "completion",
        "target": "waste.search_output",
    }
    engineer.post(f"/api/v1/rulesets/{version}/rules", rule, content_type="application/json")

    body = engineer.get(q(f"/api/v1/rulesets/{version}/try?from={T0.isoformat()}")).json()

    assert body["moves"] == [
        {"component": "output", "from_reason": "effective.output", "to_reason": "waste.search_output", "tokens": 200},
        {"component": "output", "from_reason": "waste.error", "to_reason": "waste.search_output", "tokens": 200},
    ]
    assert RuleSet.objects.get(version=version).status == "draft"
