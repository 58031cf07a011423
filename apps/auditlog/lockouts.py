"""Login lockouts in the audit log and the log.

django-axes (settings: AXES_*) counts failed logins of the login page, the admin's and HTTP
basic auth, and after AXES_FAILURE_LIMIT of them refuses the username until the cool-off ends.
The moment it locks one out, the lock is written here as a change of the account:
`locked_out` false -> true, with the failures, the client address and the end of the
cool-off. Attempts refused while the lock holds are logged only: the audit log is
append-only, and a stranger must not be able to grow it at will.
"""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from apps.auditlog.context import current_actor
from apps.auditlog.models import AuditEntry

log = logging.getLogger("costplatform.security")


def lockout_record(*, username: str, ip_address: str | None, failures: int, path: str) -> AuditEntry:
    """Record that `username` was locked out (whether or not such an account exists)."""
    from axes.helpers import get_cool_off

    user_model = get_user_model()
    user = user_model._default_manager.filter(**{user_model.USERNAME_FIELD: username}).first() if username else None
    cool_off = get_cool_off()
    after = {
        "locked_out": True,
        "failures": failures,
        "ip_address": ip_address,
        "until": (timezone.now() + cool_off).isoformat() if cool_off else None,
    }
    return AuditEntry.objects.create(
        source=current_actor().source,
        path=path[:300],
        action=AuditEntry.Action.UPDATE,
        model=user_model._meta.label,
        object_id=str(user.pk) if user is not None else "",
        object_repr=username[:300],
        before={"locked_out": False},
        after=after,
        changes={"locked_out": [False, True]},
    )


def _locked_out(sender: Any, request: Any, username: str | None, ip_address: str | None, **kwargs: Any) -> None:
    # axes sends this signal again for every attempt refused during the lock; only the attempt
    # that reached the limit carries its failure count.
    failures = getattr(request, "axes_failures_since_start", None)
    path = str(getattr(request, "path", ""))
    if failures is None:
        log.info("login refused: %r is locked out (from %s, %s)", username, ip_address, path)
        return
    log.warning("login locked out: %r after %s failed attempts (from %s, %s)", username, failures, ip_address, path)
    lockout_record(username=username or "", ip_address=ip_address, failures=int(failures), path=path)


def lockouts_connect() -> None:
    from axes.signals import user_locked_out

    user_locked_out.connect(_locked_out, dispatch_uid="auditlog.lockout")
