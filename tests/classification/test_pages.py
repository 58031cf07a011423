"""The rules pages: rule sets for every role, a new draft and a try against recent records for
engineers and admins."""

from __future__ import annotations

import re

import pytest

from apps.classification.engine import BUILTIN_RULES
from apps.classification.models import RuleSet
from apps.classification.services import rule_add

pytestmark = pytest.mark.django_db


def test_it_lists_rule_sets_and_tries_a_draft_against_recent_records(traffic, as_user) -> None:
    engineer = as_user("engineer")
    assert "v1" in engineer.get("/rules/").content.decode()

    response = engineer.post("/rules/draft/", {"name": "timeouts are errors"}, follow=True)
    draft = RuleSet.objects.get(name="timeouts are errors")
    rule_add(ruleset=draft, name="t", expression='outcome.status == "timeout"', components="all", target="waste.error")
    page = engineer.get(f"/rules/{draft.version}/try/?hours=24").content.decode()

    assert response.status_code == 200
    assert "waste.timeout" in page and "waste.error" in page and "2,064" in page  # 3 x 688 uncached prompt


def test_a_try_without_hours_reads_the_newest_records(traffic, as_user, settings) -> None:
    settings.RULES_TRY_RECORDS = 5  # the newest hour's 4 records and those of the one before (same ts)
    engineer = as_user("engineer")
    engineer.post("/rules/draft/", {"name": "timeouts are errors"})
    draft = RuleSet.objects.get(name="timeouts are errors")
    rule_add(ruleset=draft, name="t", expression='outcome.status == "timeout"', components="all", target="waste.error")

    page = engineer.get(f"/rules/{draft.version}/try/").content.decode()

    assert "The newest 5 records" in page
    assert "1,376" in page and "2,064" not in page  # 2 of the 3 timeouts x 688 uncached prompt


def test_the_rules_page_lists_the_built_in_chain_in_order(as_user) -> None:
    page = as_user("viewer").get("/rules/").content.decode()
    chain = re.search(r'<section id="builtin-chain">(.*?)</section>', page, re.S)

    assert chain, page
    assert re.findall(r"<code>(\w+)</code>", chain.group(1)) == list(BUILTIN_RULES)
    assert "waste.error, waste.timeout, waste.aborted, waste.rejected" in chain.group(1)
    assert "Prompt tokens served from the prefix cache" in chain.group(1)


def test_viewers_read_rules_but_neither_draft_nor_try(traffic, as_user) -> None:
    viewer = as_user("viewer")

    assert viewer.get("/rules/").status_code == 200
    assert viewer.post("/rules/draft/").status_code == 403
    assert viewer.get("/rules/1/try/").status_code == 403
