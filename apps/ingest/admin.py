from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from apps.accounts.admin_scope import ReadOnlyAdmin
from apps.ingest.models import DimSet, DroppedPartition, Rejection, ServedModel


@admin.register(Rejection)
class RejectionAdmin(ReadOnlyAdmin):
    list_display = ["id", "source", "received_at", "index", "record_id", "errors"]
    list_filter = ["source"]
    search_fields = ["record_id"]
    date_hierarchy = "received_at"


@admin.register(ServedModel)
class ServedModelAdmin(ReadOnlyAdmin):
    list_display = ["name", "version"]
    search_fields = ["name"]


@admin.register(DimSet)
class DimSetAdmin(ReadOnlyAdmin):
    line_field = "business_line"
    list_display = ["id", "business_line", "__str__"]
    search_fields = ["business_line"]
    exclude = ["digest"]


@admin.register(DroppedPartition)
class DroppedPartitionAdmin(ReadOnlyAdmin):
    list_display = ["month", "partition", "records", "dropped_at"]

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
