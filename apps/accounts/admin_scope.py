"""Business-line scopes in the Django admin.

Every ModelAdmin of the site is a `ScopedModelAdmin` (tests/security/test_admin_scope.py checks
`admin.site._registry`). Each says which field names its rows' business line (`line_field`);
a user scoped to some business lines then sees, adds, edits, deletes and runs actions on their
lines' rows only. A model without such a field spans lines (rules, prices, keys, users, the
journal ...): a scoped user gets no access to it at all, not even to view.
Superusers and users without a scope are not limited here; their role's permissions apply."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Model, QuerySet
from django.http import Http404, HttpRequest

from apps.accounts.scopes import business_lines_of

OUTSIDE_SCOPE = "This row belongs to a business line outside your scope."


class ScopedModelAdmin(admin.ModelAdmin):
    """A ModelAdmin limited to the user's business lines (see the module docstring)."""

    # The model field holding the row's business line; None: the rows span business lines.
    line_field: str | None = None

    def _lines(self, request: HttpRequest) -> list[str] | None:
        return business_lines_of(request.user)

    def _shut(self, request: HttpRequest) -> bool:
        """True when this model is closed to the user: scoped, and the rows span lines."""
        return self.line_field is None and self._lines(request) is not None

    def _allows(self, request: HttpRequest, obj: Model | None) -> bool:
        lines = self._lines(request)
        if lines is None:
            return True
        if self.line_field is None:
            return False
        return obj is None or getattr(obj, self.line_field) in lines

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        rows = super().get_queryset(request)
        lines = self._lines(request)
        if lines is None:
            return rows
        if self.line_field is None:
            return rows.none()
        return rows.filter(**{f"{self.line_field}__in": lines})

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        obj = super().get_object(request, object_id, from_field)
        if obj is None and self._lines(request) is not None:
            # A row outside the scope is not found (404), as a row that does not exist.
            raise Http404(OUTSIDE_SCOPE)
        return obj

    def has_module_permission(self, request: HttpRequest) -> bool:
        return not self._shut(request) and super().has_module_permission(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._allows(request, obj) and super().has_view_permission(request, obj)

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return not self._shut(request) and super().has_add_permission(request, *args)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._allows(request, obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._allows(request, obj) and super().has_delete_permission(request, obj)

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        lines = self._lines(request)
        if lines is None or db_field.name != self.line_field:
            return super().formfield_for_dbfield(db_field, request, **kwargs)
        # A scoped user picks one of their own lines; any other value is an invalid choice.
        return forms.ChoiceField(
            choices=[(line, line) for line in lines],
            label=db_field.verbose_name.capitalize(),
            help_text="One of the business lines of your scope.",
        )

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        # The form already offers only the user's lines; this holds for any other way in.
        if not self._allows(request, obj):
            raise PermissionDenied(OUTSIDE_SCOPE)
        super().save_model(request, obj, form, change)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        if not self._allows(request, obj):
            raise PermissionDenied(OUTSIDE_SCOPE)
        super().delete_model(request, obj)


class ReadOnlyAdmin(ScopedModelAdmin):
    """Rows the platform writes (rejections, priced hours, runs): viewed here, never added or
    changed; deleted by whom the role allows."""

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class KeptAdmin(ReadOnlyAdmin):
    """Rows kept as the record of what was done (the journal, periods, bills): read-only, and
    not deleted here either."""

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def scoped(admin_class: type[admin.ModelAdmin]) -> type[ScopedModelAdmin]:
    """`admin_class` (of another package: auth, celery beat) as a ScopedModelAdmin whose rows
    span business lines."""
    if issubclass(admin_class, ScopedModelAdmin):
        return admin_class
    return type(f"Scoped{admin_class.__name__}", (ScopedModelAdmin, admin_class), {"line_field": None})


def site_scope_others(site: admin.AdminSite) -> None:
    """Register again, scoped, every ModelAdmin of `site` that is not one (those of other
    packages: Django's auth groups, django-celery-beat's schedules). Run once every admin module
    is loaded (AccountsConfig.ready)."""
    for model, model_admin in list(site._registry.items()):
        if not isinstance(model_admin, ScopedModelAdmin):
            site.unregister(model)
            site.register(model, scoped(type(model_admin)))
