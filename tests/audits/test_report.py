"""The report page and CSV (finance, engineer, admin; money for finance and admin only), the
summary to the channels, and the monthly beat job."""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
import time_machine
from django.test import Client

from apps.alerts import services as alerts
from apps.alerts.models import Alert
from apps.audits.models import AuditFinding, AuditReport
from apps.audits.services import report_broadcast
from costplatform.schedules import BEAT_SCHEDULE
from tests import factories
from tests.alerts.receivers import Receiver

pytestmark = [pytest.mark.django_db, pytest.mark.books_in("UTC")]
Role = Callable[[str | None], Client]
PAGE = "/audits/2026-11/"


@pytest.fixture
def as_role(db: None) -> Role:
    ids = itertools.count(1)

    def client(role: str | None) -> Client:
        browser = Client()
        if role is not None:
            browser.force_login(factories.finance_user(f"user-{role}-{next(ids)}", role=role))
        return browser

    return client


@pytest.fixture
def report() -> AuditReport:
    """A stored report: a zombie in data-platform and duplicates in search."""
    at = datetime(2026, 12, 1, 4, tzinfo=UTC)
    made = AuditReport.objects.create(
        month=date(2026, 11, 1),
        currency="CNY",
        tokens=9_000_000,
        savings_tokens=1_900_000,
        savings=Decimal("5.43"),
        started_at=at,
        finished_at=at,
    )
    for position, (kind, title, dims, saved, money) in enumerate(
        [
            ("zombie", "Zombie workload: load-test", {"business_line": "data-platform"}, 1_800_000, "5.035184"),
            ("duplicate", "Duplicate computation: 55 repeated prompts", {"business_line": "search"}, 100_000, "0.4"),
        ],
        start=1,
    ):
        AuditFinding.objects.create(
            report=made,
            position=position,
            kind=kind,
            title=title,
            dims=dims,
            tokens=saved,
            savings_tokens=saved,
            savings=Decimal(money),
            evidence=f"/api/v1/records?dims.business_line={dims['business_line']}",
            suggestion=f"Cut the {kind}.",
        )
    return made


@pytest.mark.parametrize("role", ["finance", "admin"])
def test_it_shows_findings_with_money_to_finance_and_admin(as_role: Role, report: AuditReport, role: str) -> None:
    html = as_role(role).get(PAGE).content.decode()

    assert "Zombie workload: load-test" in html and "Duplicate computation: 55 repeated prompts" in html
    assert "5.04 CNY" in html and "5.43 CNY" in html
    assert 'href="/api/v1/records?dims.business_line=search"' in html and "Cut the zombie." in html


def test_it_shows_engineers_tokens_but_no_money(as_role: Role, report: AuditReport) -> None:
    response = as_role("engineer").get(PAGE)

    html = response.content.decode()
    assert response.status_code == 200 and "Zombie workload: load-test" in html and "1,900,000" in html
    assert "CNY" not in html and "5.43" not in html and "5.04" not in html


@pytest.mark.parametrize("role", ["viewer", None])
def test_it_keeps_the_report_from_others(as_role: Role, report: AuditReport, role: str | None) -> None:
    response = as_role(role).get(PAGE)

    assert response.status_code == (403 if role else 302)
    assert as_role(role).get(PAGE + "?download=csv").status_code == (403 if role else 302)
    assert as_role(role).get("/audits/").status_code == (403 if role else 302)


def test_it_lists_the_reports(as_role: Role, report: AuditReport) -> None:
    html = as_role("engineer").get("/audits/").content.decode()

    assert f'href="{PAGE}"' in html and "CNY" not in html


def test_it_names_the_kinds_of_finding_in_chinese_after_the_language_switch(as_role: Role, report: AuditReport) -> None:
    client = as_role("finance")
    assert "<h2>Zombie workloads</h2>" in client.get(PAGE).content.decode()

    html = client.post("/i18n/setlang/", {"language": "zh-hans", "next": PAGE}, follow=True).content.decode()

    assert "<h2>僵尸工作负载</h2>" in html and "<h2>重复计算</h2>" in html


def test_it_gives_each_findings_suggestion_in_chinese_with_its_own_figures(as_role: Role, report: AuditReport) -> None:
    AuditFinding.objects.create(
        report=report,
        position=3,
        kind="model_mismatch",
        title="Model mismatch: 80% of qwen-72b requests in search fit qwen-7b",
        dims={"business_line": "search"},
        model="qwen-72b",
        tokens=5_000_000,
        savings_tokens=0,
        evidence="/api/v1/records?dims.business_line=search",
        suggestion="4,000 of 5,000 requests to qwen-72b had at most 512 prompt and 64 completion tokens: route ...",
        figures={"requests": 5000, "fitting": 4000, "small_model": "qwen-7b"},
    )
    client = as_role("finance")
    english = client.get(PAGE).content.decode()

    chinese = client.post("/i18n/setlang/", {"language": "zh-hans", "next": PAGE}, follow=True).content.decode()

    assert "4,000 of 5,000 requests to qwen-72b had at most 512 prompt" in english
    assert "发往 qwen-72b 的 5,000 个请求中有 4,000 个简短简单" in chinese and "把这类请求路由到 qwen-7b" in chinese
    assert "几乎每个小时都在稳定消耗" in chinese and "相同的提示词被其他用户和会话再次计算" in chinese
    assert "Cut the zombie." not in chinese and "requests to qwen-72b" not in chinese


def test_it_answers_404_for_a_month_without_a_report(as_role: Role) -> None:
    assert as_role("finance").get(PAGE).status_code == 404
    assert as_role("finance").get("/audits/2026-13/").status_code == 404


def read_csv(response: object) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(response.content.decode("utf-8-sig"))))  # type: ignore[attr-defined]


def test_it_downloads_the_csv_with_money_for_finance(as_role: Role, report: AuditReport) -> None:
    response = as_role("finance").get(PAGE + "?download=csv")

    assert response["Content-Type"].startswith("text/csv")
    assert 'filename="audit-2026-11.csv"' in response["Content-Disposition"]
    rows = read_csv(response)
    assert [(r["kind"], r["dims"], r["savings_tokens"], r["savings"], r["currency"]) for r in rows] == [
        ("zombie", "business_line=data-platform", "1800000", "5.04", "CNY"),
        ("duplicate", "business_line=search", "100000", "0.40", "CNY"),
    ]
    assert rows[1]["evidence"] == "/api/v1/records?dims.business_line=search"


def test_the_csv_of_a_chinese_reader_has_a_chinese_header_and_findings(as_role: Role, report: AuditReport) -> None:
    browser = as_role("finance")
    browser.cookies["django_language"] = "zh-hans"

    rows = read_csv(browser.get(PAGE + "?download=csv"))

    assert list(rows[0]) == [
        "类型", "发现", "维度", "模型", "词元", "可节省词元", "依据", "建议", "计入合计", "可节省金额", "币种",
    ]  # fmt: skip
    assert [(r["类型"], r["维度"], r["计入合计"]) for r in rows] == [
        ("zombie", "business_line=data-platform", "是"), ("duplicate", "business_line=search", "是"),
    ]  # fmt: skip
    assert rows[0]["发现"] == "僵尸工作负载：业务线 = data-platform"  # noqa: RUF001 (the Chinese colon of the text)
    assert rows[0]["建议"].startswith("几乎每个小时都在稳定消耗")  # the kind's, not the stored English one


def test_it_downloads_the_csv_without_money_for_engineers(as_role: Role, report: AuditReport) -> None:
    rows = read_csv(as_role("engineer").get(PAGE + "?download=csv"))

    assert len(rows) == 2 and "savings" not in rows[0] and "currency" not in rows[0]
    assert rows[0]["suggestion"] == "Cut the zombie."


def test_it_sends_the_summary_once_to_the_routed_channels(report: AuditReport, settings: object) -> None:
    settings.ALERTS_OUTBOUND_ALLOW = ["127.0.0.1/32"]  # type: ignore[attr-defined]
    receiver = Receiver()
    try:
        everyone = factories.channel("webhook", url=receiver.url("/all"), secret="s1", min_severity=20)
        factories.channel("webhook", url=receiver.url("/search"), secret="s2", business_lines=["search"])

        assert report_broadcast(report_id=report.pk) == 3  # the whole report, data-platform, search
        assert report_broadcast(report_id=report.pk) == 0  # sent once
        for alert in Alert.objects.all():
            for notification in alert.notifications.all():
                alerts.notification_send(notification_id=notification.id, retry_delays=[1.0])
    finally:
        receiver.close()

    got = {(r.path, r.json()["title"]): r.json() for r in receiver.received}
    assert set(got) == {
        ("/all", "Token audit 2026-11"),
        ("/all", "Token audit 2026-11: data-platform"),
        ("/all", "Token audit 2026-11: search"),
        ("/search", "Token audit 2026-11: search"),
    }
    whole = str(got[("/all", "Token audit 2026-11")])
    assert "2 findings" in whole and "1,900,000 tokens" in whole and "Zombie workload: load-test" in whole
    assert "CNY" not in whole  # money only on the page, for finance (AUDIT_BROADCAST_MONEY)
    search = str(got[("/search", "Token audit 2026-11: search")])
    assert "Duplicate computation" in search and "Zombie" not in search
    assert everyone.pk


def test_it_sends_the_summary_in_the_channels_language(report: AuditReport, settings: object) -> None:
    settings.ALERTS_OUTBOUND_ALLOW = ["127.0.0.1/32"]  # type: ignore[attr-defined]
    receiver = Receiver()
    try:
        for language in ("zh-hans", "en"):
            factories.channel("webhook", url=receiver.url(f"/{language}"), language=language, business_lines=["search"])

        report_broadcast(report_id=report.pk)
        for alert in Alert.objects.all():
            for notification in alert.notifications.all():
                alerts.notification_send(notification_id=notification.id, retry_delays=[1.0])
    finally:
        receiver.close()

    got = {r.path: r.json() for r in receiver.received}
    chinese, english = str(got["/zh-hans"]), str(got["/en"])
    assert got["/zh-hans"]["title"] == "词元审计 2026-11: search"
    assert "**1 项发现**\uff0c预计可节省 **100,000 词元**" in chinese  # full-width comma and colon
    assert "- 重复计算\uff1a业务线 = search (100,000 词元)" in chinese
    assert "findings" not in chinese and "Duplicate computation: 55 repeated prompts" not in chinese
    assert got["/en"]["title"] == "Token audit 2026-11: search"
    assert "**1 findings**, estimated savings **100,000 tokens**" in english
    assert "Duplicate computation: 55 repeated prompts (100,000 tokens)" in english


def test_the_beat_job_audits_the_previous_month_on_the_first() -> None:
    from apps.audits.tasks import previous_month_audit

    entry = BEAT_SCHEDULE["audits-previous-month"]
    assert entry["task"] == "apps.audits.tasks.previous_month_audit"
    assert entry["schedule"].day_of_month == {1, 2, 28, 29, 30, 31}
    with time_machine.travel(datetime(2026, 12, 1, 4, tzinfo=UTC), tick=False):
        previous_month_audit.apply(kwargs={}).get()  # no channels: the summary goes nowhere
    assert list(AuditReport.objects.values_list("month", flat=True)) == [date(2026, 11, 1)]


@pytest.mark.parametrize(
    ("zone", "before", "at"),
    [
        ("Asia/Shanghai", datetime(2026, 11, 30, 19, tzinfo=UTC), datetime(2026, 11, 30, 20, tzinfo=UTC)),
        ("America/New_York", datetime(2026, 12, 1, 8, tzinfo=UTC), datetime(2026, 12, 1, 9, tzinfo=UTC)),
    ],
)
def test_the_beat_job_audits_once_from_four_on_the_local_first(
    settings: Any, zone: str, before: datetime, at: datetime
) -> None:
    from apps.audits.tasks import previous_month_audit

    settings.ACCOUNTING_TZ = zone
    for moment, runs in ((before, 0), (at, 1), (at + timedelta(hours=1), 1)):
        with time_machine.travel(moment, tick=False):
            previous_month_audit.apply(kwargs={}).get()
        assert AuditReport.objects.filter(month=date(2026, 11, 1)).count() == runs, moment
    first = AuditReport.objects.get(month=date(2026, 11, 1))
    assert first.started_at == at  # the first run after 04:00 local audited it; later ones left it


def test_it_shows_a_scoped_user_only_the_findings_of_its_business_lines(report: AuditReport) -> None:
    from apps.accounts.models import UserScope

    user = factories.finance_user("scoped-auditor", role="finance")
    UserScope.objects.create(user=user, business_lines=["search"])
    browser = Client()
    browser.force_login(user)

    html = browser.get(PAGE).content.decode()
    assert "Duplicate computation: 55 repeated prompts" in html and "Zombie workload" not in html
    assert "0.40 CNY" in html and "5.43" not in html and "1,900,000" not in html
    rows = read_csv(browser.get(PAGE + "?download=csv"))
    assert [r["kind"] for r in rows] == ["duplicate"]
    listed = browser.get("/audits/").content.decode()
    assert "100,000" in listed and "9,000,000" not in listed and "1,900,000" not in listed
