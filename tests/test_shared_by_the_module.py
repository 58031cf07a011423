"""Rows a module's tests share (tests/conftest.py `shared_by_the_module`): each test finds them as
they were written, whatever the test before it changed, and they are gone after the module."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from decimal import Decimal
from typing import Any

import pytest

from apps.plans.models import Budget
from tests.conftest import shared_by_the_module

MONTH = date(2026, 10, 1)


@pytest.fixture(scope="module")
def a_budget(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    with shared_by_the_module(django_db_blocker):
        Budget.objects.create(business_line="support", month=MONTH, amount=Decimal("10"), currency="CNY")
        yield
    with django_db_blocker.unblock():
        assert not Budget.objects.filter(business_line="support", month=MONTH).exists(), "left after the module"


@pytest.mark.parametrize("change", ["delete", "raise", "add"])
def test_each_test_finds_the_shared_rows_as_written(a_budget: None, db: None, change: str) -> None:
    assert list(Budget.objects.values_list("business_line", "amount")) == [("support", Decimal("10"))]
    if change == "delete":
        Budget.objects.all().delete()
    elif change == "raise":
        Budget.objects.update(amount=Decimal("99"))
    else:
        Budget.objects.create(business_line="search", month=MONTH, amount=Decimal("1"), currency="CNY")
