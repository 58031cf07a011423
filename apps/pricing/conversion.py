"""Exchange rates as pricing reads them: through a reader the app keeping the rates registers
(apps.currencies, which sits above pricing, in its AppConfig.ready), so that pricing names no
app above it. Pricing prices in the price book's currency; only a price list in another currency
is converted, once, when it is imported."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from decimal import Decimal

RateReader = Callable[[date, str, str], Decimal | None]

_READERS: list[RateReader] = []


def rate_reader(read: RateReader) -> RateReader:
    """Register `read(day, from currency, to currency)`: a unit of the first in the second."""
    if read not in _READERS:
        _READERS.append(read)
    return read


def rate_on(day: date, source: str, target: str) -> Decimal | None:
    """A unit of `source` in `target` on `day`, from the first reader that knows it; None when
    none does."""
    if source == target:
        return Decimal(1)
    for read in _READERS:
        found = read(day, source, target)
        if found is not None:
            return found
    return None
