"""Mapping rules compiled to SQL: a CASE expression that names, for each priced row, the first
active rule (by priority) whose conditions all hold. The accrual query and the drill-down
selector evaluate the same expression, so a line's usage is found the way it was booked."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from apps.common.composed import SQL, Composable, Literal
from apps.ledger import conf
from apps.ledger.models import Account, ConfigVersion, MappingRule

# The SQL aliases the expression reads: r = classification_reason, d = ingest_dimset,
# w.window_id = the elastic window holding the row's hour (NULL outside windows).
FALLBACK = "fallback"


@dataclass(frozen=True)
class RuleRef:
    id: int
    revision: int
    account_id: int

    @property
    def label(self) -> str:
        return f"{self.id}@{self.revision}"


@dataclass(frozen=True)
class Mapping:
    """The active rules and accounts as of one config version."""

    version: int
    usage_sql: Composable  # the mapping rule of a priced row (c, d, r, w of PRICED_HOURS_FROM)
    usage_params: list[Any]
    rules: dict[int, RuleRef]
    idle_rule: RuleRef | None
    fallback_account_id: int
    payable_account_id: int

    def account_of(self, rule_id: int | None) -> int:
        return self.rules[rule_id].account_id if rule_id is not None else self.fallback_account_id

    def label_of(self, rule_id: int | None) -> str:
        return self.rules[rule_id].label if rule_id is not None else FALLBACK


class MappingError(RuntimeError):
    pass


def _condition(rule: MappingRule, params: list[Any]) -> Composable:
    parts = []
    if rule.token_class:
        parts.append(SQL("r.name LIKE %s"))
        params.append(f"{rule.token_class}.%")
    if rule.reason:
        parts.append(SQL("r.name = %s"))
        params.append(rule.reason)
    if rule.dims:
        parts.append(SQL("d.dims @> %s::jsonb"))
        params.append(json.dumps(rule.dims, sort_keys=True))
    if rule.elastic == MappingRule.Elastic.INSIDE:
        parts.append(SQL("w.window_id IS NOT NULL"))
    elif rule.elastic == MappingRule.Elastic.OUTSIDE:
        parts.append(SQL("w.window_id IS NULL"))
    return SQL(" AND ").join(parts) if parts else SQL("TRUE")


def mapping_load() -> Mapping:
    """The mapping in force now (a few rows)."""
    version = ConfigVersion.objects.values_list("version", flat=True).first() or 0
    rules = list(MappingRule.objects.filter(active=True, account__active=True).order_by("priority", "id"))
    params: list[Any] = []
    whens = [
        SQL("WHEN {} THEN {}").format(_condition(rule, params), Literal(int(rule.pk)))
        for rule in rules
        if rule.applies_to == MappingRule.AppliesTo.USAGE
    ]
    usage_sql = SQL("(CASE {} END)::bigint").format(SQL(" ").join(whens)) if whens else SQL("NULL::bigint")
    refs = {rule.pk: RuleRef(rule.pk, rule.revision, rule.account_id) for rule in rules}
    idle = next((refs[r.pk] for r in rules if r.applies_to == MappingRule.AppliesTo.IDLE), None)
    accounts = dict(Account.objects.values_list("code", "pk"))
    payable = Account.objects.filter(role=Account.Role.PAYABLE).values_list("pk", flat=True).first()
    fallback = accounts.get(conf.get("LEDGER_FALLBACK_ACCOUNT"))
    if payable is None or fallback is None:
        raise MappingError(
            "the chart needs an account with role 'payable' and the fallback account "
            f"{conf.get('LEDGER_FALLBACK_ACCOUNT')!r} (LEDGER_FALLBACK_ACCOUNT)"
        )
    return Mapping(version, usage_sql, params, refs, idle, fallback, payable)
