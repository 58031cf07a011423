"""One definition of the health ratios on every surface (issue 30, item 4): a workload that
caches 65 % of its prompt and computes 96 % effective is healthy on the overview, in the health
alert and in the month-end checks the audit reports, though by all its tokens it would be only
about 46 % effective."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest

from apps.alerts.evaluation import rule_evaluate
from apps.common.buckets import month_of
from apps.ledger.services.checks import month_findings
from tests import factories
from tests.conftest import T0

pytestmark = pytest.mark.django_db
LINE = {"business_line": "support", "feature": "faq"}


def cached_workload(ok: int = 24, timeouts: int = 1) -> list[dict[str, Any]]:
    """Each request: 1,000 prompt tokens of which 650 from the prefix cache, 250 completion; so
    600 computed, effective when it succeeds and waste when it times out."""
    tokens = {"prompt": 1000, "prompt_cached": 650, "completion": 250}
    made = []
    for i in range(ok + timeouts):
        at = (T0 + timedelta(minutes=i)).isoformat()
        status = {"outcome.status": "timeout", "outcome.finish_reason": None} if i >= ok else {}
        made.append(factories.record(ts=at, dims=LINE, tokens=tokens, prompt_hash=None, **status))
    return made


def test_a_well_cached_well_computed_workload_breaches_nothing_anywhere(collector, as_user) -> None:
    response = collector.send(cached_workload())
    assert response.json()["accepted"] == 25, response.content
    # computed 25 x 600 = 15,000: effective 14,400 (96 %), waste 600 (4 %); cache hit 650 / 1,000.

    page = as_user("viewer").get("/overview/").content.decode()
    cards = dict(reversed(pair) for pair in re.findall(r'class="card (\w+)" data-metric="(\w+)"', page))
    assert cards == {"effective": "ok", "waste": "ok", "cache_hit": "ok", "shadow": "ok"}
    figures = dict(re.findall(r'data-figure="(\w+)" data-value="([^"]+)"', page))
    assert float(figures["effective_ratio"]) == 14_400 / 15_000 and float(figures["cache_hit_rate"]) == 0.65

    rule = factories.alert_rule("health", params={"min_tokens": 1000})
    assert rule_evaluate(rule_id=rule.id, now=T0 + timedelta(hours=1)) == []

    found = month_findings(month=month_of(T0))
    assert not [f for f in found if f.kind == "effective_share_low"], [f.message for f in found]


def test_the_same_workload_breaches_everywhere_when_it_computes_badly(collector, as_user) -> None:
    # 18 of 25 time out: 72 % waste. The surfaces that passed the workload above fail this one.
    assert collector.send(cached_workload(ok=7, timeouts=18)).json()["accepted"] == 25

    page = as_user("viewer").get("/overview/").content.decode()
    cards = dict(reversed(pair) for pair in re.findall(r'class="card (\w+)" data-metric="(\w+)"', page))
    assert cards == {"effective": "breach", "waste": "breach", "cache_hit": "ok", "shadow": "ok"}

    rule = factories.alert_rule("health", params={"min_tokens": 1000})
    [fired] = rule_evaluate(rule_id=rule.id, now=T0 + timedelta(hours=1))
    assert fired.figures["breaches"] == ["effective", "waste"]
    assert fired.figures["reasons"] == [{"class": "waste", "share": 0.72, "top": [{"reason": "timeout", "share": 1.0}]}]

    found = month_findings(month=month_of(T0))
    assert {f.business_line for f in found if f.kind == "effective_share_low"} == {"", "support"}
