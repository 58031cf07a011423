"""How finance names things: an account by its code and name, a cost centre by its code and
name (apps.ledger.models.CostCentre; the business line's key where none is set)."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from apps.ledger.models import Account, CostCentre

# The seeded chart's names (migrations/ledger/0003_seed_chart.py), translated where shown; a
# name finance changed in the admin is shown as typed.
SEEDED_NAMES = (
    gettext_noop("Effective token expense"),
    gettext_noop("Structural token expense"),
    gettext_noop("Elastic token expense"),
    gettext_noop("Waste token expense"),
    gettext_noop("Shadow / overhead compute"),
    gettext_noop("Idle capacity"),
    gettext_noop("Accrued compute payable"),
    gettext_noop("Supplier bill differences"),  # made on the first bill adjustment (apps/reconciliation/)
)


@dataclass(frozen=True)
class Names:
    accounts: dict[str, str]  # code -> "code name"
    centres: dict[str, str]  # business line -> "code name"

    def account(self, code: str) -> str:
        return self.accounts.get(code, code)

    def centre(self, business_line: str) -> str:
        return self.centres.get(business_line, business_line)


def names_load() -> Names:
    accounts = {a.code: f"{a.code} {_(a.name) if a.name in SEEDED_NAMES else a.name}" for a in Account.objects.all()}
    centres = {c.business_line: str(c) or c.business_line for c in CostCentre.objects.all()}
    return Names(accounts, centres)
