from __future__ import annotations

from django.apps import AppConfig


class LedgerConfig(AppConfig):
    name = "apps.ledger"
    label = "ledger"
    verbose_name = "Ledger"

    def ready(self) -> None:
        from apps.accounts.lines import lines_source
        from apps.ledger import checks  # noqa: F401 (registers the system checks)

        lines_source(_lines_planned)


def _lines_planned() -> set[str]:
    """The business lines with a cost centre, a budget or revenue (a line may be planned before
    its first record)."""
    from apps.ledger.models import Budget, CostCentre, Revenue

    lines = set(CostCentre.objects.values_list("business_line", flat=True))
    lines |= set(Budget.objects.of_lines().values_list("business_line", flat=True).distinct())
    return lines | set(Revenue.objects.values_list("business_line", flat=True).distinct())
