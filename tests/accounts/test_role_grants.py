"""Each app declares the admin permissions its roles hold on its models
(`apps.accounts.roles.role_grants`, from its ready()); the groups get them after a migrate. The
groups hold exactly what the one table in accounts gave them before the apps declared their own:
that table is kept here as data, with the way it was read."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission

from apps.accounts.models import ROLES
from apps.accounts.roles import role_grants, role_permissions_sync

pytestmark = pytest.mark.django_db

# The table accounts held before (role -> (app label or "*", model or "*", actions)).
BEFORE: dict[str, tuple[tuple[str, str, tuple[str, ...]], ...]] = {
    "admin": (("*", "*", ("add", "change", "delete", "view")),),
    "engineer": (
        ("classification", "ruleset", ("add", "change", "view")),
        ("classification", "rule", ("add", "change", "delete", "view")),
        ("classification", "*", ("view",)),
        ("ingest", "*", ("view",)),
        ("accounts", "collectorkey", ("view",)),
        ("audits", "modeldowngrade", ("add", "change", "delete", "view")),
        ("audits", "*", ("view",)),
        ("common", "jobrun", ("view",)),
    ),
    "finance": (
        ("pricing", "*", ("add", "change", "view")),
        ("ledger", "*", ("add", "change", "view")),
        ("reconciliation", "*", ("add", "change", "view")),
        ("currencies", "*", ("add", "change", "view")),
        ("plans", "*", ("add", "change", "view")),
        ("classification", "*", ("view",)),
        ("ingest", "*", ("view",)),
        ("audits", "*", ("view",)),
        ("common", "jobrun", ("view",)),
    ),
    "viewer": (
        ("ingest", "*", ("view",)),
        ("classification", "*", ("view",)),
        ("common", "jobrun", ("view",)),
    ),
}


def held(role: str) -> set[str]:
    perms = Group.objects.get(name=role).permissions.select_related("content_type")
    return {f"{p.content_type.app_label}.{p.codename}" for p in perms}


def granted_before(role: str) -> set[str]:
    found = set()
    for perm in Permission.objects.select_related("content_type"):
        app_label, model, action = perm.content_type.app_label, perm.content_type.model, perm.codename.split("_")[0]
        for grant_app, grant_model, actions in BEFORE[role]:
            if grant_app in ("*", app_label) and grant_model in ("*", model) and action in actions:
                found.add(f"{app_label}.{perm.codename}")
    return found


@pytest.mark.parametrize("role", ROLES)
def test_each_role_holds_what_the_one_table_gave_it(role: str) -> None:
    role_permissions_sync()
    assert held(role) == granted_before(role)
    assert held(role), role


def test_the_grants_that_matter_per_role() -> None:
    role_permissions_sync()
    engineer, finance, viewer, admin = held("engineer"), held("finance"), held("viewer"), held("admin")
    assert {"classification.delete_rule", "classification.change_ruleset", "audits.delete_modeldowngrade"} <= engineer
    assert not {"classification.delete_ruleset", "pricing.change_price", "accounts.change_collectorkey"} & engineer
    assert {"pricing.change_price", "ledger.add_mappingrule", "plans.change_budget", "currencies.add_exchangerate"} <= (
        finance
    )
    assert not {a for a in finance if a.split(".")[1].startswith("delete_")}
    assert not {"classification.change_rule", "accounts.view_collectorkey"} & finance
    assert {a.split(".")[1].split("_")[0] for a in viewer} == {"view"}
    assert {a.split(".")[0] for a in viewer} == {"ingest", "classification", "common"}
    assert {"auth.delete_user", "ledger.delete_period", "auditlog.view_auditentry"} <= admin


def test_a_grant_taken_back_leaves_the_group_at_the_next_sync() -> None:
    group = Group.objects.get(name="viewer")
    group.permissions.add(Permission.objects.get(codename="change_price"))
    role_permissions_sync()
    assert "pricing.change_price" not in held("viewer")


def test_it_refuses_an_unknown_role_or_action() -> None:
    with pytest.raises(ValueError, match="unknown role 'auditor'"):
        role_grants("pricing", {"auditor": ("view",)})
    with pytest.raises(ValueError, match="not \\('approve',\\)"):
        role_grants("pricing", {"finance": ("approve",)})
