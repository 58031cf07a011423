from __future__ import annotations

from django.db import models

ROLES = ("admin", "finance", "engineer", "viewer")


class CollectorKey(models.Model):
    """A source of token records. The secret is shown once; only its SHA-256 is stored."""

    name = models.CharField(max_length=100, unique=True)
    prefix = models.CharField(max_length=12, help_text="First characters of the secret, to recognise it.")
    key_hash = models.BinaryField(max_length=32, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None
