from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils.translation import gettext_lazy as _

ROLES = ("admin", "finance", "engineer", "viewer")
DEFAULT_BACKDATE_DAYS = 3


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
    # What the key may write (apps/ingest/contract.py KeyLimits); a record beyond them is a dead
    # letter. The defaults are the safe ones: a new key backdates 3 days and sends no
    # reconciliation. Its business lines default to all: the edge's attribution map decides the
    # line of each request, and a key per line is the admin's choice, not a precondition.
    business_lines = ArrayField(
        models.CharField(max_length=256),
        default=list,
        blank=True,
        help_text="Business lines this key may write (its records' business_line dim); empty = all.",
    )
    reconciliation = models.BooleanField(
        default=False,
        help_text="May send reconciliation records (dim costplatform.kind), as the vLLM /metrics reconciler does.",
    )
    backdate_days = models.PositiveIntegerField(
        default=DEFAULT_BACKDATE_DAYS,
        help_text="Records older than this many days are refused, unless the key is marked for backfill.",
    )
    backfill = models.BooleanField(
        default=False,
        help_text="Accept records of any age the platform keeps (COSTPLATFORM_INGEST_MAX_AGE_DAYS), "
        "to load history; unmark when done.",
    )

    class Meta:
        verbose_name = _("collector key")
        verbose_name_plural = _("collector keys")
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @property
    def lines_text(self) -> str:
        return ", ".join(self.business_lines) or "all"

    @property
    def age_text(self) -> str:
        """How old its records may be: "3 days", or "backfill" (the platform's maximum age)."""
        return "backfill" if self.backfill else f"{self.backdate_days} day{'s' if self.backdate_days != 1 else ''}"


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

    class Meta:
        verbose_name = _("user scope")
        verbose_name_plural = _("user scopes")

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
