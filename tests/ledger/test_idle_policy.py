"""Who pays for idle capacity: the policy in force books each pool-hour's idle to the platform
(showback), to the lines that used the pool in the hour (by use) or by the lines' reserved shares,
exactly to the cent; a change re-books the open months it applies to and never a closed one.

The books are in March and April 2025 with the clock in late April (the pool-hours have ended),
every figure worked out by hand below."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.core.exceptions import ValidationError
from django.db import DatabaseError, transaction
from django.test import Client

from apps.auditlog.models import AuditEntry
from apps.currencies.rates import rate_set
from apps.finance.pack import cover_table
from apps.ledger.idle.models import IdlePolicy, ReservedShare
from apps.ledger.idle.services import idle_policy_set, reserved_share_set
from apps.ledger.models import JournalEntry, JournalLine
from apps.ledger.selectors import idle_by_line, trial_balance
from apps.ledger.services.accrual import month_accrue, month_window, range_accrue
from apps.ledger.services.periods import period_close, period_reopen
from apps.pricing.models import CostPool
from apps.pricing.services import hours_price
from tests import factories
from tests.ledger.helpers import account, balanced, spend

pytestmark = [pytest.mark.django_db, pytest.mark.books_in("UTC")]
Role = Callable[[str | None], Client]

FEB, MAR, APR = date(2025, 2, 1), date(2025, 3, 1), date(2025, 4, 1)
NOW = datetime(2025, 4, 20, tzinfo=UTC)
CS, SEARCH = {"business_line": "customer-service"}, {"business_line": "search"}
IDLE = "6401.06"


def at(day: date, hour: int) -> datetime:
    return datetime(day.year, day.month, day.day, hour, tzinfo=UTC)


def _pool_day(day: date) -> None:
    """Two hours of a pool of 20.00 an hour and 1,000 weighted tokens of capacity:

    hour 1: customer-service 300 uncached prompt tokens (weight 1: 300), search 100 output tokens
    (weight 4: 400); 700 of 1,000 used, so 14.00 allocated and 6.00 idle;
    hour 2: nobody used it: 20.00 idle."""
    factories.dimset(CS)
    factories.dimset(SEARCH)
    factories.hourly_class(hour=at(day, 1), tokens=300, dims=CS)
    factories.hourly_class(hour=at(day, 1), tokens=100, component="output", reason="effective.output", dims=SEARCH)
    hours_price(start=at(day, 1), end=at(day, 3))


@pytest.fixture
def pool() -> CostPool:
    with time_machine.travel(NOW, tick=False):
        pool = factories.cost_pool(capacity=1000)
        _pool_day(date(2025, 3, 10))
        _pool_day(date(2025, 4, 10))
    return pool


def idle_of(month: date) -> dict[str, Decimal]:
    """The month's idle-account lines per cost centre."""
    return {cc: amount for (code, cc), amount in spend(period_id=month).items() if code == IDLE}


def test_showback_keeps_all_idle_a_platform_cost(pool: CostPool) -> None:
    month_accrue(month=MAR)

    assert idle_of(MAR) == {"unassigned": Decimal("26.00")}  # 6.00 + 20.00
    line = JournalLine.objects.get(account=account(IDLE))
    assert "idle_policy" not in line.basis
    assert balanced()


def test_by_use_gives_each_hour_to_the_lines_that_used_it_and_keeps_unused_hours(pool: CostPool) -> None:
    idle_policy_set(month=MAR, policy=IdlePolicy.Policy.BY_USE)

    month_accrue(month=MAR)

    # Hour 1's 6.00 by 300 : 400: 2.571428... and 3.428571..., the cent left over to the larger
    # remainder (search); hour 2 nobody used: its 20.00 stays the platform's.
    assert idle_of(MAR) == {
        "customer-service": Decimal("2.57"),
        "search": Decimal("3.43"),
        "unassigned": Decimal("20.00"),
    }
    assert sum(idle_of(MAR).values()) == Decimal("26.00")  # the idle total unchanged to the cent
    search = JournalLine.objects.get(account=account(IDLE), cost_centre="search")
    basis = search.basis
    assert (basis["idle_policy"], Decimal(basis["idle_allocated"]), basis["idle_hours"]) == (
        "by_use",
        Decimal("3.43"),
        1,
    )
    platform = JournalLine.objects.get(account=account(IDLE), cost_centre="unassigned")
    assert (Decimal(platform.basis["idle_allocated"]), platform.pool_id) == (0, search.pool_id)
    assert balanced()
    book = trial_balance(month=MAR)["currencies"][0]
    assert book["debits"] == book["credits"]
    # The lines' own trial balance holds their idle and balances on its own.
    mine = trial_balance(month=MAR, business_lines=["search"])["currencies"][0]
    assert (mine["debits"], mine["credits"]) == (mine["credits"], Decimal("3.43") + _usage("search", MAR))


def _usage(cost_centre: str, month: date) -> Decimal:
    return sum(
        (a for (code, cc), a in spend(period_id=month).items() if cc == cost_centre and code != IDLE), Decimal(0)
    )


def test_by_reserved_share_books_each_share_and_leaves_the_unreserved_rest(pool: CostPool) -> None:
    pool_id = pool.pk
    reserved_share_set(pool_id=pool_id, business_line="customer-service", month=MAR, percent=Decimal(50))
    reserved_share_set(pool_id=pool_id, business_line="search", month=MAR, percent=Decimal("33.3"))
    idle_policy_set(month=MAR, policy=IdlePolicy.Policy.RESERVED)

    month_accrue(month=MAR)

    # Hour 1, 6.00: 3.00, 1.998 and 16.7 % = 1.002; floors 3.00 + 1.99 + 1.00 leave a cent for
    # search's .8. Hour 2, 20.00: 10.00, 6.66 and 3.34, exact. Used or not, shares are paid.
    assert idle_of(MAR) == {
        "customer-service": Decimal("13.00"),
        "search": Decimal("8.66"),
        "unassigned": Decimal("4.34"),
    }
    assert balanced()


def test_reserved_shares_add_up_to_a_hundred_at_most(pool: CostPool) -> None:
    pool_id = pool.pk
    reserved_share_set(pool_id=pool_id, business_line="customer-service", month=MAR, percent=Decimal(70))
    with pytest.raises(ValidationError, match=r"add up to 100\.0001 % from 2025-04"):
        reserved_share_set(pool_id=pool_id, business_line="search", month=APR, percent=Decimal("30.0001"))
    reserved_share_set(pool_id=pool_id, business_line="search", month=APR, percent=Decimal(30))


def test_a_policy_change_rebooks_the_open_months_and_leaves_a_closed_one(pool: CostPool) -> None:
    admin = factories.finance_user("root", role="admin")
    with time_machine.travel(NOW, tick=False):
        range_accrue(start=MAR, end=date(2025, 5, 1))
        period_close(month=MAR, now=NOW)
    march = _lines(MAR)

    with pytest.raises(ValidationError, match="2025-03 is closed"):
        idle_policy_set(month=MAR, policy=IdlePolicy.Policy.BY_USE)
    idle_policy_set(month=APR, policy=IdlePolicy.Policy.BY_USE, user=admin, note="chargeback from April")
    with time_machine.travel(NOW, tick=False):
        range_accrue(start=MAR, end=date(2025, 5, 1))

    assert _lines(MAR) == march  # closed: untouched, and no adjustment for it
    assert not JournalEntry.objects.filter(kind=JournalEntry.Kind.ADJUSTMENT).exists()
    assert idle_of(APR) == {
        "customer-service": Decimal("2.57"),
        "search": Decimal("3.43"),
        "unassigned": Decimal("20.00"),
    }
    change = AuditEntry.objects.filter(model="ledger.IdlePolicy").latest("id")
    assert change.after["policy"] == "by_use"

    # Reopened, March takes a policy too, and re-accrual moves its amounts.
    period_reopen(month=MAR, user=admin, reason="charge idle back from March")
    idle_policy_set(month=MAR, policy=IdlePolicy.Policy.BY_USE, user=admin)
    with time_machine.travel(NOW, tick=False):
        range_accrue(start=MAR, end=date(2025, 5, 1))
    assert idle_of(MAR) == idle_of(APR)
    assert balanced()


def _lines(month: date) -> list[tuple[object, ...]]:
    return sorted(
        JournalLine.objects.filter(period_id=month).values_list(
            "entry_id", "account__code", "cost_centre", "debit", "credit"
        )
    )


def test_going_back_to_showback_rebooks_the_open_month(pool: CostPool) -> None:
    idle_policy_set(month=MAR, policy=IdlePolicy.Policy.BY_USE)
    month_accrue(month=MAR)
    idle_policy_set(month=MAR, policy=IdlePolicy.Policy.SHOWBACK)

    result = month_accrue(month=MAR)

    assert result.days_computed >= 1  # the change bumped the config version: days booked again
    assert idle_of(MAR) == {"unassigned": Decimal("26.00")}


def test_idle_by_line_agrees_with_the_books_for_the_month_and_splits_any_hour(pool: CostPool) -> None:
    idle_policy_set(month=MAR, policy=IdlePolicy.Policy.BY_USE)
    month_accrue(month=MAR)
    window = month_window(MAR)

    month = idle_by_line(start=window.start, end=window.end)
    first_hour = idle_by_line(start=at(date(2025, 3, 10), 1), end=at(date(2025, 3, 10), 2))
    scoped = idle_by_line(start=window.start, end=window.end, business_lines=["search"])

    assert month.by_line == idle_of(MAR)
    assert (month.total, month.platform, month.allocated) == (Decimal("26.00"), Decimal("20.00"), Decimal("6.00"))
    assert month.policies == {"2025-03": "by_use"}
    assert first_hour.by_line == {"customer-service": Decimal("2.57"), "search": Decimal("3.43")}
    assert (scoped.by_line, scoped.platform) == ({"search": Decimal("3.43")}, 0)


def test_idle_by_line_follows_each_months_policy_across_months(pool: CostPool) -> None:
    idle_policy_set(month=APR, policy=IdlePolicy.Policy.BY_USE)

    both = idle_by_line(start=month_window(MAR).start, end=month_window(APR).end)

    assert both.policies == {"2025-03": "showback", "2025-04": "by_use"}
    assert both.by_line == {
        "unassigned": Decimal("46.00"),  # March's 26.00 as showback, April's unused hour
        "customer-service": Decimal("2.57"),
        "search": Decimal("3.43"),
    }


def test_focus_rows_follow_the_allocation(pool: CostPool, as_role: Role) -> None:
    idle_policy_set(month=MAR, policy=IdlePolicy.Policy.BY_USE)
    month_accrue(month=MAR)

    response = as_role("admin").get("/api/v1/exports/focus", {"period": "2025-03"})

    text = b"".join(response.streaming_content).decode()
    rows = [r for r in csv.DictReader(io.StringIO(text)) if r["x_Account"] == IDLE]
    by_centre = {r["SubAccountId"]: r for r in rows}
    assert {cc: r["BilledCost"] for cc, r in by_centre.items()} == {
        "customer-service": "2.57",
        "search": "3.43",
        "unassigned": "20.00",
    }
    search = by_centre["search"]
    assert (search["ConsumedQuantity"], search["ConsumedUnit"]) == ("1", "Hours")
    assert json.loads(search["Tags"])["costplatform/idle_policy"] == "by_use"
    assert "allocated" in search["ChargeDescription"]
    assert "costplatform/idle_policy" in json.loads(by_centre["unassigned"]["Tags"])


def test_a_day_without_pool_hours_books_no_idle(pool: CostPool) -> None:
    idle_policy_set(month=MAR, policy=IdlePolicy.Policy.BY_USE)
    month_accrue(month=MAR)

    other_day = idle_by_line(start=at(date(2025, 3, 11), 0), end=at(date(2025, 3, 11), 0) + timedelta(days=1))

    assert (other_day.by_line, other_day.total) == ({}, 0)


def test_an_idle_lines_drill_down_shows_its_share_of_each_pool_hour(pool: CostPool, as_role: Role) -> None:
    idle_policy_set(month=MAR, policy=IdlePolicy.Policy.BY_USE)
    month_accrue(month=MAR)
    search = JournalLine.objects.get(account=account(IDLE), cost_centre="search")
    platform = JournalLine.objects.get(account=account(IDLE), cost_centre="unassigned")

    mine = as_role("admin").get(f"/api/v1/ledger/journal/{search.pk}/usage").json()
    theirs = as_role("admin").get(f"/api/v1/ledger/journal/{platform.pk}/usage").json()

    assert [(r["idle"], r["share"]) for r in mine["rows"]] == [("6.00", "3.43"), ("20.00", "0")]
    assert [r["share"] for r in theirs["rows"]] == ["0", "20.00"]
    assert (mine["idle_policy"], mine["stale"]) == ("by_use", False)
    idle_policy_set(month=MAR, policy=IdlePolicy.Policy.SHOWBACK)  # not booked again yet
    assert as_role("admin").get(f"/api/v1/ledger/journal/{search.pk}/usage").json()["stale"] is True


@pytest.mark.parametrize(
    ("policy", "english", "chinese"),
    [
        (None, "stays a platform cost (showback), booked to the cost centre unassigned", "仍为平台成本"),
        ("by_use", "charged to the business lines that used each pool in the hour", "按用量分摊"),
        ("reserved", "by their reserved share of each pool", "预留份额"),
    ],
)
def test_the_finance_page_says_which_idle_policy_is_in_force(
    pool: object, as_role: Role, policy: str | None, english: str, chinese: str
) -> None:
    if policy is not None:
        idle_policy_set(month=MAR, policy=policy)
    month_accrue(month=MAR)
    finance = as_role("finance")

    page = finance.get("/finance/", {"month": "2025-03"}).content.decode()
    in_chinese = finance.get("/finance/", {"month": "2025-03"}, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()

    assert f'id="idle-policy" data-policy="{policy or "showback"}"' in page
    assert english in page
    assert chinese in in_chinese and english not in in_chinese
    assert 'href="/figures/#idle-policy"' in page
    assert as_role("finance").get("/figures/").content.decode().count('id="idle-policy"') == 1


def test_the_month_pack_names_the_policy_the_month_was_closed_with(pool: CostPool) -> None:
    idle_policy_set(month=MAR, policy=IdlePolicy.Policy.BY_USE)
    with time_machine.travel(NOW, tick=False):
        period_close(month=MAR, now=NOW)

    cover = {row["item"]: row["value"] for row in cover_table(month=MAR).rows}

    assert cover["Idle policy"] == "by use: the lines that used the pool in the hour"
    assert cover["Expense posted"].startswith(f"{sum(spend(period_id=MAR).values()):,.2f}")
    assert idle_of(MAR)["search"] == Decimal("3.43")


def _staff(role: str) -> Client:
    user = factories.finance_user(f"staff-{role}", role=role)
    user.is_staff = True
    user.save()
    browser = Client()
    browser.force_login(user)
    return browser


def test_finance_sets_the_policy_in_the_admin_for_open_months_only(pool: CostPool) -> None:
    finance = _staff("finance")
    march = idle_policy_set(month=MAR, policy=IdlePolicy.Policy.SHOWBACK)
    with time_machine.travel(NOW, tick=False):
        period_close(month=MAR, now=NOW)
    url = "/admin/ledger/idlepolicy/add/"

    refused = finance.post(url, {"month": "2025-03-01", "policy": "by_use", "note": "from March"})
    finance.post(url, {"month": "2025-04-01", "policy": "reserved", "note": "chargeback"})

    assert "2025-03 is closed" in refused.content.decode()
    row = IdlePolicy.objects.get(month=APR)
    assert (row.policy, row.changed_by.username, IdlePolicy.objects.count()) == ("reserved", "staff-finance", 2)
    assert AuditEntry.objects.filter(model="ledger.IdlePolicy").latest("id").actor_name == "staff-finance"
    shares = finance.post(
        "/admin/ledger/reservedshare/add/",
        {"pool": pool.pk, "business_line": "search", "month": "2025-04-01", "percent": "40", "note": ""},
    )
    assert shares.status_code == 302
    assert finance.get(f"/admin/ledger/idlepolicy/{row.pk}/delete/").status_code == 403  # finance never deletes
    admin = _staff("admin")
    assert admin.get(f"/admin/ledger/idlepolicy/{row.pk}/delete/").status_code == 200
    assert admin.get(f"/admin/ledger/idlepolicy/{march.pk}/delete/").status_code == 403  # March is closed


def test_a_pool_priced_in_another_currency_is_shared_out_and_converted_as_the_books_do() -> None:
    with time_machine.travel(NOW, tick=False):
        factories.cost_pool(capacity=1000, currency="USD")  # 20.00 USD an hour
        _pool_day(date(2025, 3, 10))
    rate_set(day=date(2025, 3, 10), currency="USD", rate="7.1", source="test")
    idle_policy_set(month=MAR, policy=IdlePolicy.Policy.BY_USE)
    month_accrue(month=MAR)
    window = month_window(MAR)

    found = idle_by_line(start=window.start, end=window.end)

    # 2.57, 3.43 and 20.00 USD at 7.1 CNY, exact; the books round each day's lines to the fen
    # (largest remainder), the day's total unchanged.
    assert found.by_line == {
        "customer-service": Decimal("18.247"),
        "search": Decimal("24.353"),
        "unassigned": Decimal("142.00"),
    }
    assert idle_of(MAR) == {
        "customer-service": Decimal("18.25"),
        "search": Decimal("24.35"),
        "unassigned": Decimal("142.00"),
    }
    assert found.total == sum(idle_of(MAR).values()) == Decimal("184.60")  # 26.00 USD
    search = JournalLine.objects.get(account=account(IDLE), cost_centre="search")
    assert (search.original_currency, search.original_amount) == ("USD", Decimal("3.43"))
    assert found.currency == "CNY" and found.platform == Decimal("142.00")


def test_idle_of_a_day_without_a_rate_is_left_out_and_said_so() -> None:
    with time_machine.travel(NOW, tick=False):
        factories.cost_pool(capacity=1000, currency="USD")
        _pool_day(date(2025, 3, 10))
    window = month_window(MAR)

    found = idle_by_line(start=window.start, end=window.end)

    assert (found.by_line, found.unconverted) == ({}, {"USD": Decimal("26.00")})


def test_the_database_refuses_a_setting_a_closed_month_used_whoever_writes_it(pool: CostPool) -> None:
    march = idle_policy_set(month=MAR, policy=IdlePolicy.Policy.SHOWBACK)
    share = reserved_share_set(pool_id=pool.pk, business_line="search", month=MAR, percent=Decimal(30))
    with time_machine.travel(NOW, tick=False):
        period_close(month=MAR, now=NOW)

    for write in (
        lambda: IdlePolicy.objects.filter(pk=march.pk).update(policy="by_use"),
        lambda: IdlePolicy.objects.filter(pk=march.pk).delete(),
        lambda: ReservedShare.objects.filter(pk=share.pk).update(percent=Decimal(40)),
        # A new line's share from February on would hold in March too.
        lambda: ReservedShare.objects.create(pool_id=pool.pk, business_line="legal", month=FEB, percent=Decimal(5)),
    ):
        with pytest.raises(DatabaseError, match="2025-03 is closed"), transaction.atomic():
            write()
    # From April on, or for February alone (March has its own), March keeps its setting.
    IdlePolicy.objects.create(month=APR, policy="by_use")
    IdlePolicy.objects.create(month=FEB, policy="by_use")
    ReservedShare.objects.create(pool_id=pool.pk, business_line="search", month=APR, percent=Decimal(40))
    assert IdlePolicy.objects.get(pk=march.pk).policy == "showback"
