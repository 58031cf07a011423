"""System checks for the alert settings, so a typo fails at start-up rather than at the first alert."""

from __future__ import annotations

import ipaddress
import sys
from typing import Any
from urllib.parse import urlsplit

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
    wrong = site_url_problem(settings.ALERTS_SITE_URL)
    if wrong:
        errors.append(
            checks.Error(
                f"COSTPLATFORM_SITE_URL is {settings.ALERTS_SITE_URL!r}: {wrong}",
                hint="It is the address people open the platform at, scheme, host and port only: every link in "
                "alerts (the page, mute, acknowledge) and the channels' previews is it followed by a path, e.g. "
                "https://costs.example.com or http://10.0.0.5:8000 (make run sets the one it serves)",
                id="alerts.E002",
            )
        )
    if not settings.ALERTS_RETRY_DELAYS or min(settings.ALERTS_RETRY_DELAYS) < 0:
        errors.append(checks.Error("COSTPLATFORM_ALERTS_RETRY_DELAYS needs one or more delays >= 0", id="alerts.E003"))
    if site_url_is_local() and not settings.DEBUG and not _testing():
        errors.append(
            checks.Warning(
                f"COSTPLATFORM_SITE_URL is {settings.ALERTS_SITE_URL}: the links in alerts (pages, mute and "
                "acknowledge) will not open for the people who receive them",
                hint="Set COSTPLATFORM_SITE_URL to the address people open the platform at, e.g. "
                "https://costs.example.com",
                id="alerts.W001",
            )
        )
    return errors


def site_url_problem(url: str) -> str:
    """What is wrong with `url` as the site URL, in words, or "" where nothing is."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return "it must start with http:// or https://"
    if not parts.hostname:
        return "it has no host"
    try:
        parts.port  # noqa: B018  (a port that is not a number raises)
    except ValueError:
        return "its port is not a number from 1 to 65535"
    if parts.query or parts.fragment:
        return "it has a query or a fragment, which the links' paths would be written after"
    if parts.path not in ("", "/"):
        return f"it has a path ({parts.path}): the platform is served at the root of its host"
    return ""


LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})


def site_url_is_local() -> bool:
    """Whether links in alerts point at this machine (the default), which no receiver can open."""
    host = (urlsplit(settings.ALERTS_SITE_URL).hostname or "").lower()
    return host in LOCAL_HOSTS or host.endswith(".localhost") or host.startswith("127.")


def _testing() -> bool:
    # Tests run with the default site URL on purpose; the warning is for a deployment.
    return "pytest" in sys.modules or sys.argv[1:2] == ["test"]
