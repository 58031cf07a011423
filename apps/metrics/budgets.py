"""Budget state on /metrics: each budget of the accounting month, its limit and use, whether it
holds at the edge, its override and the requests of its scope (line, team, caller, a dim's value)
rejected this month.
The edge counts its own refusals (costplatform_serving_budget_refused_total on its /metrics)."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import GaugeMetricFamily, Metric

from apps.plans.budget_state import BudgetState

SCOPE = ["business_line", "team", "caller", "dim", "value"]
LABELS = [*SCOPE, "kind"]


def _limits(states: Iterable[BudgetState]) -> Iterable[tuple[list[str], float, float]]:
    """(labels, limit, used) per budget and unit: tokens, and money in its currency."""
    for s in states:
        kind = "hard" if s.hard else "soft"
        if s.tokens is not None:
            yield [*_scope(s), kind, "tokens"], float(s.tokens), float(s.used_tokens)
        if s.amount is not None:
            yield [*_scope(s), kind, s.currency], float(s.amount), float(s.used_amount)


def _scope(state: BudgetState) -> list[str]:
    return [state.business_line, state.team, state.caller, state.dim, state.value]


def budget_families(states: list[BudgetState]) -> list[Metric]:
    limit = GaugeMetricFamily(
        "costplatform_budget_limit",
        "A budget of the accounting month, in tokens or its currency.",
        labels=[*LABELS, "unit"],
    )
    used = GaugeMetricFamily(
        "costplatform_budget_used",
        "What the budget's scope (line, team, caller, dim value) used this month so far.",
        labels=[*LABELS, "unit"],
    )
    for labels, cap, spent in _limits(states):
        limit.add_metric(labels, cap)
        used.add_metric(labels, spent)
    holding = GaugeMetricFamily(
        "costplatform_budget_holding",
        "1 when a hard budget is spent and no override runs: the edge refuses.",
        labels=SCOPE,
    )
    override = GaugeMetricFamily(
        "costplatform_budget_override_until_timestamp_seconds",
        "When the active override ends (Unix time).",
        labels=SCOPE,
    )
    refused = GaugeMetricFamily(
        "costplatform_budget_rejected_requests",
        "Requests of the budget's scope recorded as rejected this month (the edge's budget refusals among them).",
        labels=SCOPE,
    )
    for s in states:
        holding.add_metric(_scope(s), 1.0 if s.holds else 0.0)
        refused.add_metric(_scope(s), float(s.refused))
        if s.override_until is not None:
            override.add_metric(_scope(s), s.override_until.timestamp())
    return [limit, used, holding, override, refused]
