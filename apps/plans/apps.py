from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class PlansConfig(AppConfig):
    """Plans and budgets: a month's budgets (soft and hard, held at the edge with their overrides)
    and revenue, read against the books. Built on the books; registers with them its month-end
    check (elastic spend against revenue), its line of the close checklist (budgets without
    actuals) and the business lines it plans."""

    name = "apps.plans"
    label = "plans"
    verbose_name = _("Plans and budgets")

    def ready(self) -> None:
        from django.urls import reverse

        from apps.accounts.lines import lines_source
        from apps.accounts.roles import role_grants
        from apps.auditlog.registry import audited
        from apps.ledger.links import page_link_register
        from apps.ledger.services.checklist import checklist_line_register
        from apps.ledger.services.checks import month_check_register
        from apps.plans import checks  # noqa: F401 (registers the system check)
        from apps.plans.checklist import budgets_unspent
        from apps.plans.findings import elastic_vs_revenue
        from apps.plans.models import Budget, BudgetOverride, Revenue

        audited(Budget, BudgetOverride, Revenue)
        role_grants(self.label, {"finance": ("add", "change", "view")})
        lines_source(_lines_planned)
        page_link_register("plans", lambda month: reverse("finance-plans", kwargs={"month": month}))
        month_check_register("elastic_vs_revenue", elastic_vs_revenue, order=20)
        checklist_line_register("budgets_unspent", budgets_unspent, order=60)


def _lines_planned() -> set[str]:
    """The business lines with a budget or revenue (a line may be planned before its first record)."""
    from apps.plans.models import Budget, Revenue

    lines = set(Budget.objects.of_lines().values_list("business_line", flat=True).distinct())
    return lines | set(Revenue.objects.values_list("business_line", flat=True).distinct())
