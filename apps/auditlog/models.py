from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class AuditEntry(models.Model):
    """One change to an audited object (rules, prices, mappings, periods...): who, when, from
    where, and the object's fields before and after. Append-only: a database trigger refuses
    UPDATE and DELETE, and the admin offers neither."""

    class Action(models.TextChoices):
        CREATE = "create"
        UPDATE = "update"
        DELETE = "delete"

    class Source(models.TextChoices):
        ADMIN = "admin"
        API = "api"
        WEB = "web"
        SYSTEM = "system", "system (command, task)"

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    # No foreign key constraint: a deleted user must not take (or change) the entries it made.
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    actor_name = models.CharField(max_length=150, blank=True)
    source = models.CharField(max_length=6, choices=Source.choices)
    path = models.CharField(max_length=300, blank=True, help_text="The request path of the change, if any.")
    action = models.CharField(max_length=6, choices=Action.choices)
    model = models.CharField(max_length=100, db_index=True, help_text="app_label.Model")
    object_id = models.CharField(max_length=64)
    object_repr = models.CharField(max_length=300)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    changes = models.JSONField(default=dict, help_text="field: [before, after] for every changed field")

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name = _("audit entry")
        verbose_name_plural = _("audit entries")
        indexes = [models.Index(fields=["model", "object_id"], name="auditlog_object")]

    def __str__(self) -> str:
        who = self.actor_name or self.source
        return f"{self.at:%Y-%m-%d %H:%M:%S} {who} {self.action} {self.model} {self.object_repr}"
