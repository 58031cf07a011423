"""The links of the site's header: each shown only to a person who may open its page.

Who may open what is each page's own check (its view); the URL policy test
(tests/security/test_urlconf.py, ENDPOINTS) lists it, and tests/security/test_nav.py holds this
list to that table for every role, scoped and not."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.urls import reverse
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from apps.accounts.roles import READERS, user_has_role
from apps.accounts.scopes import MONEY_ROLES, sees_all_lines
from apps.audits.selectors import READERS as AUDIT_READERS
from apps.ingest.views import OPERATORS


@dataclass(frozen=True)
class NavLink:
    url_name: str
    label: str | Promise
    may_open: Callable[[Any], bool]


def _any_login(user: Any) -> bool:
    return bool(user.is_authenticated)


def _reader(user: Any) -> bool:
    return user_has_role(user, *READERS)


def _operator(user: Any) -> bool:
    # The collectors page lists every line's rejected records: editors who see every line.
    return user_has_role(user, *OPERATORS) and sees_all_lines(user)


def _ledger_reader(user: Any) -> bool:
    return user_has_role(user, *AUDIT_READERS)


def _money(user: Any) -> bool:
    return user_has_role(user, *MONEY_ROLES)


def _staff(user: Any) -> bool:
    return bool(user.is_active and user.is_staff)


LINKS = (
    NavLink("home", _("Home"), _any_login),
    NavLink("dashboards:overview", _("Overview"), _reader),
    NavLink("dashboards:waste", _("Waste"), _reader),
    NavLink("budgets", _("Budgets"), _reader),
    NavLink("rules", _("Rules"), _reader),
    NavLink("prices", _("Prices"), _reader),
    NavLink("collectors", _("Collectors"), _operator),
    NavLink("alerts", _("Alerts"), _reader),
    NavLink("swagger-ui", "API", _any_login),  # the API's contract: public
    NavLink("finance", _("Finance"), _money),
    NavLink("audits", _("Audits"), _ledger_reader),
    NavLink("admin:index", _("Admin"), _staff),
)


@dataclass(frozen=True)
class NavItem:
    url: str
    label: str | Promise
    current: bool  # the page shown is this link's or under it


def nav_links(user: Any, path: str = "") -> list[NavItem]:
    """The header links `user` may open, the one `path` is under marked; none before a login."""
    if not (user and user.is_authenticated):
        return []
    shown = [(reverse(link.url_name), link.label) for link in LINKS if link.may_open(user)]
    # The longest URL that `path` starts with is the current one ("/" only on the home page).
    under = [url for url, _ in shown if path == url or (url != "/" and path.startswith(url))]
    current = max(under, key=len, default=None)
    return [NavItem(url, label, url == current) for url, label in shown]
