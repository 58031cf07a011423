from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from apps.accounts.models import DEFAULT_BACKDATE_DAYS, CollectorKey

KEY_PREFIX = "cpk_"
LAST_SEEN_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class NewCollectorKey:
    key: CollectorKey
    secret: str


def key_digest(secret: str) -> bytes:
    # The secret has 256 bits of entropy, so a fast hash is as good as a slow KDF here.
    return hashlib.sha256(secret.encode()).digest()


def collector_key_create(
    *,
    name: str,
    business_lines: Sequence[str] = (),
    reconciliation: bool = False,
    backdate_days: int = DEFAULT_BACKDATE_DAYS,
    backfill: bool = False,
) -> NewCollectorKey:
    """Create a key; the returned secret is the only copy that will ever exist. The limits
    default to the safe ones: every business line, no reconciliation records, 3 days back."""
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    key = CollectorKey.objects.create(
        name=name,
        prefix=secret[:10],
        key_hash=key_digest(secret),
        business_lines=sorted(set(business_lines)),
        reconciliation=reconciliation,
        backdate_days=backdate_days,
        backfill=backfill,
    )
    return NewCollectorKey(key=key, secret=secret)


def collector_key_revoke(*, name: str) -> CollectorKey:
    with transaction.atomic():
        key = CollectorKey.objects.select_for_update().get(name=name)
        if key.revoked_at is None:
            key.revoked_at = timezone.now()
            key.save(update_fields=["revoked_at"])
    return key


def collector_key_authenticate(*, secret: str) -> CollectorKey | None:
    """The active key with this secret, or None. Marks it seen (at most once a minute)."""
    key = CollectorKey.objects.filter(key_hash=key_digest(secret), revoked_at__isnull=True).first()
    if key is None:
        return None
    now = timezone.now()
    if key.last_seen_at is None or now - key.last_seen_at > LAST_SEEN_RESOLUTION:
        CollectorKey.objects.filter(pk=key.pk).update(last_seen_at=now)
        key.last_seen_at = now
    return key
