"""The header's links are exactly the pages each person may open, as the URL policy table
(tests/security/test_urlconf.py, ENDPOINTS) has them: for every role, scoped to some business
lines and not, and for a login without a role."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import resolve

from apps.accounts.models import UserScope
from tests import factories
from tests.security.test_urlconf import ENDPOINTS, PERSON, PUBLIC, READERS, Endpoint

pytestmark = pytest.mark.django_db

HEADER = re.compile(r"<header>(.*?)</header>", re.S)
LINK = re.compile(r'<a href="([^"]+)"')


def header_links(client: Client) -> list[str]:
    page = client.get("/").content.decode()
    header = HEADER.search(page)
    assert header, "the home page has a header"
    return LINK.findall(header.group(1))


def route_of(url: str) -> str:
    return resolve(url).route


def may_open(endpoint: Endpoint, role: str | None, scoped: bool) -> bool:
    if endpoint.roles is not PERSON and (role is None or role not in endpoint.roles):
        return False
    return not (scoped and endpoint.scope == "company")


def person(role: str | None, *, scoped: bool, staff: bool = False) -> Client:
    name = f"{role or 'none'}-{'scoped' if scoped else 'all'}"
    made = factories.finance_user(name, role=role) if role else User.objects.create_user(name, password="pw-tests")
    if staff:
        User.objects.filter(pk=made.pk).update(is_staff=True)
    if scoped:
        UserScope.objects.create(user=made, business_lines=["bl-visible"])
    client = Client()
    client.force_login(made)
    return client


@pytest.fixture
def every_link() -> list[str]:
    """The links a superuser's header has: every page the header may ever show."""
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw-tests"))
    links = header_links(client)
    assert len(links) >= 10
    return links


@pytest.mark.parametrize("scoped", [False, True], ids=["all-lines", "scoped"])
@pytest.mark.parametrize("role", [*READERS, None])
def test_the_header_shows_exactly_the_pages_the_role_may_open(every_link, role, scoped):
    client = person(role, scoped=scoped)
    shown = header_links(client)
    expected = []
    for url in every_link:
        route = route_of(url)
        if route.startswith("admin/"):
            continue  # staff only: the next test
        if route in PUBLIC or may_open(ENDPOINTS[route], role, scoped):
            expected.append(url)
    assert shown == expected
    # And each link it shows opens for this person.
    assert [url for url in shown if client.get(url).status_code != 200] == []


def test_the_collectors_link_is_for_engineers_and_admins_who_see_every_line(every_link):
    collectors = next(url for url in every_link if route_of(url) == "collectors/")
    assert collectors in header_links(person("engineer", scoped=False))
    for role, scoped in (("engineer", True), ("viewer", False), ("finance", False), ("admin", True)):
        assert collectors not in header_links(person(role, scoped=scoped)), (role, scoped)


def test_the_admin_link_is_for_staff_alone(every_link):
    admin_index = next(url for url in every_link if route_of(url).startswith("admin/"))
    assert admin_index not in header_links(person("admin", scoped=False))
    assert admin_index in header_links(person("viewer", scoped=False, staff=True))


def test_the_link_of_the_page_shown_is_marked_current():
    client = person("engineer", scoped=False)
    page = client.get("/waste/duplicates/").content.decode()
    header = HEADER.search(page).group(1)  # type: ignore[union-attr]
    assert re.findall(r'<a href="([^"]+)" aria-current="page"', header) == ["/waste/"]


def test_the_footers_link_is_for_those_who_may_open_it():
    assert ENDPOINTS["figures/"].roles == READERS
    assert 'id="figures-link"' in person("viewer", scoped=True).get("/").content.decode()
    assert 'id="figures-link"' not in person(None, scoped=False).get("/").content.decode()
