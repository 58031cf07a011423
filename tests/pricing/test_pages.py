"""The prices page: unpriced models for every role, price versions and cost pools for money
readers."""

from __future__ import annotations

from datetime import timedelta

import pytest

from apps.pricing.services import hours_price
from tests import factories
from tests.conftest import T0
from tests.factories import record

pytestmark = pytest.mark.django_db


def test_prices_and_pools_are_for_money_readers(traffic, as_user) -> None:
    factories.cost_pool(name="gpu-a")

    finance = as_user("finance").get("/prices/").content.decode()
    engineer = as_user("engineer").get("/prices/").content.decode()

    assert "gpu-a" in finance and "8.000000" in finance
    assert "gpu-a" not in engineer and "8.000000" not in engineer


def test_it_lists_a_model_with_tokens_and_no_price_to_every_role(collector, as_user) -> None:
    hour = T0 + timedelta(hours=1)
    sent = record(model="llama-unpriced", prompt_hash=None, ts=(hour + timedelta(minutes=5)).isoformat())
    assert collector.send([sent]).json()["accepted"] == 1
    hours_price(start=hour, end=hour + timedelta(hours=1))  # no price, no pool: an unpriced hour

    page = as_user("viewer").get("/prices/").content.decode()

    unpriced = page.split('id="unpriced"', 1)[1].split("</table>", 1)[0]
    assert "llama-unpriced" in unpriced and "Every model is priced." not in unpriced
