from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ReconciliationConfig(AppConfig):
    """Supplier bills against the platform: suppliers, their imported bills, the matching by day
    and model, and the adjusting entries a second finance user posts (apps/reconciliation/)."""

    name = "apps.reconciliation"
    label = "reconciliation"
    verbose_name = _("Bill reconciliation")

    def ready(self) -> None:
        from django.urls import reverse

        from apps.accounts.roles import role_grants
        from apps.auditlog.registry import audited
        from apps.ledger.links import page_link_register
        from apps.ledger.services.checklist import checklist_line_register
        from apps.ledger.services.checks import month_check_register
        from apps.reconciliation.checklist import supplier_bills
        from apps.reconciliation.findings import bill_findings
        from apps.reconciliation.models import BillAdjustment, Supplier

        audited(Supplier, BillAdjustment)
        role_grants(self.label, {"finance": ("add", "change", "view")})
        month_check_register("supplier_bills", lambda month: bill_findings(month=month), order=40)
        checklist_line_register("supplier_bills", supplier_bills, order=80)
        page_link_register("bills", lambda: reverse("finance-reconciliation"))
