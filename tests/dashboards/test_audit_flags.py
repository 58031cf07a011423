"""The audit and the waste pages agree (issue 30, item 6): a finding of the audit on the scope a
page shows is flagged on the overview and the waste pages, linked to its row of the report, in
the reader's business lines only."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from apps.audits.models import AuditFinding, AuditReport
from apps.common.buckets import day_of, month_of, previous_month

pytestmark = pytest.mark.django_db


@pytest.fixture
def audited() -> str:
    """Last month's audit: a zombie job of data-platform (all effective tokens, so no waste shows
    it) and duplicates in search. Returns the month, YYYY-MM."""
    month = previous_month(month_of(datetime.now(UTC)))
    now = datetime.now(UTC)
    report = AuditReport.objects.create(month=month, currency="CNY", started_at=now, finished_at=now)
    found = [
        (
            "zombie",
            "Zombie workload: nightly-summary",
            {"business_line": "data-platform", "feature": "nightly-summary"},
        ),
        ("duplicate", "Duplicate computation: 55 repeated prompts", {"business_line": "search"}),
    ]
    for position, (kind, title, dims) in enumerate(found, start=1):
        AuditFinding.objects.create(
            report=report, position=position, kind=kind, title=title, dims=dims, model="qwen2.5-72b-instruct",
            tokens=1_000_000 // position, savings_tokens=1_000_000 // position, savings=Decimal(7123) / position,
            evidence="/api/v1/records", suggestion="Cut it.",
        )  # fmt: skip
    return f"{month:%Y-%m}"


def window(month: str) -> str:
    return f"from={month}-01&to={month}-10"


def flags(page: str) -> list[tuple[str, str]]:
    """(link, title) of each flagged finding; the link empty when the reader cannot open the audit."""
    section = re.search(r'<section class="audit-flags".*?</section>', page, re.S)
    if section is None:
        return []
    rows = re.findall(r'<li class="finding[^"]*" data-finding="\d+">(.*?)<span', section.group(0), re.S)
    found = []
    for row in rows:
        link = re.search(r'<a href="([^"]+)">([^<]+)</a>', row)
        found.append((html.unescape(link.group(1)), link.group(2)) if link else ("", row.strip()))
    return found


def test_the_overview_flags_the_audits_findings_with_links_to_them(audited: str, as_user) -> None:
    page = as_user("engineer").get(f"/overview/?{window(audited)}").content.decode()

    assert flags(page) == [
        (f"/audits/{audited}/#finding-1", "Zombie workload: nightly-summary"),
        (f"/audits/{audited}/#finding-2", "Duplicate computation: 55 repeated prompts"),
    ]
    assert "1,000,000 tokens to save" in page and "7,123.00 CNY" not in page  # an engineer sees no money
    report = as_user("engineer").get(f"/audits/{audited}/").content.decode()
    assert 'id="finding-1"' in report and 'id="finding-2"' in report


def test_the_waste_page_flags_only_the_findings_of_its_scope(audited: str, as_user) -> None:
    engineer = as_user("engineer")
    search = engineer.get(f"/waste/?{window(audited)}&dims.business_line=search").content.decode()
    zombie = engineer.get(f"/waste/?{window(audited)}&dims.feature=nightly-summary&class=effective").content.decode()
    grouped = engineer.get(f"/waste/?{window(audited)}&group=feature&model=qwen2.5-7b-instruct").content.decode()

    assert [title for _, title in flags(search)] == ["Duplicate computation: 55 repeated prompts"]
    assert [title for _, title in flags(zombie)] == ["Zombie workload: nightly-summary"]
    assert flags(grouped) == []  # another model's requests
    feature = engineer.get(f"/waste/?{window(audited)}&dims.business_line=search&dims.feature=rank").content.decode()
    assert [title for _, title in flags(feature)] == ["Duplicate computation: 55 repeated prompts"]  # line-wide


def test_a_reader_sees_the_findings_of_their_lines_and_links_only_if_they_read_the_audit(audited: str, as_user) -> None:
    scoped = as_user("engineer", lines=["search"]).get(f"/overview/?{window(audited)}").content.decode()
    viewer = as_user("viewer").get(f"/overview/?{window(audited)}").content.decode()

    assert [title for _, title in flags(scoped)] == ["Duplicate computation: 55 repeated prompts"]
    assert "nightly-summary" not in scoped
    assert [link for link, _ in flags(viewer)] == ["", ""]  # the audit is not theirs to open
    finance = as_user("finance").get(f"/overview/?{window(audited)}").content.decode()
    assert "7,123.00 CNY" in finance


def test_a_window_not_audited_yet_shows_the_latest_audit_before_it(audited: str, as_user) -> None:
    today = day_of(datetime.now(UTC))  # a day of this month, which is not audited before it ends
    page = as_user("engineer").get(f"/overview/?from={today}&to={today}").content.decode()

    assert len(flags(page)) == 2 and "No month of this window is audited yet" in page
