from __future__ import annotations

import hashlib
import io

import pytest
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command

from apps.accounts.models import CollectorKey
from apps.accounts.services import collector_key_create
from apps.classification.models import RuleSet


def create(name: str) -> str:
    out = io.StringIO()
    call_command("create_collector_key", name=name, stdout=out, stderr=io.StringIO())
    return out.getvalue().strip()


def test_create_prints_a_secret_once_and_stores_only_its_hash(db):
    secret = create("vllm-prod-1")

    key = CollectorKey.objects.get(name="vllm-prod-1")
    assert secret.startswith("cpk_") and len(secret) > 40
    assert bytes(key.key_hash) == hashlib.sha256(secret.encode()).digest()
    stored_text = " ".join(str(getattr(key, f.attname)) for f in CollectorKey._meta.fields)
    assert secret not in stored_text
    assert secret[10:] not in stored_text


def test_create_refuses_a_taken_name(db):
    create("dup")

    with pytest.raises(CommandError, match="already exists"):
        create("dup")


def test_revoke_marks_the_key_and_unknown_names_fail(db):
    create("old")

    call_command("revoke_collector_key", name="old", stdout=io.StringIO())

    assert CollectorKey.objects.get(name="old").revoked_at is not None
    with pytest.raises(CommandError, match="No collector key"):
        call_command("revoke_collector_key", name="nope", stdout=io.StringIO())


def test_admin_can_revoke_keys(admin_client):
    create("via-admin")
    key = CollectorKey.objects.get(name="via-admin")

    response = admin_client.post(
        "/admin/accounts/collectorkey/", {"action": "revoke", "_selected_action": [key.pk]}, follow=True
    )

    assert response.status_code == 200
    key.refresh_from_db()
    assert key.revoked_at is not None


def test_the_four_roles_exist(db):
    assert set(Group.objects.values_list("name", flat=True)) >= {"admin", "finance", "engineer", "viewer"}


def test_roles_carry_their_admin_permissions(django_user_model, client):
    engineer = django_user_model.objects.create_user("eng", password="pw-for-tests-only", is_staff=True)
    engineer.groups.add(Group.objects.get(name="engineer"))
    finance = django_user_model.objects.create_user("fin", password="pw-for-tests-only", is_staff=True)
    finance.groups.add(Group.objects.get(name="finance"))

    client.force_login(engineer)
    ruleset = RuleSet.objects.get(version=1)  # the built-in one (its id depends on earlier flushes)
    assert client.get(f"/admin/classification/ruleset/{ruleset.pk}/change/").status_code == 200
    assert engineer.has_perm("classification.change_rule")
    assert not engineer.has_perm("pricing.change_priceversion")
    client.force_login(finance)
    assert finance.has_perm("pricing.change_priceversion")
    assert not finance.has_perm("classification.change_rule")


def test_an_admin_edits_what_a_key_may_write(admin_client):
    create("search-vllm")
    key = CollectorKey.objects.get(name="search-vllm")
    page = admin_client.get(f"/admin/accounts/collectorkey/{key.pk}/change/").content.decode()
    for field in ("business_lines", "reconciliation", "backdate_days", "backfill"):
        assert f'name="{field}"' in page

    answer = admin_client.post(
        f"/admin/accounts/collectorkey/{key.pk}/change/",
        {"name": key.name, "business_lines": "search, ads", "reconciliation": "on", "backdate_days": "7"},
    )

    assert answer.status_code == 302, answer.content[:2000]
    key.refresh_from_db()
    assert (key.business_lines, key.reconciliation, key.backdate_days, key.backfill) == (
        ["search", "ads"],
        True,
        7,
        False,
    )


def test_the_collectors_page_shows_each_keys_limits(admin_client):
    create("any-line")
    create("search-vllm")
    CollectorKey.objects.filter(name="search-vllm").update(business_lines=["search"], reconciliation=True)
    create("history")
    CollectorKey.objects.filter(name="history").update(backfill=True)

    page = admin_client.get("/collectors/").content.decode()

    names = ("any-line", "search-vllm", "history")
    rows = {name: page[page.index(f'<td class="text">{name}</td>') :].split("</tr>")[0] for name in names}
    assert '"text lines">all<' in rows["any-line"] and '"text reconciliation">no<' in rows["any-line"]
    assert '"text age">3 days old<' in rows["any-line"]
    assert '"text lines">search<' in rows["search-vllm"] and '"text reconciliation">allowed<' in rows["search-vllm"]
    assert '"text age">backfill (any age kept)<' in rows["history"]


def test_the_launcher_keys_get_the_limits_their_senders_need(db, tmp_path):
    from devtools.run import ensure_demo_key

    secret, _ = ensure_demo_key(tmp_path, backfill=True)  # the sample, resent as first dated
    old = collector_key_create(name="vllm-demo")  # made before keys had limits
    ensure_demo_key(tmp_path, "vllm-demo", reconciliation=True)  # the /metrics reconciler's records

    demo, vllm = CollectorKey.objects.get(name="demo"), CollectorKey.objects.get(pk=old.key.pk)
    assert secret and (demo.backfill, demo.reconciliation) == (True, False)
    assert (vllm.backfill, vllm.reconciliation) == (False, True)


@pytest.mark.parametrize("role", ["engineer", "finance", "viewer"])
def test_only_an_admin_changes_or_revokes_a_key_the_other_roles_only_view_it(django_user_model, client, role):
    """Issue 31, finding 6: an engineer lifted a key's limits (backfill, lines) in the admin."""
    create("search-vllm")
    key = CollectorKey.objects.get(name="search-vllm")
    user = django_user_model.objects.create_user(f"{role}-1", password="pw-for-tests-only", is_staff=True)
    user.groups.add(Group.objects.get(name=role))
    client.force_login(user)
    change = f"/admin/accounts/collectorkey/{key.pk}/change/"
    lifted = {"name": key.name, "business_lines": "", "reconciliation": "on", "backdate_days": "400", "backfill": "on"}

    page = client.get(change)
    answer = client.post(change, lifted)
    revoked = client.post("/admin/accounts/collectorkey/", {"action": "revoke", "_selected_action": [key.pk]})

    key.refresh_from_db()
    assert (key.backfill, key.reconciliation, key.backdate_days, key.revoked_at) == (False, False, 3, None)
    assert answer.status_code == 403 and revoked.status_code in (200, 302, 403)  # no revoke action offered
    if role == "engineer":  # engineers see the keys (the collectors page too), as they are
        assert page.status_code == 200 and 'name="backfill"' not in page.content.decode()
    assert not user.has_perm("accounts.change_collectorkey")


def test_a_permission_taken_from_a_role_is_taken_from_its_group_at_the_next_migrate(db):
    from django.contrib.auth.models import Permission

    from apps.accounts.roles import role_permissions_sync

    engineer = Group.objects.get(name="engineer")
    engineer.permissions.add(Permission.objects.get(codename="change_collectorkey"))

    role_permissions_sync()

    assert not engineer.permissions.filter(codename="change_collectorkey").exists()
