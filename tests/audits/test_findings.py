"""The audit over a generated month: what was planted is found, with its dims, tokens and
money; a clean month of interactive traffic reports nothing."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest
import time_machine
from django.core.management import call_command

from apps.audits.models import AuditFinding, AuditReport, ModelDowngrade
from apps.audits.services import audit_run
from apps.ledger.models import Finding
from apps.pricing.services import hours_price, price_set
from tests.audits import month as gen

pytestmark = [pytest.mark.django_db, pytest.mark.books_in("UTC")]
NOV = date(2026, 11, 1)
CENT = Decimal("0.000001")


@pytest.fixture(autouse=True)
def _after_the_month() -> Iterator[None]:
    with time_machine.travel(gen.AFTER, tick=False):
        yield


@pytest.fixture
def downgrade() -> ModelDowngrade:
    return ModelDowngrade.objects.create(
        large_model=gen.LARGE, small_model=gen.SMALL, max_prompt_tokens=500, max_completion_tokens=64
    )


def only(kind: str, report: AuditReport) -> AuditFinding:
    found = list(report.findings.filter(kind=kind))
    assert len(found) == 1, [(f.kind, f.title) for f in report.findings.all()]
    return found[0]


class TestPlantedMonth:
    @pytest.fixture
    def planted(self, downgrade: ModelDowngrade) -> dict[str, list[dict]]:
        month = gen.Month()
        month.interactive()
        planted = {
            "zombie": month.zombie(),
            "duplicate": month.duplicates(),
            "loop": month.loops(),
            "retry_storm": month.retry_storm(),
            "model_mismatch": month.mismatch(),
            "system_prompt": month.system_prompt(),
            "context_bloat": month.context_bloat(),
        }
        month.ingest()
        return planted

    def test_it_finds_each_planted_workload_and_nothing_else(self, planted: dict[str, list[dict]]) -> None:
        report = audit_run(month=NOV)

        assert sorted(report.findings.values_list("kind", flat=True)) == sorted(planted)
        assert report.currency == "CNY"

    def test_it_finds_the_zombie_with_its_dims_tokens_and_money(self, planted: dict[str, list[dict]]) -> None:
        zombie = only("zombie", audit_run(month=NOV))

        assert zombie.dims == gen.ZOMBIE
        assert zombie.tokens == zombie.savings_tokens == gen.tokens(planted["zombie"])
        assert zombie.savings is not None
        assert zombie.savings.quantize(CENT) == gen.money(planted["zombie"]).quantize(CENT)
        assert zombie.figures["active_hours"] == 720
        assert "dims.feature=load-test" in zombie.evidence and "from=2026-11-01" in zombie.evidence

    def test_it_finds_the_duplicates_as_the_repeats_beyond_the_first(self, planted: dict[str, list[dict]]) -> None:
        dup = only("duplicate", audit_run(month=NOV))

        assert dup.dims == gen.DUPLICATES
        assert dup.figures["repeats"] == 5 * 11 and dup.figures["prompt_hashes"] == 5
        repeats = Decimal(11) / 12
        assert dup.savings_tokens == gen.tokens(planted["duplicate"]) * 11 // 12
        assert dup.savings is not None
        assert dup.savings.quantize(CENT) == gen.money(planted["duplicate"], repeats).quantize(CENT)
        assert dup.evidence.startswith("/api/v1/records?") and "dims.feature=autocomplete" in dup.evidence

    def test_it_finds_the_agent_loops(self, planted: dict[str, list[dict]]) -> None:
        loop = only("loop", audit_run(month=NOV))

        assert loop.dims == gen.LOOPS  # the rollup dims; conversation ids are in the figures
        assert loop.figures["conversations"] == 3 and loop.figures["calls"] == 90
        assert loop.figures["repeated_calls"] == 3 * 27
        assert loop.tokens == gen.tokens(planted["loop"])
        assert loop.savings_tokens == 3 * 27 * (1500 + 120)
        assert "dims.conversation_id=loop-" in loop.evidence

    def test_it_finds_the_retry_storm_as_the_failed_attempts(self, planted: dict[str, list[dict]]) -> None:
        storm = only("retry_storm", audit_run(month=NOV))

        assert storm.dims == gen.RETRIES
        assert storm.figures["storm_hours"] == 2 and storm.figures["retries"] == 80
        assert storm.savings_tokens == gen.tokens(planted["retry_storm"])
        assert storm.savings is not None
        assert storm.savings.quantize(CENT) == gen.money(planted["retry_storm"]).quantize(CENT)

    def test_it_prices_the_model_mismatch_at_the_configured_small_model(self, planted: dict[str, list[dict]]) -> None:
        mismatch = only("model_mismatch", audit_run(month=NOV))

        short = planted["model_mismatch"]
        assert mismatch.dims == gen.MISMATCH and mismatch.model == gen.LARGE
        assert mismatch.figures == {"requests": 170, "fitting": 150, "small_model": gen.SMALL}
        assert mismatch.tokens == gen.tokens(short)
        at_small = [r | {"model": gen.SMALL} for r in short]
        assert mismatch.savings is not None
        assert mismatch.savings.quantize(CENT) == (gen.money(short) - gen.money(at_small)).quantize(CENT)

    def test_it_finds_the_uncached_system_prompt(self, planted: dict[str, list[dict]]) -> None:
        system = only("system_prompt", audit_run(month=NOV))

        assert system.dims == gen.SYSTEM and system.model == gen.SMALL
        assert system.tokens == system.savings_tokens == 300 * 2400  # nothing of it was cached
        assert system.savings == Decimal(300 * 2400) * (Decimal(2) - Decimal("0.5")) / 1_000_000
        assert "80.0 % of prompt tokens" in system.title

    def test_it_finds_the_growing_context(self, planted: dict[str, list[dict]]) -> None:
        bloat = only("context_bloat", audit_run(month=NOV))

        records = planted["context_bloat"]
        weeks: dict[int, list[dict]] = {}
        for r in records:
            weeks.setdefault((datetime.fromisoformat(r["ts"]) - gen.START).days // 7, []).append(r)
        base = Decimal(sum(r["tokens"]["tool"] for r in weeks[0])) / len(weeks[0])
        excess = sum(int(sum(r["tokens"]["tool"] for r in rs) - base * len(rs)) for w, rs in weeks.items() if w)
        assert bloat.dims == gen.BLOAT
        assert bloat.tokens == sum(r["tokens"]["tool"] for r in records)
        assert bloat.savings_tokens == excess > 0
        assert bloat.savings == Decimal(excess) * 2 / 1_000_000
        assert "grew from 620 to 1,640" in bloat.title

    def test_it_totals_the_savings_and_a_rerun_replaces_the_report(self, planted: dict[str, list[dict]]) -> None:
        first = audit_run(month=NOV)
        second = audit_run(month=NOV)

        assert not AuditReport.objects.filter(pk=first.pk).exists()
        assert AuditReport.objects.get().pk == second.pk and second.findings.count() == len(planted)
        findings = list(second.findings.all())
        assert second.savings_tokens == sum(f.savings_tokens for f in findings)
        assert second.savings == sum(f.savings for f in findings if f.savings is not None)
        assert [f.position for f in findings] == list(range(1, len(planted) + 1))


def test_it_finds_reasoning_a_rule_classed_overspent_with_its_priced_cost(client: Any) -> None:
    from tests.classification.helpers import ruleset_activated
    from tests.factories import finance_user

    ruleset_activated(
        moves=[
            ("tokens.reasoning > 4 * (tokens.completion - tokens.reasoning)", "reasoning", "waste.reasoning_overspend")
        ]
    )
    month = gen.Month()
    month.interactive()
    over = month.reasoning()
    month.ingest()

    report = audit_run(month=NOV)

    found = only("reasoning", report)
    overspent = sum(r["tokens"]["reasoning"] for r in over)
    assert (found.dims, found.model, found.tokens, found.savings_tokens) == (
        gen.THINKER,
        gen.SMALL,
        overspent,
        overspent,
    )
    assert found.savings == Decimal(overspent) * 6 / 1_000_000  # priced as output: no reasoning price in the book
    assert "waste.reasoning_overspend" in found.title
    assert found.figures == {
        "overspent": overspent,
        "reasoning": overspent + 100 * 300,
        "completion": 200 * 1000 + 100 * 400,
    }
    client.force_login(finance_user())
    page = client.get("/audits/2026-11/").content.decode()
    assert "Reasoning overspend" in page and "waste.reasoning_overspend" in page


def test_it_prices_the_repeats_cache_writes_at_the_books_cache_write_price_else_as_input() -> None:
    month = gen.Month()
    planted = month.duplicates(written=400)
    month.ingest()
    repeats = Decimal(11) / 12

    as_input = only("duplicate", audit_run(month=NOV))
    assert as_input.savings_tokens == gen.tokens(planted) * 11 // 12
    assert as_input.savings is not None
    assert as_input.savings.quantize(CENT) == gen.money(planted, repeats).quantize(CENT)

    book_start = datetime(2026, 10, 1, tzinfo=UTC)  # the version month.ingest priced with
    price_set(model_pattern=gen.SMALL, prices={"cache_write": Decimal("2.5")}, effective_from=book_start)
    hours_price(start=gen.START, end=gen.END)

    at_write_price = only("duplicate", audit_run(month=NOV))
    assert at_write_price.savings is not None
    assert at_write_price.savings.quantize(CENT) == gen.money(planted, repeats, cache_write="2.5").quantize(CENT)
    assert at_write_price.savings > as_input.savings  # 2.5 per million written, not the input's 2


def test_it_reports_nothing_in_a_clean_month(downgrade: ModelDowngrade) -> None:
    month = gen.Month(seed=7)
    month.interactive()
    month.ingest()

    report = audit_run(month=NOV)

    assert list(report.findings.values_list("kind", "title")) == []
    assert report.savings_tokens == 0 and report.savings == 0
    assert report.tokens == gen.tokens(month.records)


def _low_share_finding() -> Finding:
    """A month-end finding of the ledger for search in November."""
    return Finding.objects.create(
        kind=Finding.Kind.EFFECTIVE_SHARE_LOW,
        action=Finding.Action.NOTIFY_PRODUCT_OWNER,
        period=NOV,
        business_line="search",
        figures={"tokens": {"effective": 60, "waste": 40}, "share": "0.6000"},
        message="Effective tokens were 60.0 % of search's tokens in 2026-11: notify the product owner.",
    )


def test_it_lists_the_ledgers_month_end_findings_without_counting_them() -> None:
    _low_share_finding()

    report = audit_run(month=NOV)

    check = only("ledger_check", report)
    assert check.dims == {"business_line": "search"} and check.tokens == 100 and not check.counted
    assert check.suggestion.startswith("Effective tokens were 60.0 %") and check.evidence == "/finance/?month=2026-11"
    assert report.savings_tokens == 0


def test_it_audits_the_month_of_the_accounting_zone(settings: Any) -> None:
    settings.ACCOUNTING_TZ = "Asia/Shanghai"  # November starts at 31 October 16:00 UTC
    _low_share_finding()

    report = audit_run(month=NOV)

    assert only("ledger_check", report).dims == {"business_line": "search"}


def test_the_command_audits_a_month_and_prints_the_findings(capsys: pytest.CaptureFixture[str]) -> None:
    month = gen.Month()
    planted = month.zombie()
    month.ingest()

    call_command("run_audit", "2026-11")
    call_command("run_audit", "2026-11")

    out = capsys.readouterr().out
    assert "zombie: Zombie workload: business_line=data-platform" in out
    assert f"estimated savings {gen.tokens(planted):,} tokens" in out
    assert AuditReport.objects.count() == 1


def test_the_command_refuses_a_bad_month() -> None:
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="not a month"):
        call_command("run_audit", "2026-13")
