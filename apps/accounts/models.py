from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
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
    # Ingest rate limits of this key (apps/ingest/ratelimit.py); empty = the platform default.
    rate_requests = models.PositiveIntegerField(
        null=True, blank=True, help_text="Requests per second; empty = COSTPLATFORM_RATE_REQUESTS."
    )
    rate_records = models.PositiveIntegerField(
        null=True, blank=True, help_text="Records per second; empty = COSTPLATFORM_RATE_RECORDS."
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class UserScope(models.Model):
    """What a person may see beyond their role: the business lines (none listed = all) and
    money, which otherwise only the finance and admin roles see."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="scope")
    business_lines = ArrayField(
        models.CharField(max_length=256),
        default=list,
        blank=True,
        help_text="Business lines this user sees; empty = all of them.",
    )
    can_see_money = models.BooleanField(
        default=False, help_text="Show costs and spend although the user is neither finance nor admin."
    )

    def __str__(self) -> str:
        lines = ", ".join(self.business_lines) or "all business lines"
        return f"{self.user} ({lines}{', money' if self.can_see_money else ''})"


class RateBucket(models.Model):
    """A token bucket of one collector key and one kind (requests or records), shared by every
    web worker: refilled and taken from in one SQL statement (apps/ingest/ratelimit.py)."""

    key = models.ForeignKey(CollectorKey, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=8)
    tokens = models.FloatField()
    at = models.DateTimeField()
    admitted = models.BooleanField(default=True, help_text="Whether the last take was admitted.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["key", "kind"], name="accounts_ratebucket_key")]
