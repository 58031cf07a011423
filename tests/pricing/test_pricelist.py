"""A hosted models' price list (issue 34, item 4) read from real files (LiteLLM's JSON format, a
CSV) and over real HTTP on loopback: per-token prices become exact per-million ones, the served
models are chosen, the preview says what changes, applying writes one price version from a whole
hour (other models' prices copied), and the daily re-import applies only what changed."""

from __future__ import annotations

import http.server
import io
import threading
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.ingest.models import ServedModel
from apps.pricing.models import Price, PriceVersion
from apps.pricing.pricelist import (
    PriceListError,
    pricelist_apply,
    pricelist_parse,
    pricelist_preview,
    pricelist_read,
    pricelist_refresh,
)
from tests import factories

pytestmark = pytest.mark.django_db

LITELLM = Path(__file__).parent / "data" / "litellm_prices_excerpt.json"
T0 = datetime(2026, 3, 1, tzinfo=UTC)


def book(prices: dict[str, tuple[str, str, str]], currency: str = "USD", at: datetime = T0) -> PriceVersion:
    return factories.price_version(effective_from=at, prices=prices, currency=currency)


def served(*names: str) -> list[str]:
    for name in names:
        ServedModel.objects.get_or_create(name=name, version="")
    return list(names)


def prices_of(version: PriceVersion) -> dict[tuple[str, str], Decimal]:
    return {(p.model_pattern, p.kind): p.per_million for p in Price.objects.filter(version=version)}


def test_litellms_per_token_prices_become_exact_per_million_ones() -> None:
    listed = pricelist_parse(text=LITELLM.read_text(), source=str(LITELLM))
    assert listed.currency == "USD"
    assert listed.prices["gpt-4o"] == {"input": Decimal("2.5"), "cached_input": Decimal("1.25"), "output": Decimal(10)}
    assert listed.prices["gpt-4o-mini"] == {
        "input": Decimal("0.15"),
        "cached_input": Decimal("0.075"),
        "output": Decimal("0.6"),
    }
    assert listed.prices["o3-mini"]["reasoning"] == Decimal("4.4")
    # cache_creation_input_token_cost is the cache-write price (1.25 x input for Anthropic's)
    assert listed.prices["claude-3-5-sonnet-20241022"]["cache_write"] == Decimal("3.75")
    assert "cache_write" not in listed.prices["gpt-4o"]
    # a listed 0.0 beside a paid input (DeepSeek reports no cache writes) is no write price
    assert "cache_write" not in listed.prices["deepseek/deepseek-chat"]
    # no cache discount listed: cached prompt tokens cost what input costs
    assert listed.prices["mistral/mistral-small-latest"]["cached_input"] == Decimal("0.1")
    # the spec, embeddings and images are not text generation's prices
    assert not {"sample_spec", "text-embedding-3-small", "dall-e-3"} & set(listed.prices)


def test_a_csv_is_read_and_its_mistakes_named_by_line() -> None:
    text = "model,input,cached_input,output,currency\nqwen-max,2.4,0.6,9.6,CNY\nqwen-plus,0.8,,2,CNY\n"
    listed = pricelist_parse(text=text, source="cn.csv")
    assert listed.currency == "CNY" and listed.prices["qwen-plus"]["cached_input"] == Decimal("0.8")
    written = pricelist_parse(
        text="model,input,cached_input,output,cache_write\nclaude,3,0.3,15,3.75\n", source="w.csv"
    )
    assert written.prices["claude"]["cache_write"] == Decimal("3.75")
    with pytest.raises(PriceListError, match="line 3: output 'two' is not a number"):
        pricelist_parse(text="model,input,output\nqwen-max,2.4,9.6\nqwen-plus,0.8,two\n", source="bad.csv")
    with pytest.raises(PriceListError, match="line 2: qwen-max needs an input and an output price"):
        pricelist_parse(text="model,input\nqwen-max,2.4\n", source="bad.csv")
    with pytest.raises(PriceListError, match="one currency"):
        pricelist_parse(text="model,input,output,currency\na,1,2,USD\nb,1,2,CNY\n", source="mixed.csv")


def test_the_preview_chooses_the_served_models_and_says_what_changes() -> None:
    book({"gpt-4o": ("5", "2.5", "15"), "local-*": ("0", "0", "0")})
    names = served("gpt-4o", "deepseek-chat", "qwen2.5-7b-instruct")
    listed = pricelist_parse(text=LITELLM.read_text(), source="litellm.json")
    preview = pricelist_preview(
        price_list=listed, effective_from=T0 + timedelta(days=3), served=names, patterns=["o3-*", "nothing-*"]
    )
    changes = {(c.pattern, c.kind): (c.before, c.after) for c in preview.changes}
    assert changes[("gpt-4o", "input")] == (Decimal("5.000000"), Decimal("2.5"))
    # a served name matches the listed provider/name; it is priced under the name it is served as
    assert changes[("deepseek-chat", "output")] == (None, Decimal("1.1"))
    assert ("o3-mini", "reasoning") in changes  # asked for by a glob
    assert not any(c.pattern == "qwen2.5-7b-instruct" for c in preview.changes)  # not listed
    assert preview.not_listed == ["nothing-*"] and preview.rate is None


def test_applying_writes_one_version_from_the_hour_with_the_rest_copied() -> None:
    before = book({"gpt-4o": ("5", "2.5", "15"), "local-*": ("0", "0", "0")})
    names = served("gpt-4o")
    listed = pricelist_parse(text=LITELLM.read_text(), source="litellm.json")
    start = T0 + timedelta(days=3, hours=5)
    version = pricelist_apply(preview=pricelist_preview(price_list=listed, effective_from=start, served=names))
    assert (
        version.effective_from == start and version.currency == "USD" and "3 prices from litellm.json" in version.note
    )
    assert prices_of(version) == {
        ("gpt-4o", "input"): Decimal("2.5"),
        ("gpt-4o", "cached_input"): Decimal("1.25"),
        ("gpt-4o", "output"): Decimal(10),
        **{(p, k): v for (p, k), v in prices_of(before).items() if p == "local-*"},
    }
    assert prices_of(before)[("gpt-4o", "input")] == Decimal(5)  # hours before keep their prices
    again = pricelist_preview(price_list=listed, effective_from=start, served=names)
    assert again.empty and again.unchanged == 3
    with pytest.raises(PriceListError, match="nothing to change"):
        pricelist_apply(preview=again)


@pytest.mark.books_in("UTC")  # the version's first accounting day is its UTC date
def test_a_list_in_another_currency_needs_the_days_rate() -> None:
    book({"gpt-4o": ("36", "18", "108")}, currency="CNY")
    names = served("gpt-4o")
    listed = pricelist_parse(text=LITELLM.read_text(), source="litellm.json")
    with pytest.raises(PriceListError, match="no USD to CNY rate for 2026-03-04"):
        pricelist_preview(price_list=listed, effective_from=T0 + timedelta(days=3), served=names)
    preview = pricelist_preview(
        price_list=listed, effective_from=T0 + timedelta(days=3), served=names, rate=Decimal("7.1")
    )
    assert {(c.kind, c.after) for c in preview.changes} == {
        ("input", Decimal("17.75")),
        ("cached_input", Decimal("8.875")),
        ("output", Decimal("71")),
    }
    assert pricelist_apply(preview=preview).currency == "CNY"


@pytest.mark.books_in("Asia/Shanghai")
def test_without_a_rate_given_the_books_rate_of_the_versions_first_day_converts(settings: Any) -> None:
    from apps.currencies.rates import rate_set

    book({"gpt-4o": ("36", "18", "108")}, currency="CNY")
    names = served("gpt-4o")
    listed = pricelist_parse(text=LITELLM.read_text(), source="litellm.json")
    start = datetime(2026, 3, 4, 17, tzinfo=UTC)  # 01:00 on the 5th in Shanghai: the 5th's rate
    rate_set(day=date(2026, 3, 4), currency="USD", rate="7.0", source="test")
    rate_set(day=date(2026, 3, 5), currency="USD", rate="7.2", source="test")
    preview = pricelist_preview(price_list=listed, effective_from=start, served=names)
    assert preview.rate == Decimal("7.2") and {c.after for c in preview.changes if c.kind == "output"} == {Decimal(72)}
    # a rate kept the other way round (CNY in USD) serves, inverted
    book({"gpt-4o": ("5", "2.5", "15")}, currency="USD", at=T0 + timedelta(days=20))
    cny = pricelist_parse(text="model,input,cached_input,output,currency\ngpt-4o,36,18,108,CNY\n", source="cn.csv")
    rate_set(day=date(2026, 3, 21), currency="USD", rate="7.25", source="test")
    later = pricelist_preview(price_list=cny, effective_from=T0 + timedelta(days=20), served=names)
    assert {(c.kind, c.after) for c in later.changes} == {
        ("input", Decimal("4.965517")),  # 36 / 7.25
        ("cached_input", Decimal("2.482759")),
        ("output", Decimal("14.896552")),
    }


def test_the_command_shows_then_applies(tmp_path: Path) -> None:
    book({"gpt-4o": ("5", "2.5", "15")})
    served("gpt-4o")
    out = io.StringIO()
    call_command("import_prices", str(LITELLM), "--from", "2026-03-04T05:00", stdout=out)
    shown = out.getvalue()
    assert "gpt-4o" in shown and "5.000000 -> 2.5" in shown and "--apply" in shown
    assert PriceVersion.objects.count() == 1  # only shown
    call_command("import_prices", str(LITELLM), "--from", "2026-03-04T05:00", "--apply", stdout=io.StringIO())
    assert PriceVersion.objects.count() == 2
    with pytest.raises(CommandError, match="No such file"):
        call_command("import_prices", str(tmp_path / "missing.json"), stdout=io.StringIO())
    with pytest.raises(CommandError, match="invalid _hour value: '2026-03-04T06:30'"):
        call_command("import_prices", str(LITELLM), "--from", "2026-03-04T06:30", "--apply", stdout=io.StringIO())


@pytest.fixture
def served_over_http() -> Iterator[str]:
    """LiteLLM's file served over HTTP on loopback, as from its repository."""
    body = LITELLM.read_bytes()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/model_prices_and_context_window.json":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_the_daily_refresh_reads_a_url_and_applies_only_what_changed(served_over_http: str) -> None:
    book({"gpt-4o": ("5", "2.5", "15")})
    served("gpt-4o")
    url = f"{served_over_http}/model_prices_and_context_window.json"
    now = T0 + timedelta(days=10, hours=3, minutes=20)
    first = pricelist_refresh(location=url, now=now)
    assert len(first.changes) == 3 and first.effective_from == T0 + timedelta(days=10, hours=4)
    assert pricelist_refresh(location=url, now=now + timedelta(days=1)).empty  # nothing new: no new version
    assert PriceVersion.objects.count() == 2
    with pytest.raises(PriceListError, match="404"):
        pricelist_read(location=f"{served_over_http}/gone.json")
