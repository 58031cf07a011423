"""What the currencies tell the books without naming them: a day's rate was entered or changed,
so the day's costs in that currency are to be booked again (the ledger marks the day dirty in
its AppConfig.ready; the next accrual books it at the rate)."""

from __future__ import annotations

from django.dispatch import Signal

# `day`: the accounting day whose rate was saved; sent inside the saving transaction.
rate_changed = Signal()
