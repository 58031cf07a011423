from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from apps.accounts.admin_scope import ReadOnlyAdmin, ScopedModelAdmin
from apps.classification.models import HealthThreshold, Reason, Rule, RuleSet
from apps.classification.services import RuleSetNotEditable, ruleset_activate, ruleset_draft_create
from apps.common.models import JobRun


class RuleInline(admin.TabularInline):
    model = Rule
    extra = 1
    fields = ["position", "name", "action", "expression", "components", "target", "builtin"]

    def has_change_permission(self, request: HttpRequest, obj: RuleSet | None = None) -> bool:
        return obj is None or obj.status == RuleSet.Status.DRAFT

    has_add_permission = has_change_permission  # type: ignore[assignment]
    has_delete_permission = has_change_permission  # type: ignore[assignment]


@admin.register(RuleSet)
class RuleSetAdmin(ScopedModelAdmin):  # rules classify every line: closed to scoped users
    list_display = ["version", "name", "status", "created_at", "activated_at"]
    readonly_fields = ["version", "status", "created_at", "created_by", "activated_at"]
    inlines = [RuleInline]
    actions = ["activate", "new_draft"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # drafts are made from the active set (action "new draft")

    @admin.action(description="Make a new draft from the active rule set", permissions=["change"])
    def new_draft(self, request: HttpRequest, queryset: QuerySet[RuleSet]) -> None:
        draft = ruleset_draft_create(user=request.user)
        self.message_user(request, f"Created draft v{draft.version}.")

    @admin.action(description="Activate the selected draft", permissions=["change"])
    def activate(self, request: HttpRequest, queryset: QuerySet[RuleSet]) -> None:
        if queryset.count() != 1:
            self.message_user(request, "Select exactly one draft.", messages.ERROR)
            return
        try:
            ruleset = ruleset_activate(ruleset=queryset.get())
        except RuleSetNotEditable as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return
        self.message_user(request, f"v{ruleset.version} is active; run reclassify to apply it to history.")


@admin.register(Reason)
class ReasonAdmin(ScopedModelAdmin):
    list_display = ["id", "name", "builtin"]

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


# apps.common owns the runs' table but imports no other app (nor the scoped admin of accounts):
# its admin is here, in the first stage whose jobs (reclassify, then reprice and accrue) use it.
@admin.register(JobRun)
class JobRunAdmin(ReadOnlyAdmin):
    """Progress of the resumable runs (manage.py reclassify, reprice, accrue): the steps before
    next_day are done; a reclassify run's key is its rule set's id."""

    list_display = ["kind", "key", "start", "end", "next_day", "status", "started_at", "finished_at"]
    list_filter = ["kind", "status"]


@admin.register(HealthThreshold)
class HealthThresholdAdmin(ScopedModelAdmin):
    """The healthy ranges: the row without a business line is every line's default (a scoped
    user sees and edits only their lines' overrides)."""

    line_field = "business_line"
    list_display = ["__str__", "effective_min", "waste_max", "cache_hit_min", "shadow_max", "note"]
