"""System checks for the alert settings, so a typo fails at start-up rather than at the first alert."""

from __future__ import annotations

import ipaddress
from typing import Any

from django.conf import settings
from django.core import checks


@checks.register()
def alerts_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    for cidr in settings.ALERTS_OUTBOUND_ALLOW:
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            errors.append(
                checks.Error(f"COSTPLATFORM_OUTBOUND_ALLOW: {cidr!r} is not an address or CIDR", id="alerts.E001")
            )
    if not settings.ALERTS_SITE_URL.startswith(("http://", "https://")):
        errors.append(checks.Error("COSTPLATFORM_SITE_URL must start with http:// or https://", id="alerts.E002"))
    if not settings.ALERTS_RETRY_DELAYS or min(settings.ALERTS_RETRY_DELAYS) < 0:
        errors.append(checks.Error("COSTPLATFORM_ALERTS_RETRY_DELAYS needs one or more delays >= 0", id="alerts.E003"))
    return errors
