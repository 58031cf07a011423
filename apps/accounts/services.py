from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

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
    collector_key_seen(key=key)
    return key


def collector_key_seen(*, key: CollectorKey) -> None:
    """Mark `key` seen now (at most once a minute): every path that writes with a key calls it,
    the API's key check and the in-process ingest (the demo's load, a backfill)."""
    now = timezone.now()
    if key.last_seen_at is None or now - key.last_seen_at > LAST_SEEN_RESOLUTION:
        CollectorKey.objects.filter(pk=key.pk).update(last_seen_at=now)
        key.last_seen_at = now


UNKNOWN_LINES = (
    "The platform knows no business line {names}: no record, cost centre, budget or collector key has it. "
    "Check the spelling, or confirm that the line is new."
)


class UnknownBusinessLines(ValueError):
    def __init__(self, unknown: Sequence[object]) -> None:
        super().__init__(UNKNOWN_LINES.format(names=", ".join(map(str, unknown))))
        self.unknown = list(unknown)


def user_scope_set(
    *,
    user: Any,
    role: str | None,
    business_lines: Sequence[str] = (),
    can_see_money: bool = False,
    new_lines: bool = False,
) -> None:
    """Give `user` exactly one role (None: none), its business lines (empty: all of them) and
    whether it sees money beyond its role. A line the platform does not know is refused unless
    `new_lines` confirms it."""
    from django.contrib.auth.models import Group

    from apps.accounts.lines import business_lines_unknown
    from apps.accounts.models import ROLES, UserScope

    if role is not None and role not in ROLES:
        raise ValueError(f"unknown role {role!r}: one of {', '.join(ROLES)}")
    lines = [line.strip() for line in business_lines if line.strip()]
    unknown = business_lines_unknown(lines)
    if unknown and not new_lines:
        raise UnknownBusinessLines(unknown)
    with transaction.atomic():
        user.groups.remove(*Group.objects.filter(name__in=ROLES))
        if role is not None:
            user.groups.add(Group.objects.get_or_create(name=role)[0])
        scope = {"business_lines": sorted(set(lines)), "can_see_money": can_see_money}
        UserScope.objects.update_or_create(user=user, defaults=scope)
    user._costplatform_scope = False  # read again on the next check


@dataclass(frozen=True)
class NewUser:
    user: Any
    password: str  # the one given, or the one generated: shown once


def user_create(
    *,
    username: str,
    role: str,
    business_lines: Sequence[str] = (),
    email: str = "",
    password: str | None = None,
    new_lines: bool = False,
) -> NewUser:
    """A person with one role and their business lines (none: all), in one step; without a
    password one is generated (the returned copy is the only one)."""
    from django.contrib.auth.models import User

    chosen = password or secrets.token_urlsafe(15)
    with transaction.atomic():
        user = User.objects.create_user(username, email=email, password=chosen)
        user_scope_set(user=user, role=role, business_lines=business_lines, new_lines=new_lines)
    return NewUser(user=user, password=chosen)
