"""A reader's roles are read once a request, and a change of them is seen: by the same user object
at once, and by the reader's next request."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from apps.accounts.roles import user_has_role
from tests import factories

pytestmark = pytest.mark.django_db


def role_reads(client: Client, path: str) -> tuple[int, int]:
    """The page's status and how many of its queries read the reader's groups (Django's own read of
    the permissions the groups give, which it keeps on the user object, aside)."""
    with CaptureQueriesContext(connection) as queries:
        status = client.get(path).status_code
    reads = [q["sql"] for q in queries.captured_queries if '"auth_user_groups"' in q["sql"]]
    return status, sum('"auth_permission"' not in sql for sql in reads)


@pytest.mark.parametrize("path", ["/waste/", "/budgets/", "/no-such-page/", "/collectors/"])
def test_a_page_reads_the_readers_roles_once(path: str) -> None:
    client = Client()
    client.force_login(factories.finance_user("reader", role="viewer"))

    status, reads = role_reads(client, path)

    assert status in (200, 403, 404) and reads == 1, (status, reads)  # its view and a nav link a role


def group(role: str) -> Group:
    return Group.objects.get_or_create(name=role)[0]


def test_a_change_of_groups_through_the_user_object_is_seen_at_once() -> None:
    user = factories.finance_user("mover", role="viewer")
    assert user_has_role(user, "viewer") and not user_has_role(user, "engineer")

    user.groups.add(group("engineer"))
    assert user_has_role(user, "engineer") and user_has_role(user, "viewer")
    user.groups.remove(group("viewer"))
    assert user_has_role(user, "engineer") and not user_has_role(user, "viewer")
    user.groups.clear()
    assert not user_has_role(user, "engineer", "viewer", "finance", "admin")


def test_the_next_request_sees_roles_changed_elsewhere() -> None:
    client = Client()
    client.force_login(factories.finance_user("promoted", role="viewer"))
    assert client.get("/collectors/").status_code == 403  # for engineers and admins

    User.objects.get(username="promoted").groups.set([group("engineer")])  # another object, as the admin's
    assert client.get("/collectors/").status_code == 200
    group("viewer").user_set.set([User.objects.get(username="promoted")])  # from the group's side
    User.objects.get(username="promoted").groups.remove(group("engineer"))
    assert client.get("/collectors/").status_code == 403
