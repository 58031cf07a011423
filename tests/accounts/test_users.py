"""A person with a role and business lines in one step: `manage.py create_user` and the user's
admin page; a business line the platform does not know is refused until confirmed."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client

from apps.accounts.lines import business_lines_known, business_lines_unknown
from apps.accounts.models import UserScope
from apps.accounts.scopes import business_lines_of
from apps.accounts.services import UnknownBusinessLines, user_create
from apps.ledger.models import CostCentre
from tests.conftest import Collector

pytestmark = pytest.mark.django_db


@pytest.fixture
def search_recorded(collector: Collector) -> None:
    """The platform knows "search" from a record and "ads" from a cost centre alone."""
    from tests import factories

    assert collector.send([factories.record(**{"dims.business_line": "search"})]).json()["accepted"] == 1
    CostCentre.objects.create(business_line="ads", code="CC-ADS", name="Ads")


def roles_of(username: str) -> list[str]:
    return list(User.objects.get(username=username).groups.values_list("name", flat=True))


@pytest.mark.usefixtures("search_recorded")
def test_the_known_lines_are_those_of_records_cost_centres_and_keys():
    assert {"search", "ads"} <= business_lines_known()
    assert [str(u) for u in business_lines_unknown(["search", "serach", "ads"])] == [
        "'serach' (did you mean 'search'?)"
    ]


@pytest.mark.usefixtures("search_recorded")
def test_it_creates_a_user_with_a_role_and_lines_and_prints_the_generated_password_once():
    out, err = io.StringIO(), io.StringIO()
    call_command("create_user", "ana", "--role", "engineer", "--line", "search", "--line", "ads",
                 "--email", "ana@example.com", "--generate-password", stdout=out, stderr=err)  # fmt: skip
    password = out.getvalue().strip()
    ana = User.objects.get(username="ana")
    assert roles_of("ana") == ["engineer"] and ana.email == "ana@example.com"
    assert business_lines_of(ana) == ["ads", "search"]
    assert len(password) >= 16 and ana.check_password(password)
    assert password not in err.getvalue() and "role engineer, sees ads, search" in err.getvalue()


@pytest.mark.usefixtures("search_recorded")
def test_it_refuses_an_unknown_line_and_names_the_near_one():
    with pytest.raises(CommandError, match=r"'serach' \(did you mean 'search'\?\).*--new-line confirms"):
        call_command("create_user", "bo", "--role", "viewer", "--line", "serach", "--generate-password",
                     stdout=io.StringIO(), stderr=io.StringIO())  # fmt: skip
    assert not User.objects.filter(username="bo").exists()


def test_a_new_line_is_kept_when_confirmed():
    call_command("create_user", "cy", "--role", "viewer", "--line", "launch-2027", "--new-line",
                 "--generate-password", stdout=io.StringIO(), stderr=io.StringIO())  # fmt: skip
    assert business_lines_of(User.objects.get(username="cy")) == ["launch-2027"]


def test_no_line_given_sees_every_line_and_an_existing_name_is_refused():
    made = user_create(username="di", role="finance")
    assert business_lines_of(made.user) is None and roles_of("di") == ["finance"]
    with pytest.raises(CommandError, match="already exists"):
        call_command("create_user", "di", "--role", "viewer", "--generate-password", stdout=io.StringIO())


@pytest.fixture
def admin_client_() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw-tests-root"))
    return client


ADD = {
    "username": "eve",
    "usable_password": "true",
    "password1": "a-Long-pass-4-eve",
    "password2": "a-Long-pass-4-eve",
    "role": "viewer",
}


@pytest.mark.usefixtures("search_recorded")
def test_the_admin_adds_a_user_with_role_and_lines_on_one_page(admin_client_):
    answer = admin_client_.post("/admin/auth/user/add/", {**ADD, "lines": "search, ads", "can_see_money": "on"})
    assert answer.status_code == 302, answer.content.decode()[:2000]
    eve = User.objects.get(username="eve")
    assert roles_of("eve") == ["viewer"] and business_lines_of(eve) == ["ads", "search"]
    assert UserScope.objects.get(user=eve).can_see_money


@pytest.mark.usefixtures("search_recorded")
def test_the_admin_refuses_a_typo_until_confirmed(admin_client_):
    answer = admin_client_.post("/admin/auth/user/add/", {**ADD, "lines": "serach"})
    assert answer.status_code == 200 and "did you mean &#x27;search&#x27;?" in answer.content.decode()
    assert not User.objects.filter(username="eve").exists()
    answer = admin_client_.post("/admin/auth/user/add/", {**ADD, "lines": "serach", "new_lines": "on"})
    assert answer.status_code == 302
    assert business_lines_of(User.objects.get(username="eve")) == ["serach"]


@pytest.mark.usefixtures("search_recorded")
def test_the_admin_changes_the_role_and_lines_on_the_users_page(admin_client_):
    fay = user_create(username="fay", role="viewer", business_lines=["search"]).user
    page = admin_client_.get(f"/admin/auth/user/{fay.pk}/change/").content.decode()
    assert 'value="search"' in page and '<option value="viewer" selected>' in page
    form = {"username": "fay", "role": "engineer", "lines": "ads", "date_joined_0": "2020-01-01",
            "date_joined_1": "00:00:00", "is_active": "on"}  # fmt: skip
    answer = admin_client_.post(f"/admin/auth/user/{fay.pk}/change/", form)
    assert answer.status_code == 302, answer.content.decode()[:3000]
    assert roles_of("fay") == ["engineer"] and business_lines_of(User.objects.get(pk=fay.pk)) == ["ads"]


@pytest.mark.usefixtures("search_recorded")
def test_the_scope_admin_refuses_an_unknown_line_too(admin_client_):
    gil = User.objects.create_user("gil", password="pw-gil-tests")
    answer = admin_client_.post("/admin/accounts/userscope/add/", {"user": gil.pk, "business_lines": "serach"})
    assert answer.status_code == 200 and "did you mean" in answer.content.decode()
    assert not UserScope.objects.filter(user=gil).exists()


@pytest.mark.usefixtures("search_recorded")
def test_the_service_refuses_unknown_lines():
    with pytest.raises(UnknownBusinessLines):
        user_create(username="hal", role="viewer", business_lines=["serach"])
    assert not User.objects.filter(username="hal").exists()
