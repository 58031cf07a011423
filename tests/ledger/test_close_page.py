"""The close page: the checklist computed live from the books, and the two-person close
(submit, approve by another, reject, withdraw, reopen by an admin), each step audited and on
the page's history."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from django.utils import timezone

from apps.accounts.models import UserScope
from apps.auditlog.models import AuditEntry
from apps.common.buckets import month_of, previous_month
from apps.ledger.models import CloseRequest, Period, PeriodEvent
from apps.ledger.services.accrual import recent_accrue
from apps.ledger.services.closing import CloseError, close_checklist, close_request_submit
from apps.ledger.services.periods import period_close
from apps.plans.planning import budget_set
from apps.pricing.services import dirty_hours_price, price_set
from tests import factories
from tests.conftest import Collector

pytestmark = pytest.mark.django_db

LAST = previous_month(month_of(timezone.now()))  # a month that has ended
DAY = LAST.replace(day=10)
HOUR = datetime(DAY.year, DAY.month, DAY.day, 9, tzinfo=UTC)
LABEL = f"{LAST:%Y-%m}"
PAGE, ACT = f"/finance/close/{LABEL}/", f"/finance/close/{LABEL}/act/"


CLEAN = {"tokens.prompt_cached": 0}  # every token effective: the month-end checks find nothing


def records(count: int, hour: int = 0, **overrides: Any) -> list[dict[str, Any]]:
    ts = (HOUR + timedelta(hours=hour, minutes=5)).isoformat()
    return [factories.record(ts=ts, prompt_hash=None, **overrides) for _ in range(count)]


def priced(collector: Collector, batch: list[dict[str, Any]]) -> None:
    """Ingest (which classifies and marks the hours dirty), then the pricing job's run."""
    assert collector.send(batch).json()["accepted"] == len(batch)
    price_set(
        model_pattern="qwen*",
        prices={"input": Decimal("2"), "cached_input": Decimal("0.5"), "output": Decimal("8")},
        effective_from=HOUR - timedelta(days=30),
    )
    dirty_hours_price(max_days=60)


def states(client: Client, url: str = PAGE) -> dict[str, str]:
    html = client.get(url).content.decode()
    return {key: state for state, key in re.findall(r'<tr class="(ok|not)" data-key="(\w+)"', html)}


def person(name: str, role: str = "finance", lines: list[str] | None = None) -> tuple[Any, Client]:
    user = factories.finance_user(name, role=role)
    if lines:
        UserScope.objects.create(user=user, business_lines=lines)
    client = Client()
    client.force_login(user)
    return user, client


def closed() -> bool:
    return Period.objects.filter(month=LAST, status="closed").exists()


# --- the checklist -------------------------------------------------------------------------------


def test_it_shows_every_check_to_look_at_for_a_month_with_loose_ends(collector: Collector) -> None:
    batch = [
        *records(1),
        *records(3, **{"outcome.status": "timeout", "outcome.finish_reason": None}),  # mostly waste
        *records(1, model="llama-3-70b"),  # no price matches it
        *records(1, dims={"team": "nobody"}),  # no business line
    ]
    priced(collector, batch)
    assert collector.send(records(1, hour=2)).json()["accepted"] == 1  # not priced yet: a dirty hour
    budget_set(business_line="ghost-line", month=LAST, amount=Decimal("100"), currency="CNY")
    _, finance = person("fiona")

    items = {item.key: item for item in close_checklist(month=LAST)}

    # Nothing priced in USD; no supplier set up.
    assert states(finance) == dict.fromkeys(items, "not") | {"missing_rates": "ok", "supplier_bills": "ok"}
    assert items["unpriced_models"].value == 1 and "llama-3-70b" in items["unpriced_models"].detail
    assert items["unattributed"].value != "0.0 %"
    assert items["days_not_accrued"].value == 1 and f"{DAY:%m-%d}" in items["days_not_accrued"].detail
    assert items["dirty_days"].value >= 2  # the unpriced hour, and the day pricing marked for re-booking
    assert "effective share low: customer-service" in items["open_findings"].detail
    assert items["budgets_unspent"].value == 1 and "ghost-line" in items["budgets_unspent"].detail
    assert f'<a href="/finance/close/{LABEL}/items/unpriced_models/">' in finance.get(PAGE).content.decode()


def test_it_shows_every_check_ok_once_the_month_is_clean(collector: Collector) -> None:
    priced(collector, records(4, **CLEAN))
    recent_accrue()  # books the days pricing marked, and consumes the marks
    budget_set(business_line="customer-service", month=LAST, amount=Decimal("100"), currency="CNY")
    _, finance = person("fiona")

    assert states(finance) == dict.fromkeys(
        [
            "unpriced_models",
            "unattributed",
            "days_not_accrued",
            "dirty_days",
            "open_findings",
            "budgets_unspent",
            "missing_rates",
            "supplier_bills",
        ],
        "ok",
    )
    assert [item.value for item in close_checklist(month=LAST)] == [0, "0.0 %", 0, 0, 0, 0, 0, 0]


def test_it_marks_a_day_stale_when_its_priced_rows_change_after_accrual(collector: Collector) -> None:
    priced(collector, records(2))
    recent_accrue()
    assert close_checklist(month=LAST)[2].ok

    priced(collector, records(1, hour=1))  # a late record, priced; the accrual job has not run

    assert close_checklist(month=LAST)[2].value == 1


def test_a_scoped_finance_user_reads_the_checklist_of_their_lines_but_cannot_close(collector: Collector) -> None:
    priced(collector, records(2))
    budget_set(business_line="hidden-line", month=LAST, amount=Decimal("5"), currency="CNY")
    budget_set(business_line="mine", month=LAST, amount=Decimal("5"), currency="CNY")
    _, scoped = person("scoped", lines=["mine"])

    page = scoped.get(PAGE).content.decode()

    assert "hidden-line" not in page and "mine" in page and 'id="submit"' not in page
    assert scoped.post(ACT, {"action": "submit", "note": "x"}).status_code == 403
    assert not CloseRequest.objects.exists()


def test_engineers_and_viewers_are_refused_the_close_page(as_role: Callable[[str | None], Client]) -> None:
    for role in ("engineer", "viewer"):
        assert as_role(role).get(PAGE).status_code == 403
        assert as_role(role).post(ACT, {"action": "submit"}).status_code == 403


# --- the workflow --------------------------------------------------------------------------------


@pytest.fixture
def booked() -> None:
    factories.hourly_cost(hour=HOUR, cost="10.00")


@pytest.mark.usefixtures("booked")
def test_it_closes_a_month_only_when_a_second_finance_user_approves() -> None:
    preparer, first = person("pat")
    approver, second = person("alex")

    answer = first.post(ACT, {"action": "submit", "note": "November looks right"}, follow=True)

    assert "submitted for closing" in answer.content.decode()
    request = CloseRequest.objects.get()
    assert (request.state, request.prepared_by, request.note) == ("submitted", preparer, "November looks right")
    assert [item["key"] for item in request.checklist][:2] == ["unpriced_models", "unattributed"]
    assert set(request.checklist[0]) == {"key", "label", "value", "ok", "detail", "details"}
    assert not closed()

    page = second.post(ACT, {"action": "approve", "note": "checked"}, follow=True).content.decode()

    assert closed()
    request.refresh_from_db()
    assert (request.state, request.decided_by, request.decision_note) == ("approved", approver, "checked")
    assert 'id="approved-request"' in page and "Checklist as approved" in page
    assert re.findall(r'<tr data-action="(\w+)"', page) == ["approved", "closed", "submitted"]


@pytest.mark.usefixtures("booked")
def test_it_refuses_to_let_the_preparer_approve_their_own_request() -> None:
    _, first = person("pat")
    first.post(ACT, {"action": "submit"})

    page = first.post(ACT, {"action": "approve"}, follow=True).content.decode()

    assert "you prepared this close request" in page
    assert CloseRequest.objects.get().state == "submitted"
    assert not closed()
    assert 'value="approve"' not in first.get(PAGE).content.decode()  # the page does not offer it either


@pytest.mark.usefixtures("booked")
def test_a_rejection_needs_a_note_and_leaves_the_month_open_for_a_new_request() -> None:
    _, first = person("pat")
    _, second = person("alex")
    first.post(ACT, {"action": "submit"})

    assert "say why" in second.post(ACT, {"action": "reject"}, follow=True).content.decode()
    second.post(ACT, {"action": "reject", "note": "budgets missing"})

    request = CloseRequest.objects.get()
    assert (request.state, request.decision_note) == ("rejected", "budgets missing")
    assert not closed()
    first.post(ACT, {"action": "submit", "note": "budgets in"})
    assert CloseRequest.objects.filter(state="submitted").count() == 1


@pytest.mark.usefixtures("booked")
def test_only_the_preparer_withdraws_a_request() -> None:
    _, first = person("pat")
    _, second = person("alex")
    first.post(ACT, {"action": "submit"})

    assert "only the user who prepared" in second.post(ACT, {"action": "withdraw"}, follow=True).content.decode()
    first.post(ACT, {"action": "withdraw"})

    assert CloseRequest.objects.get().state == "withdrawn"
    assert not closed()


@pytest.mark.usefixtures("booked")
def test_it_refuses_a_second_waiting_request_a_closed_month_and_a_month_not_ended() -> None:
    preparer, first = person("pat")
    first.post(ACT, {"action": "submit"})

    assert "already has a close request waiting" in first.post(ACT, {"action": "submit"}, follow=True).content.decode()
    with pytest.raises(CloseError, match="already has a close request waiting"):
        close_request_submit(month=LAST, user=preparer)
    this_month = f"/finance/close/{month_of(timezone.now()):%Y-%m}/"
    answer = first.post(this_month + "act/", {"action": "submit"}, follow=True).content.decode()
    assert "has not ended yet" in answer
    assert "has not ended yet" in first.get(this_month).content.decode()
    period_close(month=LAST)
    CloseRequest.objects.update(state="withdrawn")
    assert "is already closed" in first.post(ACT, {"action": "submit"}, follow=True).content.decode()


@pytest.mark.usefixtures("booked")
def test_only_an_admin_reopens_and_only_with_a_reason() -> None:
    _, first = person("pat")
    _, second = person("alex")
    _, boss = person("ada", role="admin")
    first.post(ACT, {"action": "submit"})
    second.post(ACT, {"action": "approve"})

    assert 'id="reopen"' not in second.get(PAGE).content.decode()
    assert second.post(ACT, {"action": "reopen", "note": "typo"}).status_code == 403
    assert "say why" in boss.post(ACT, {"action": "reopen", "note": " "}, follow=True).content.decode()
    assert closed()

    page = boss.post(ACT, {"action": "reopen", "note": "late invoice"}, follow=True).content.decode()

    assert not closed()
    assert PeriodEvent.objects.filter(action="reopen", note="late invoice").exists()
    assert re.findall(r'<tr data-action="(\w+)"', page)[0] == "reopened" and "late invoice" in page


@pytest.mark.usefixtures("booked")
def test_every_step_is_in_the_audit_log_with_the_person_and_the_page() -> None:
    _, first = person("pat")
    _, second = person("alex")
    first.post(ACT, {"action": "submit", "note": "ready"})
    second.post(ACT, {"action": "approve"})

    entries = AuditEntry.objects.filter(model="ledger.CloseRequest").order_by("id")
    assert [(e.action, e.actor_name, e.source, e.path) for e in entries] == [
        ("create", "pat", "web", ACT),
        ("update", "alex", "web", ACT),
    ]
    assert entries[1].changes["state"] == ["submitted", "approved"]
    period = AuditEntry.objects.filter(model="ledger.Period").order_by("id").last()
    assert period is not None and (period.actor_name, period.source, period.after["status"]) == (
        "alex",
        "web",
        "closed",
    )


def test_the_history_shows_times_in_the_accounting_zone(settings: Any, booked: None) -> None:
    settings.ACCOUNTING_TZ = "Asia/Shanghai"
    _, first = person("pat")
    first.post(ACT, {"action": "submit"})
    submitted = CloseRequest.objects.get().submitted_at

    page = first.get(PAGE).content.decode()

    assert f"{submitted.astimezone(ZoneInfo('Asia/Shanghai')):%Y-%m-%d %H:%M:%S}" in page
    assert "Times in Asia/Shanghai" in page


@pytest.mark.usefixtures("booked")
def test_the_chinese_page_translates_the_checklist_and_the_steps() -> None:
    _, first = person("pat")
    first.post(ACT, {"action": "submit"})
    first.cookies["django_language"] = "zh-hans"

    page = first.get(PAGE).content.decode()

    for chinese in ("结账", "未定价模型", "未归属占比", "尚未计提的天数", "无实际支出的预算", "已提交", "等待批准"):
        assert chinese in page
    for english in ("Unpriced models", "Budgets without actuals", "Every model with tokens", "Waiting for approval"):
        assert english not in page
    stored = CloseRequest.objects.get().checklist
    assert stored[0]["label"] == "Unpriced models" and stored[0]["detail"].startswith("Every model")  # kept in English
    # Each line's detail is a sentence with its figures: kept as each language said it when submitted.
    assert stored[0]["details"] == {"zh-hans": "本月所有有词元的模型都有价格或成本池。"}


@pytest.mark.usefixtures("booked")
def test_the_approved_checklist_reads_in_the_readers_language() -> None:
    _, first = person("pat")
    _, second = person("alex")
    first.post(ACT, {"action": "submit"})
    second.post(ACT, {"action": "approve"})
    assert closed()
    second.cookies["django_language"] = "zh-hans"

    page = second.get(PAGE).content.decode()

    assert "本月所有有词元的模型都有价格或成本池。" in page and "Every model with tokens" not in page
    details = [item["details"]["zh-hans"] for item in CloseRequest.objects.get().checklist]
    assert all(detail in page for detail in details)


@pytest.mark.usefixtures("booked")
def test_a_scoped_reader_of_a_closed_month_gets_the_checklist_of_their_lines_not_the_stored_one() -> None:
    budget_set(business_line="hidden-line", month=LAST, amount=Decimal("5"), currency="CNY")
    _, first = person("pat")
    _, second = person("alex")
    first.post(ACT, {"action": "submit"})
    second.post(ACT, {"action": "approve"})
    assert "hidden-line" in second.get(PAGE).content.decode()  # the stored checklist names it
    _, scoped = person("sam", lines=["customer-service"])

    page = scoped.get(PAGE).content.decode()

    assert "hidden-line" not in page and 'id="approved-request"' in page
