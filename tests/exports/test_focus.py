"""The FOCUS 1.2 export (focus_version=1.2) checked against the specification's column rules."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.test import Client

from apps.exports.focus import COLUMNS
from apps.ledger.services.accrual import month_accrue
from apps.ledger.services.periods import period_close
from apps.pricing.models import HourlyCost
from apps.pricing.services import hours_price
from tests import factories
from tests.ledger.helpers import DAY1, OCT, SEP, at

pytestmark = [pytest.mark.django_db, pytest.mark.books_in("UTC")]
Role = Callable[[str | None], Client]

MANDATORY = {  # FOCUS 1.2 columns a dataset must have (and the conditional ones we can fill)
    "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodEnd",
    "BillingPeriodStart", "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargePeriodEnd",
    "ChargePeriodStart", "ContractedCost", "EffectiveCost", "InvoiceIssuerName", "ListCost", "PricingQuantity",
    "PricingUnit", "ProviderName", "PublisherName", "ServiceCategory", "ServiceName", "ServiceSubcategory",
    "ConsumedQuantity", "ConsumedUnit", "ResourceId", "SubAccountId", "Tags", "ChargeFrequency", "PricingCategory",
}  # fmt: skip
DECIMALS = ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "ConsumedQuantity", "PricingQuantity")
NUMERIC = re.compile(r"^-?\d+(\.\d+)?$")  # Numeric Format: no sign for positives, no exponent, no commas
# ISO 8601 with the accounting zone's offset (the instant and the local midnight both readable)
DATETIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d$")
ALLOWED = {
    "ChargeCategory": {"Usage", "Purchase", "Tax", "Credit", "Adjustment"},
    "ChargeClass": {"", "Correction"},
    "ChargeFrequency": {"One-Time", "Recurring", "Usage-Based"},
    "PricingCategory": {"Standard", "Dynamic", "Committed", "Other"},
    "ServiceCategory": {"AI and Machine Learning"},
}


def _export(client: Client, period: str) -> list[dict[str, str]]:
    response = client.get(f"/api/v1/exports/focus?period={period}&focus_version=1.2")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    text = b"".join(response.streaming_content).decode()
    reader = csv.DictReader(io.StringIO(text))
    assert tuple(reader.fieldnames or ()) == COLUMNS
    return list(reader)


def _parse(ts: str) -> datetime:
    return datetime.fromisoformat(ts)


def _check_row(row: dict[str, str]) -> None:
    for column in MANDATORY:
        assert column in row
    for column in DECIMALS:
        assert NUMERIC.match(row[column]), (column, row[column])
    for column, allowed in ALLOWED.items():
        assert row[column] in allowed, (column, row[column])
    for column in ("BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd"):
        assert DATETIME.match(row[column]), (column, row[column])
    assert _parse(row["ChargePeriodEnd"]) - _parse(row["ChargePeriodStart"]) == timedelta(days=1)
    assert _parse(row["BillingPeriodStart"]) < _parse(row["BillingPeriodEnd"])
    assert row["BilledCost"] == row["EffectiveCost"] == row["ListCost"] == row["ContractedCost"]
    assert re.fullmatch(r"[A-Z]{3}", row["BillingCurrency"])
    for column in (
        "BillingAccountId",
        "ProviderName",
        "PublisherName",
        "InvoiceIssuerName",
        "ServiceName",
        "SubAccountId",
    ):
        assert row[column], column
    tags = json.loads(row["Tags"])
    assert isinstance(tags, dict) and all(isinstance(v, str | int | float | bool) for v in tags.values())
    if row["ChargeClass"] != "Correction":
        assert Decimal(row["ConsumedQuantity"]) > 0  # usage that is not a correction: positive
        assert _parse(row["BillingPeriodStart"]) <= _parse(row["ChargePeriodStart"]) < _parse(row["BillingPeriodEnd"])
    if row["ConsumedUnit"] == "Tokens":
        assert row["PricingUnit"] == "1000000 Tokens"
        assert Decimal(row["PricingQuantity"]) * 1_000_000 == Decimal(row["ConsumedQuantity"])
    else:
        assert (row["ConsumedUnit"], row["PricingUnit"], row["ResourceType"]) == ("Hours", "Hours", "GPU Pool")
    assert all(not c.startswith("x") or c.startswith("x_") for c in row)  # custom columns are x_-prefixed


def test_it_exports_a_row_per_day_model_cost_centre_and_account(as_role: Role) -> None:
    for day in (DAY1, DAY1 + timedelta(days=1)):
        factories.hourly_cost(
            hour=at(day, 1), cost="1.234567", tokens=1_500_000, dims={"business_line": "search", "team": "a"}
        )
        factories.hourly_cost(hour=at(day, 2), cost="0.5", model="llama3-8b", reason="waste.truncated")
    month_accrue(month=SEP)

    rows = _export(as_role("finance"), "2026-09")

    for row in rows:
        _check_row(row)
    keys = [(r["ChargePeriodStart"], r["ResourceId"], r["SubAccountId"], r["x_Account"]) for r in rows]
    assert len(keys) == len(set(keys)) == 4
    search = next(r for r in rows if r["SubAccountId"] == "search")
    assert (search["BilledCost"], search["ConsumedQuantity"], search["PricingQuantity"]) == ("1.23", "1500000", "1.5")
    assert (search["ConsumedUnit"], search["BillingCurrency"], search["ChargeClass"]) == ("Tokens", "CNY", "")
    assert json.loads(search["Tags"]) == {
        "business_line": "search",
        "team": "a",
        "costplatform/account": "6401.01",
        "costplatform/cost_centre": "search",
    }
    assert (search["BillingPeriodStart"], search["BillingPeriodEnd"]) == (
        "2026-09-01T00:00:00+00:00",
        "2026-10-01T00:00:00+00:00",
    )
    assert search["ChargePeriodStart"] == "2026-09-10T00:00:00+00:00"
    assert sum(Decimal(r["BilledCost"]) for r in rows) == Decimal("3.47")  # 1.234567 x 2 + 0.5 x 2, rounded once


def test_it_exports_adjustments_as_corrections_of_the_closed_period(as_role: Role) -> None:
    row = factories.hourly_cost(hour=at(DAY1, 1), cost="10.00", tokens=1000)
    period_close(month=SEP, now=datetime(2026, 10, 2, tzinfo=UTC))
    HourlyCost.objects.filter(pk=row.pk).delete()
    factories.hourly_cost(hour=at(DAY1, 1), cost="7.00", tokens=700)
    month_accrue(month=SEP)

    (correction,) = _export(as_role("finance"), "2026-10")

    _check_row(correction)
    assert (correction["ChargeClass"], correction["BilledCost"], correction["ConsumedQuantity"]) == (
        "Correction",
        "-3.00",
        "-300",
    )
    assert correction["ChargePeriodStart"] == "2026-09-10T00:00:00+00:00"  # the usage day it corrects
    assert correction["BillingPeriodStart"] == f"{OCT:%Y-%m-%d}T00:00:00+00:00"
    assert correction["x_AdjustsPeriod"] == "2026-09"


@time_machine.travel(datetime(2025, 3, 12, tzinfo=UTC), tick=False)
def test_it_exports_idle_capacity_in_pool_hours(as_role: Role) -> None:
    factories.cost_pool(capacity=1000)
    hours_price(start=datetime(2025, 3, 10, 1, tzinfo=UTC), end=datetime(2025, 3, 10, 4, tzinfo=UTC))
    month_accrue(month=datetime(2025, 3, 1).date())

    (idle,) = _export(as_role("admin"), "2025-03")

    _check_row(idle)
    assert (idle["BilledCost"], idle["ConsumedQuantity"], idle["x_Account"]) == ("60.00", "3", "6401.06")
    assert idle["ResourceId"].startswith("pool:")
