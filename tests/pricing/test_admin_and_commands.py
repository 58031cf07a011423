"""The admin pages of pricing and the set_price command."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from apps.common.models import JobRun
from apps.pricing.models import DirtyHour, PriceVersion
from apps.pricing.services import hours_price, reprice_run
from tests import factories
from tests.pricing.helpers import DAY1, at

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client: Client, django_user_model: Any) -> Client:
    client.force_login(django_user_model.objects.create_superuser("admin", password="pw-for-tests-only"))
    return client


def test_it_lists_costs_idle_hours_and_runs_read_only(admin_client: Client, time_machine: Any) -> None:
    time_machine.move_to(DAY1 + timedelta(days=1), tick=False)
    factories.cost_pool()
    factories.hourly_class(hour=at(1), tokens=10)
    hours_price(start=at(1), end=at(2))
    reprice_run(start=DAY1.date(), end=DAY1.date() + timedelta(days=1))
    for name in ("hourlycost", "poolidlehour", "unpricedhour", "priceversion", "costpool"):
        assert admin_client.get(f"/admin/pricing/{name}/").status_code == 200, name
    assert admin_client.get("/admin/pricing/hourlycost/add/").status_code == 403
    runs = admin_client.get("/admin/common/jobrun/?kind=reprice")  # the runs of every job, read-only
    assert runs.status_code == 200 and "reprice" in runs.content.decode()
    run = JobRun.objects.get(kind="reprice")
    assert admin_client.get("/admin/common/jobrun/add/").status_code == 403
    assert admin_client.post(f"/admin/common/jobrun/{run.pk}/change/", {"status": "failed"}).status_code == 403
    assert JobRun.objects.get(pk=run.pk).status == JobRun.Status.DONE


def test_it_adds_a_price_version_with_prices_in_the_admin(admin_client: Client) -> None:
    form = {
        "name": "list 2025",
        "effective_from_0": "2025-03-10",
        "effective_from_1": "00:00:00",
        "currency": "CNY",
        "note": "",
        "prices-TOTAL_FORMS": "1",
        "prices-INITIAL_FORMS": "0",
        "prices-0-model_pattern": "qwen2.5-*",
        "prices-0-kind": "input",
        "prices-0-per_million": "2.5",
    }
    response = admin_client.post("/admin/pricing/priceversion/add/", form, follow=True)
    assert response.status_code == 200
    version = PriceVersion.objects.get()
    assert list(version.prices.values_list("model_pattern", "kind", "per_million")) == [
        ("qwen2.5-*", "input", Decimal("2.5"))
    ]
    assert "manage.py reprice --from 2025-03-10" in response.content.decode()


def test_it_refuses_a_version_off_the_hour(admin_client: Client) -> None:
    form = {
        "effective_from_0": "2025-03-10",
        "effective_from_1": "10:30:00",
        "currency": "CNY",
        "prices-TOTAL_FORMS": "0",
        "prices-INITIAL_FORMS": "0",
    }
    response = admin_client.post("/admin/pricing/priceversion/add/", form)
    assert "must start an hour of the books" in response.content.decode()
    assert not PriceVersion.objects.exists()


def test_it_sets_a_price_from_the_command_and_marks_recent_hours_for_repricing(time_machine: Any) -> None:
    time_machine.move_to(datetime(2025, 3, 10, 14, 20, tzinfo=UTC), tick=False)
    factories.price_version(effective_from=DAY1, prices={"llama-*": ("1", "1", "1")})
    out = io.StringIO()
    args = ["--model", "qwen2.5-*", "--input", "2", "--cached-input", "0.5", "--output", "6"]

    call_command("set_price", *args, "--from", "2025-03-10T12:00", stdout=out)

    version = PriceVersion.objects.get(effective_from=at(12))
    assert version.prices.count() == 6 and version.currency == "CNY"
    assert sorted(DirtyHour.objects.values_list("hour", flat=True)) == [at(12), at(13), at(14)]
    assert "3 hour(s)" in out.getvalue()

    call_command("set_price", *args, "--from", "2025-01-01T00:00", stdout=out)
    assert "manage.py reprice --from 2025-01-01 --to 2025-03-11" in out.getvalue()
    with pytest.raises(CommandError, match="one currency"):
        call_command("set_price", *args, "--currency", "USD", stdout=out)


def test_the_command_sets_a_reasoning_price_only_when_asked(time_machine: Any) -> None:
    time_machine.move_to(datetime(2025, 3, 10, 14, 20, tzinfo=UTC), tick=False)
    args = ["--model", "qwq-*", "--input", "2", "--cached-input", "0.5", "--output", "6"]

    call_command("set_price", *args, "--from", "2025-03-10T12:00", stdout=io.StringIO())
    call_command("set_price", *args, "--reasoning", "9", "--from", "2025-03-10T13:00", stdout=io.StringIO())

    kinds = {
        v.effective_from.hour: dict(v.prices.values_list("kind", "per_million")) for v in PriceVersion.objects.all()
    }
    assert "reasoning" not in kinds[12]
    assert kinds[13]["reasoning"] == 9 and kinds[13]["output"] == 6
