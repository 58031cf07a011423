"""What every finder shares: the month's window and rates, token sums by price kind, the
draft finding, the registry, and the lookups that turn ids from SQL into names and links."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import astuple, dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, TypedDict
from urllib.parse import urlencode

from django.db import connection, transaction

from apps.classification.engine import CACHE_WRITE
from apps.common.composed import SQL, Composable, table, text
from apps.ingest.models import DimSet, ServedModel
from apps.pricing.book import PRICE_KINDS


@dataclass(frozen=True)
class Tokens:
    """Tokens by price kind: uncached prompt (input), cached prompt, completion (output) and
    prompt-cache writes (cache_write)."""

    uncached: int = 0
    cached: int = 0
    completion: int = 0
    written: int = 0

    @property
    def total(self) -> int:
        return self.uncached + self.cached + self.completion + self.written

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))

    @classmethod
    def of(cls, row: Sequence[Any]) -> Tokens:
        return cls(*(int(v or 0) for v in row))


ModelTokens = dict[str, Tokens]  # by served model name
# The price kinds of each of Tokens' counts, the first the month has a rate for: cache writes at
# their own rate, else as input (as pricing prices them, book.component_price).
_PRICE_KINDS = (("input",), ("cached_input",), ("output",), PRICE_KINDS[CACHE_WRITE])


@dataclass
class Rates:
    """Money per token of each model and price kind in one currency, as the month was priced:
    the priced rows' cost over their tokens (price versions and cost pools alike), else the
    price book's version for what the priced rows lack (a model or kind not priced yet)."""

    currency: str
    per_token: dict[tuple[str, str], Decimal]  # (model name, kind) -> money per token
    # Money per token by kind of a model from the price book (asked once per model).
    fallback: Callable[[str], dict[str, Decimal]] | None = None
    _asked: set[str] = field(default_factory=set)

    def _fill(self, model: str) -> None:
        if self.fallback is None or model in self._asked:
            return
        self._asked.add(model)
        # Kinds the month's priced rows lack for this model (no cached tokens, say) come from the book.
        for kind, rate in self.fallback(model).items():
            self.per_token.setdefault((model, kind), rate)

    def money(self, tokens: Tokens, model: str) -> Decimal | None:
        self._fill(model)
        total = Decimal(0)
        for kinds, count in zip(_PRICE_KINDS, astuple(tokens), strict=True):
            if not count:
                continue
            rate = next((r for k in kinds if (r := self.per_token.get((model, k))) is not None), None)
            if rate is None:
                return None
            total += rate * count
        return total

    def money_of(self, by_model: ModelTokens) -> Decimal | None:
        """The money of tokens over several models; None when any part is unpriced."""
        total = Decimal(0)
        for model, tokens in by_model.items():
            money = self.money(tokens, model)
            if money is None:
                return None
            total += money
        return total


@dataclass(frozen=True)
class AuditWindow:
    month: str  # YYYY-MM
    start: datetime
    end: datetime
    rates: Rates

    @property
    def hours(self) -> int:
        return int((self.end - self.start).total_seconds() // 3600)


@dataclass
class Draft:
    """A finding before it is stored (see models.AuditFinding)."""

    kind: str
    title: str
    dims: dict[str, str]
    tokens: int
    savings_tokens: int
    savings: Decimal | None
    evidence: str
    suggestion: str
    model: str = ""
    figures: dict[str, Any] = field(default_factory=dict)
    counted: bool = True


class Saved(TypedDict):
    model: str
    tokens: int
    savings_tokens: int
    savings: Decimal | None


def all_saved(window: AuditWindow, saved: ModelTokens) -> Saved:
    """A Draft's model, tokens, savings_tokens and savings where every token found could be saved:
    the models by name, their tokens, and those at the month's rates."""
    tokens = sum(t.total for t in saved.values())
    return Saved(
        model=", ".join(sorted(saved)), tokens=tokens, savings_tokens=tokens, savings=window.rates.money_of(saved)
    )


Finder = Callable[[AuditWindow], list[Draft]]
FINDERS: dict[str, Finder] = {}


def register_finder(kind: str) -> Callable[[Finder], Finder]:
    """Register a finder for `kind`; they run in registration order (zombies first, so later
    findings on a zombie's dims are not counted twice)."""

    def register(finder: Finder) -> Finder:
        FINDERS[kind] = finder
        return finder

    return register


@contextmanager
def analytic_cursor() -> Iterator[Any]:
    """One large aggregate over the month: no JIT, room to hash and sort in memory."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL jit = off")
        cursor.execute("SET LOCAL work_mem = '128MB'")
        yield cursor


def fetch(sql: str | Composable, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    with analytic_cursor() as cursor:
        cursor.execute(sql if isinstance(sql, str) else text(sql), params)
        return cursor.fetchall()


def fetch_month(window: AuditWindow, sql: str | Composable, **params: Any) -> list[tuple[Any, ...]]:
    """The rows of a finder's query over the window's month (%(start)s to %(end)s) and its own
    parameters (thresholds from the audit settings)."""
    return fetch(sql, {"start": window.start, "end": window.end, **params})


def named(rows: list[tuple[Any, ...]]) -> tuple[dict[int, dict[str, str]], dict[int, str]]:
    """The rollup dims and the model names of rows that start (rollup or dims id, model id)."""
    return dims_of(r[0] for r in rows), model_names(r[1] for r in rows)


def dims_of(ids: Iterable[int]) -> dict[int, dict[str, str]]:
    return {d.pk: d.dims for d in DimSet.objects.filter(pk__in=set(ids)).only("id", "dims")}


def model_names(ids: Iterable[int]) -> dict[int, str]:
    return dict(ServedModel.objects.filter(pk__in=set(ids)).values_list("id", "name"))


def evidence_url(window: AuditWindow, dims: dict[str, str], model: str = "", **query: str) -> str:
    """The records drill-down (GET /api/v1/records) filtered to the finding's month, dims,
    model and any further `query` parameters (status=error, ...)."""
    params = {"from": window.start.isoformat(), "to": window.end.isoformat()}
    params |= {f"dims.{k}": v for k, v in sorted(dims.items())}
    if model:
        params["model"] = model
    return f"/api/v1/records?{urlencode(params | query)}"


def label(dims: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(dims.items())) or "(no dims)"


def share(part: int | Decimal, whole: int | Decimal) -> Decimal:
    return Decimal(part) / Decimal(whole) if whole else Decimal(0)


def pct(value: Decimal) -> str:
    return f"{(value * 100).quantize(Decimal('0.1'))} %"


# SQL: each record's rollup dims id, from the dims set table (a rollup set is its own rollup).
ROLLUP_JOIN = text(
    SQL("JOIN (SELECT id, coalesce(rollup_id, id) AS rollup_id FROM {}) d ON d.id = r.dims_id").format(table(DimSet))
)
MONTH = "r.ts >= %(start)s AND r.ts < %(end)s"
# A record r's tokens by price kind, in Tokens' order (the uncached prompt is what was neither
# read from nor written to the prompt cache).
KIND_TOKENS = (
    "r.prompt - r.prompt_cached - r.prompt_cache_write",
    "r.prompt_cached",
    "r.completion",
    "r.prompt_cache_write",
)
