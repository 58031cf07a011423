"""Month-end checks at close, stored as findings."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.utils import translation

from apps.classification.models import HealthThreshold
from apps.ledger.finding_text import finding_text
from apps.ledger.models import ElasticWindow, Finding
from apps.ledger.services.accrual import month_accrue
from apps.ledger.services.checks import month_checks
from apps.ledger.services.periods import period_close, period_reopen
from apps.plans.planning import revenue_set
from tests import factories
from tests.ledger.helpers import DAY1, OCT, SEP, at

pytestmark = pytest.mark.django_db
CS = {"business_line": "customer-service"}
SEARCH = {"business_line": "search"}


def _kinds() -> set[tuple[str, str, str]]:
    return set(Finding.objects.values_list("kind", "business_line", "action"))


def test_it_asks_the_product_owner_when_effective_tokens_are_under_the_lines_threshold() -> None:
    batch = {"business_line": "batch"}
    for dims in (CS, SEARCH, batch):
        factories.dimset(dims)
    factories.hourly_class(hour=at(DAY1), tokens=740, dims=CS)
    factories.hourly_class(hour=at(DAY1), tokens=260, dims=CS, reason="waste.timeout")
    factories.hourly_class(hour=at(DAY1), tokens=760, dims=SEARCH)
    factories.hourly_class(hour=at(DAY1), tokens=240, dims=SEARCH, reason="waste.timeout")
    factories.hourly_class(
        hour=at(DAY1), tokens=3000, dims=SEARCH, reason="cache.prefix_cache", component="cached_prompt"
    )
    factories.hourly_class(hour=at(DAY1), tokens=720, dims=batch)
    factories.hourly_class(hour=at(DAY1), tokens=280, dims=batch, reason="waste.timeout")
    HealthThreshold.objects.create(business_line="batch", effective_min=Decimal("0.70"))

    month_checks(month=SEP)

    # Of the computed tokens (the cache class aside, as every surface reads the ratio):
    # customer-service 74 % (under 75 %), search 76 % (19 % of all its tokens), batch 72 % (its own
    # row: 70 %), the company 2,220 of 3,000 = 74 %.
    assert sorted(Finding.objects.filter(kind="effective_share_low").values_list("business_line", flat=True)) == [
        "",
        "customer-service",
    ]
    finding = Finding.objects.get(kind="effective_share_low", business_line="customer-service")
    assert finding.action == "notify_product_owner"
    assert finding.figures == {"share": "0.7400", "minimum": "0.7500", "tokens": {"effective": 740, "waste": 260}}
    assert "74.0 %" in finding.message and "at least 75.0 %" in finding.message
    # A Chinese reader's close page and audit say it from the figures kept (apps/ledger/finding_text.py).
    with translation.override("zh-hans"):
        chinese = finding_text(
            kind=finding.kind, business_line=finding.business_line, period=finding.period, figures=finding.figures,
            message=finding.message,
        )  # fmt: skip
    said = "customer-service 的有效词元仅占实际计算词元的 74.0 %(健康值:至少 75.0 %)"
    assert chinese.startswith(f"{finding.period:%Y-%m} {said}")


def test_it_orders_a_degradation_audit_when_elastic_spend_passes_3_percent_of_revenue() -> None:
    ElasticWindow.objects.create(business_line="search", name="618", start=at(SEP), end=at(OCT))
    factories.hourly_cost(hour=at(DAY1), cost="31.00", dims=SEARCH)
    factories.hourly_cost(hour=at(DAY1), cost="29.00", dims=CS)
    ElasticWindow.objects.create(business_line="customer-service", name="peak", start=at(SEP), end=at(OCT))
    revenue_set(business_line="search", month=SEP, amount=Decimal("1000.00"), currency="CNY")
    revenue_set(business_line="customer-service", month=SEP, amount=Decimal("1000.00"), currency="CNY")
    month_accrue(month=SEP)

    month_checks(month=SEP)

    finding = Finding.objects.get(kind="elastic_over_revenue")
    assert (finding.business_line, finding.action) == ("search", "degradation_audit")
    assert finding.figures == {
        "elastic": "31.00", "currency": "CNY", "revenue": "1000.00", "ratio": "0.0310", "limit": "0.03"
    }  # fmt: skip


def test_it_asks_for_revenue_when_there_is_elastic_spend_without_it() -> None:
    ElasticWindow.objects.create(business_line="search", name="618", start=at(SEP), end=at(OCT))
    factories.hourly_cost(hour=at(DAY1), cost="1.00", dims=SEARCH)
    month_accrue(month=SEP)

    month_checks(month=SEP)

    assert ("revenue_missing", "search", "enter_revenue") in _kinds()


def test_it_warns_of_tech_debt_after_two_months_without_structural_spend() -> None:
    for day in (DAY1, DAY1.replace(month=10)):
        factories.hourly_cost(hour=at(day), cost="1.00", dims=SEARCH)
        factories.hourly_cost(hour=at(day), cost="1.00", dims=CS)
    factories.hourly_cost(hour=at(DAY1), cost="0.10", dims=CS, reason="effective.structural", component="structural")
    month_accrue(month=SEP)
    month_accrue(month=OCT)

    month_checks(month=OCT)

    finding = Finding.objects.get(kind="structural_zero")
    assert (finding.business_line, finding.action) == ("search", "tech_debt_warning")
    assert finding.figures == {"months": ["2026-09", "2026-10"]}


def test_it_does_not_warn_a_business_line_new_this_month() -> None:
    factories.hourly_cost(hour=at(DAY1.replace(month=10)), cost="1.00", dims=SEARCH)
    month_accrue(month=OCT)

    month_checks(month=OCT)

    assert not Finding.objects.filter(kind="structural_zero").exists()


def test_it_stores_the_findings_at_close_and_keeps_unchanged_ones_on_a_second_close() -> None:
    factories.dimset(SEARCH)
    factories.hourly_class(hour=at(DAY1), tokens=100, dims=SEARCH, reason="waste.error")
    first = period_close(month=SEP, now=datetime(2026, 10, 2, tzinfo=UTC))
    Finding.objects.update(delivered_at=datetime(2026, 10, 2, 1, tzinfo=UTC))

    period_reopen(month=SEP, user=factories.finance_user("root", role="admin"), reason="restate")
    second = period_close(month=SEP, now=datetime(2026, 10, 3, tzinfo=UTC))

    assert {f.kind for f in first.findings} == {"effective_share_low"}
    assert [f.pk for f in second.findings] == [f.pk for f in first.findings]
    assert not Finding.objects.filter(delivered_at__isnull=True).exists()
