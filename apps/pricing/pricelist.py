"""Hosted models' prices from a public price list: read, previewed against the price book, then
applied as a new price version.

Two formats are read: LiteLLM's `model_prices_and_context_window.json` (per-token USD prices:
`input_cost_per_token`, `output_cost_per_token`, `cache_read_input_token_cost`,
`cache_creation_input_token_cost`, `output_cost_per_reasoning_token`) and a CSV of per-million
prices, one row a model (`model,input,cached_input,output[,reasoning][,cache_write][,currency]`).
A list holds thousands of models; only those asked for are taken: the models the platform has
served (matched by name, or by the last part of a listed `provider/name`), and the names or globs
an operator adds.

A list in another currency than the price book's is converted at the day's rate of the version's
first day (`conversion.rate_on`: the rates the books keep, read through a hook, since the books sit
above pricing). The preview says, model by model and kind by kind, what changes; applying it writes
one new price version from a whole hour (a copy of the version in force then with the changes),
so hours already priced keep their prices until they are repriced (`manage.py reprice`, open months;
a closed month's books do not move)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from fnmatch import fnmatchcase
from pathlib import Path

from apps.common.buckets import day_of
from apps.pricing import conversion
from apps.pricing.models import Currency, Kind, PriceVersion
from apps.pricing.services import prices_set

MILLION = Decimal(1_000_000)
PLACES = Decimal("0.000001")  # Price.per_million keeps six decimals
# LiteLLM's per-token fields, by the price book's kinds.
LITELLM_FIELDS = {
    Kind.INPUT: "input_cost_per_token",
    Kind.CACHED_INPUT: "cache_read_input_token_cost",
    Kind.OUTPUT: "output_cost_per_token",
    Kind.REASONING: "output_cost_per_reasoning_token",
    Kind.CACHE_WRITE: "cache_creation_input_token_cost",
}
# Modes of a LiteLLM entry that price generated text; embeddings, images and audio are left out.
TEXT_MODES = {"chat", "completion", "responses", None}
CSV_KINDS = (Kind.INPUT, Kind.CACHED_INPUT, Kind.OUTPUT, Kind.REASONING, Kind.CACHE_WRITE)


class PriceListError(ValueError):
    """A price list that cannot be read, or applied, said in words."""


@dataclass(frozen=True)
class PriceList:
    """The per-million prices of a list, by listed model name and kind, in one currency."""

    source: str
    currency: str
    prices: dict[str, dict[str, Decimal]]


@dataclass(frozen=True)
class Change:
    pattern: str
    kind: str
    before: Decimal | None  # None: the model had no price of this kind
    after: Decimal


@dataclass
class Preview:
    """What applying a list would do to the price book from `effective_from`."""

    source: str
    effective_from: datetime
    base: PriceVersion | None  # the version in force then
    currency: str  # the new version's (the base's)
    rate: Decimal | None  # list currency -> book currency, None when the same
    changes: list[Change] = field(default_factory=list)
    unchanged: int = 0
    not_listed: list[str] = field(default_factory=list)  # asked for, not in the list

    @property
    def empty(self) -> bool:
        return not self.changes


def pricelist_read(*, location: str, timeout: float = 30.0) -> str:
    """The text of the list at `location`: an http(s) URL or a file's path."""
    if location.startswith(("http://", "https://")):
        import requests

        try:
            answer = requests.get(location, timeout=timeout)
            answer.raise_for_status()
        except requests.RequestException as exc:
            raise PriceListError(f"{location}: {exc}") from exc
        return answer.text
    try:
        return Path(location).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise PriceListError(f"{location}: {exc.strerror or exc}") from exc


def pricelist_parse(*, text: str, source: str, currency: str = Currency.USD) -> PriceList:
    """The list in `text`: LiteLLM's JSON when it is JSON, else a CSV of per-million prices
    (`currency` for rows without a currency column)."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return _litellm(stripped, source)
    return _csv(text, source, currency)


def _litellm(text: str, source: str) -> PriceList:
    try:
        entries = json.loads(text, parse_float=Decimal)
    except json.JSONDecodeError as exc:
        raise PriceListError(f"{source}: not JSON ({exc})") from exc
    if not isinstance(entries, dict):
        raise PriceListError(f"{source}: a LiteLLM price list is an object of models")
    prices: dict[str, dict[str, Decimal]] = {}
    for name, entry in entries.items():
        if name == "sample_spec" or not isinstance(entry, dict) or entry.get("mode") not in TEXT_MODES:
            continue
        found = {
            kind: _per_million(Decimal(value) * MILLION)
            for kind, key in LITELLM_FIELDS.items()
            if isinstance(value := entry.get(key), Decimal | int) and not isinstance(value, bool) and value >= 0
        }
        if Kind.INPUT not in found or Kind.OUTPUT not in found:
            continue
        found.setdefault(Kind.CACHED_INPUT, found[Kind.INPUT])  # no cache discount listed: none given
        if found.get(Kind.CACHE_WRITE) == 0 < found[Kind.INPUT]:
            # LiteLLM lists 0.0 for providers that never report cache writes (DeepSeek): not a free
            # write, no write price, so a write would be priced as input.
            del found[Kind.CACHE_WRITE]
        prices[name] = found
    if not prices:
        raise PriceListError(f"{source}: no model with input and output prices")
    return PriceList(source, Currency.USD, prices)


def _per_million(value: Decimal) -> Decimal:
    return value.quantize(PLACES, rounding=ROUND_HALF_UP)


def _csv(text: str, source: str, currency: str) -> PriceList:
    rows = list(csv.DictReader(io.StringIO(text)))
    if not rows or "model" not in rows[0]:
        raise PriceListError(f"{source}: a CSV price list starts with a header: model,input,cached_input,output")
    prices: dict[str, dict[str, Decimal]] = {}
    currencies = set()
    for line, row in enumerate(rows, start=2):
        name = (row.get("model") or "").strip()
        if not name:
            raise PriceListError(f"{source}, line {line}: no model")
        found = {}
        for kind in CSV_KINDS:
            value = (row.get(kind) or "").strip()
            if value:
                try:
                    found[kind] = _per_million(Decimal(value))
                except InvalidOperation as exc:
                    raise PriceListError(f"{source}, line {line}: {kind} {value!r} is not a number") from exc
                if found[kind] < 0:
                    raise PriceListError(f"{source}, line {line}: {kind} is negative")
        if Kind.INPUT not in found or Kind.OUTPUT not in found:
            raise PriceListError(f"{source}, line {line}: {name} needs an input and an output price")
        found.setdefault(Kind.CACHED_INPUT, found[Kind.INPUT])
        prices[name] = found
        currencies.add((row.get("currency") or "").strip().upper() or currency)
    if len(currencies) != 1 or not currencies <= set(Currency.values):
        raise PriceListError(f"{source}: one currency of {', '.join(Currency.values)} a list, not {sorted(currencies)}")
    return PriceList(source, currencies.pop(), prices)


def listed_for(price_list: PriceList, *, served: Iterable[str], patterns: Iterable[str] = ()) -> dict[str, str]:
    """{price book pattern: listed name}: each served model the list names (as it is, or as the
    last part of `provider/name`), and each listed name matching one of `patterns`."""
    by_short: dict[str, str] = {}
    for name in sorted(price_list.prices, key=lambda n: (n.count("/"), n)):  # the plain name first
        by_short.setdefault(name.rsplit("/", 1)[-1], name)
    chosen = {}
    for name in served:
        listed = name if name in price_list.prices else by_short.get(name)
        if listed is not None:
            chosen[name] = listed
    for pattern in patterns:
        for name in price_list.prices:
            if fnmatchcase(name, pattern):
                chosen.setdefault(name, name)
    return chosen


def pricelist_preview(
    *,
    price_list: PriceList,
    effective_from: datetime,
    served: Iterable[str],
    patterns: Iterable[str] = (),
    rate: Decimal | None = None,
) -> Preview:
    """What applying `price_list` from `effective_from` would change in the price book, for the
    models `listed_for` chooses; `rate` converts the list's currency to the book's (read from the
    books' rates when not given)."""
    base = PriceVersion.objects.filter(effective_from__lte=effective_from).prefetch_related("prices").first()
    currency = base.currency if base is not None else price_list.currency
    if price_list.currency != currency and rate is None:
        day = day_of(effective_from)  # the accounting day the version starts on
        rate = conversion.rate_on(day, price_list.currency, currency)
        if rate is None:
            raise PriceListError(
                f"no {price_list.currency} to {currency} rate for {day:%Y-%m-%d}: set one on the rates page, or "
                f"give the rate (--rate)"
            )
    factor = rate if price_list.currency != currency else None
    before = {(p.model_pattern, p.kind): p.per_million for p in (base.prices.all() if base else [])}
    chosen = listed_for(price_list, served=served, patterns=patterns)
    preview = Preview(price_list.source, effective_from, base, currency, factor)
    preview.not_listed = [p for p in patterns if not any(fnmatchcase(name, p) for name in price_list.prices)]
    for pattern, listed in sorted(chosen.items()):
        for kind, price in sorted(price_list.prices[listed].items()):
            after = _per_million(price * factor) if factor is not None else price
            old = before.get((pattern, kind))
            if old == after:
                preview.unchanged += 1
            else:
                preview.changes.append(Change(pattern, kind, old, after))
    return preview


def pricelist_apply(*, preview: Preview) -> PriceVersion:
    """The preview's changes as the price version from its hour: a copy of the version in force
    then with them (or the version starting exactly then, updated), in one transaction."""
    if preview.empty:
        raise PriceListError("nothing to change: the price book already holds these prices")
    changes: dict[str, dict[str, Decimal]] = {}
    for change in preview.changes:
        changes.setdefault(change.pattern, {})[change.kind] = change.after
    rate = f", {preview.rate} {preview.currency} a unit of the list's currency" if preview.rate else ""
    return prices_set(
        prices=changes,
        effective_from=preview.effective_from,
        currency=preview.currency,
        note=f"{len(preview.changes)} prices from {preview.source}{rate}",
    )


def pricelist_refresh(*, location: str, patterns: Iterable[str] = (), now: datetime | None = None) -> Preview:
    """The scheduled re-import: the list at `location` applied from the next whole hour when it
    changes a price of a served model or of `patterns` (hours already priced keep theirs)."""
    from django.utils import timezone

    from apps.ingest.models import ServedModel
    from apps.pricing.services import HOUR, hour_floor

    text = pricelist_read(location=location)
    price_list = pricelist_parse(text=text, source=location)
    served = ServedModel.objects.values_list("name", flat=True).distinct()
    start = hour_floor(now or timezone.now()) + HOUR
    preview = pricelist_preview(price_list=price_list, effective_from=start, served=served, patterns=patterns)
    if not preview.empty:
        pricelist_apply(preview=preview)
    return preview
