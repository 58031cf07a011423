"""Rounding exact costs (12 decimal places) to journal amounts (the currency's minor unit) so
that a month's entries add up to its exact priced total rounded once, to the unit.

Two steps, both exact and deterministic:

1. Carry: the days of a month are rounded cumulatively. With C(d) the exact total of the
   month's days up to and including d, day d books R(d) = r(C(d)) - r(C(d-1)), where r rounds
   half up (towards +inf, so r(x + k units) = r(x) + k units: days whose costs are whole units
   book exactly those units). Summed over the month the R(d) telescope to r(C(month)).
   Each |R(d) - T(d)| < 1 unit, with T(d) the day's exact total.
2. Largest remainder: a day's lines share R(d). Each line gets its amount rounded down; the
   units left over, k = (R(d) - sum of floors) / unit, go one each to the lines with the
   largest remainders (ties: the order given). 0 <= k <= number of lines with a remainder, so
   every line gets its floor or its floor plus one unit, never less than 0 for a cost >= 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import ROUND_FLOOR, Decimal


def unit(places: int) -> Decimal:
    return Decimal(1).scaleb(-places)


def round_half_up(value: Decimal, places: int) -> Decimal:
    """Round to `places`, halves towards +infinity (shift-invariant, unlike half-even)."""
    q = unit(places)
    return (value + q / 2).quantize(q, rounding=ROUND_FLOOR)


def day_amount(*, carry: Decimal, exact: Decimal, places: int) -> Decimal:
    """What a day books: its share of the month's cumulative rounding (carry = the exact total
    of the month's earlier days)."""
    return round_half_up(carry + exact, places) - round_half_up(carry, places)


def largest_remainder(amounts: Sequence[Decimal], total: Decimal, places: int) -> list[Decimal]:
    """Round `amounts` to `places` so they add up to `total` exactly (which must be within one
    unit of their exact sum, as a day's amount is)."""
    q = unit(places)
    floors = [a.quantize(q, rounding=ROUND_FLOOR) for a in amounts]
    units = (total - sum(floors, Decimal(0))) / q
    if units != units.to_integral_value() or not 0 <= units <= len(amounts):
        raise ValueError(f"cannot share {total} among {list(amounts)} to {places} places")
    order = sorted(range(len(amounts)), key=lambda i: (floors[i] - amounts[i], i))  # largest remainder first
    for i in order[: int(units)]:
        floors[i] += q
    return floors
