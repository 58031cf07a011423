from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from apps.accounts.models import CollectorKey

KEY_PREFIX = "cpk_"
LAST_SEEN_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class NewCollectorKey:
    key: CollectorKey
    secret: str


def key_digest(secret: str) -> bytes:
    # The secret has 256 bits of entropy, so a fast hash is as good as a slow KDF here.
    return hashlib.sha256(secret.encode()).digest()


def collector_key_create(*, name: str) -> NewCollectorKey:
    """Create a key; the returned secret is the only copy that will ever exist."""
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    key = CollectorKey.objects.create(name=name, prefix=secret[:10], key_hash=key_digest(secret))
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
