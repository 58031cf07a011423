"""Every URL the platform serves, walked from the URL conf (the admin and every API included),
checked for login, role and business-line scope. A route missing from ENDPOINTS fails the test:
a new endpoint is added here with its policy, or it does not ship."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.db.models import Model
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from apps.accounts.models import UserScope
from apps.ingest.models import Rejection
from tests import factories
from tests.conftest import Collector

pytestmark = pytest.mark.django_db

PERSON = ()  # any logged-in person, with or without a role: the home page only
READERS = ("admin", "finance", "engineer", "viewer")
LEDGER = ("admin", "finance", "engineer")
MONEY = ("admin", "finance")
EDITORS = ("admin", "engineer")

VISIBLE, HIDDEN = "bl-visible", "bl-hidden-q7"
SINCE = "from=2000-01-01T00:00:00Z"
THIS_MONTH = f"{datetime.now(UTC):%Y-%m}"
WINDOW = f"{SINCE}&to={(datetime.now(UTC) + timedelta(days=1)):%Y-%m-%dT%H:%M:%SZ}&group_by=business_line"


@dataclass(frozen=True)
class Endpoint:
    roles: tuple[str, ...]  # who may use it; PERSON = any login
    scope: str  # "lines": filtered to the user's lines; "company": refused to scoped users; "none": no line data
    methods: tuple[str, ...] = ("GET",)
    query: str = ""  # for the scope check: a query that would show every line's data


def page(roles: tuple[str, ...] = READERS, **kw: str) -> Endpoint:
    return Endpoint(roles=roles, scope=kw.pop("scope", "lines"), **kw)  # type: ignore[arg-type]


# Reachable without a login, and why.
PUBLIC = {
    "login/": "the login form",
    "oidc/authenticate/": "single sign-on: redirects to the OpenID Connect provider (404 when not configured)",
    "oidc/callback/": "single sign-on: the provider's answer; state, nonce and PKCE checked (404 when not configured)",
    "logout/": "POST only; logs out whoever is logged in",
    "healthz": "load-balancer probe; answers {status: ok} and nothing else",
    "i18n/setlang/": "the language switch; sets a cookie",
    "display-zone/": "the display time zone switch; POST only, sets a session value",
    "finance/plotly.min.js": "a static chart library",
    "favicon.ico": "a redirect to the site's icon (a static file)",
    "api/schema/": "the OpenAPI contract collectors are built against; no data (it is in docs/ too)",
    "api/docs/": "Swagger UI over that schema; no data",
    "metrics": "its own bearer token or address allow-list (test_metrics_needs_its_token_or_an_allowed_address)",
}

# For collector keys only, never a person (their own tests check the key's scope).
COLLECTOR_KEYS = {
    "api/v1/budgets/state": "the edge's budget state; a key learns its lines' (tests/plans/test_budget_holds.py)",
}

ENDPOINTS: dict[str, Endpoint] = {
    "": page(PERSON, scope="none"),  # links to the API and the admin
    "overview/": page(),
    "waste/": page(),
    "waste/requests/": page(query="hours=24"),
    "waste/record/": page(),
    "waste/duplicates/": page(),
    "waste/conversation/": page(query="id=c-1"),
    "views/save/": page(scope="none", methods=("POST",)),  # the user's own saved view of a page
    "views/<int:view_id>/": page(scope="none"),  # a saved view's link: the page under the reader's own scope
    "finance/": page(MONEY),
    "finance/close/": page(MONEY),
    "finance/close/<str:month>/": page(MONEY),  # the checklist of the user's lines
    "finance/close/<str:month>/act/": page(MONEY, scope="company", methods=("POST",)),  # closing is company-wide
    "finance/close/<str:month>/items/<str:key>/": page(MONEY),  # a checklist line's items, of the user's lines
    "finance/close/<str:month>/review/": page(MONEY, scope="company", methods=("POST",)),  # a finding's decision
    "finance/plans/": page(MONEY),
    "finance/plans/<str:month>/": page(MONEY, methods=("GET", "POST")),  # the user's lines only
    "finance/plans/<str:month>/copy/": page(MONEY, methods=("POST",)),
    "finance/reconciliation/": page(MONEY),  # the differences of the user's lines only
    "finance/reconciliation/act/": page(MONEY, scope="company", methods=("POST",)),  # bills and adjustments
    "finance/rates/": page(MONEY, scope="none"),  # rates and missing days: no line's figures
    "finance/rates/act/": page(MONEY, scope="company", methods=("POST",)),  # enter or import rates
    "finance/pack/<str:month>.xlsx": page(MONEY),  # a closed month's workbook, of the user's lines
    "finance/journal/": page(MONEY),
    "audits/": page(LEDGER),
    "audits/<str:month>/": page(LEDGER),
    "rules/": page(scope="none"),
    "rules/draft/": page(EDITORS, scope="company", methods=("POST",)),
    "rules/<int:version>/try/": page(EDITORS, scope="company"),
    "prices/": page(scope="none"),
    "collectors/": page(EDITORS, scope="company"),
    "budgets/": page(),
    "budgets/<int:budget_id>/override/": page(MONEY, methods=("POST",)),  # a budget of the user's lines
    "budgets/scoped/": page(MONEY, methods=("POST",)),  # a team's or caller's budget of the user's lines
    "alerts/": page(),
    "figures/": page(scope="none"),  # what each figure means: no data
    "alerts/channels/": page(),
    "alerts/channels/<int:channel_id>/test/": page(EDITORS, scope="none", methods=("POST",)),
    "alerts/act/<str:token>/": page(EDITORS, methods=("GET", "POST")),  # a signed mute / acknowledge link
    "alerts/<int:alert_id>/act/": page(EDITORS, methods=("POST",)),  # acknowledge / mute / unmute from the web
    "alerts/channels/new/": page(("admin",), scope="company", methods=("GET", "POST")),
    "alerts/channels/<int:channel_id>/edit/": page(("admin",), scope="company", methods=("GET", "POST")),
    "api/v1/records": Endpoint(READERS, "lines", query=SINCE),
    "api/v1/usage": Endpoint(READERS, "lines", query=WINDOW),
    "api/v1/rejections": Endpoint(READERS, "company"),
    "api/v1/usage/classes": Endpoint(READERS, "lines", query=WINDOW),
    "api/v1/rulesets": Endpoint(READERS, "none"),
    "api/v1/rulesets/<int:version>/rules": Endpoint(EDITORS, "company", ("POST",)),
    "api/v1/rulesets/<int:version>/try": Endpoint(EDITORS, "company"),
    "api/v1/rulesets/<int:version>/activate": Endpoint(EDITORS, "company", ("POST",)),
    "api/v1/ledger/accounts": Endpoint(LEDGER, "none"),
    "api/v1/ledger/trial-balance": Endpoint(MONEY, "lines", query=f"period={THIS_MONTH}"),
    "api/v1/ledger/figures": Endpoint(LEDGER, "lines", query=f"period={THIS_MONTH}"),  # money to MONEY only
    "api/v1/ledger/matrix": Endpoint(LEDGER, "lines", query=f"from={THIS_MONTH}"),
    "api/v1/ledger/journal": Endpoint(LEDGER, "lines", query=f"period={THIS_MONTH}"),
    "api/v1/ledger/journal/<int:pk>/usage": Endpoint(LEDGER, "lines"),
    "api/v1/ledger/budget-vs-actual": Endpoint(LEDGER, "lines", query=f"period={THIS_MONTH}"),
    "api/v1/ledger/budgets": Endpoint(LEDGER, "company", ("GET", "PUT")),
    "api/v1/ledger/revenue": Endpoint(MONEY, "company", ("GET", "PUT")),
    "api/v1/ledger/periods": Endpoint(LEDGER, "company"),
    "api/v1/ledger/periods/<str:month>/close": Endpoint(MONEY, "company", ("POST",)),
    "api/v1/ledger/periods/<str:month>/reopen": Endpoint(("admin",), "company", ("POST",)),
    "api/v1/ledger/findings": Endpoint(MONEY, "company"),
    "api/v1/exports/focus": Endpoint(MONEY, "lines", query=f"period={THIS_MONTH}"),
}

# The read endpoints whose answer to an unscoped user names the hidden line: the scope check
# below is not vacuous there.
SHOWS_EVERY_LINE = {"api/v1/records", "api/v1/usage", "api/v1/usage/classes", "waste/requests/", "overview/"}


def routes() -> Iterator[tuple[str, URLPattern]]:
    def walk(resolver: URLResolver, prefix: str) -> Iterator[tuple[str, URLPattern]]:
        for item in resolver.url_patterns:
            if isinstance(item, URLResolver):
                yield from walk(item, prefix + str(item.pattern))
            else:
                yield prefix + str(item.pattern), item

    yield from walk(get_resolver(), "")


def concrete(route: str) -> str:
    """A URL for a route: converters and regex groups filled with sample values."""
    samples = {"month": f"{datetime.now(UTC):%Y-%m}", "app_label": None, "url": "nowhere/"}

    def regex_group(match: re.Match[str]) -> str:
        name, body = match.group(1), match.group(2)
        return body.split("|")[0] if name == "app_label" else samples.get(name) or "1"

    url = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: samples.get(m.group(1)) or "1", route)
    url = re.sub(r"\(\?P<(\w+)>([^)]*)\)", regex_group, url)
    return "/" + url.replace("^", "").replace("$", "").replace("\\", "")


def refused(answer: object, login: str = "/login/") -> bool:
    status = answer.status_code  # type: ignore[attr-defined]
    location = answer.headers.get("Location", "")  # type: ignore[attr-defined]
    return status in (401, 403) or (status == 302 and location.startswith(login))


def call(client: Client, method: str, url: str) -> object:
    return getattr(client, method.lower())(url, content_type="application/json") if method != "GET" else client.get(url)


def user(role: str | None, *, name: str, lines: list[str] | None = None) -> Client:
    """A logged-in client of a user in one role group (or none), scoped to `lines` if given."""
    made = factories.finance_user(name, role=role) if role else User.objects.create_user(name, password="pw-tests")
    if lines:
        UserScope.objects.create(user=made, business_lines=lines)
    client = Client()
    client.force_login(made)
    return client


def test_every_route_has_a_policy():
    served = {route for route, _ in routes() if not route.startswith("admin/")}
    unknown = served - set(ENDPOINTS) - set(PUBLIC) - set(COLLECTOR_KEYS)
    assert not unknown, f"routes without a policy in {__name__}.ENDPOINTS or PUBLIC: {sorted(unknown)}"
    assert not (set(ENDPOINTS) | set(PUBLIC) | set(COLLECTOR_KEYS)) - served, "ENDPOINTS lists routes that are gone"


def test_anonymous_requests_are_refused_everywhere_but_the_public_routes():
    anonymous = Client()
    open_ = [
        f"{method} {route}: {answer.status_code}"  # type: ignore[attr-defined]
        for route, endpoint in ENDPOINTS.items()
        for method in endpoint.methods
        if not refused(answer := call(anonymous, method, concrete(route)))
    ]
    open_ += [route for route in COLLECTOR_KEYS if not refused(anonymous.get(concrete(route)))]
    assert open_ == []


def test_every_admin_route_sends_anonymous_users_and_non_staff_to_the_admin_login():
    admin_routes = [route for route, _ in routes() if route.startswith("admin/")]
    assert len(admin_routes) > 100  # every registered model's views
    public = {"admin/login/", "admin/logout/"}
    anonymous = Client()  # one client: each new one loads the middleware again (50 ms)
    open_ = [
        f"{route}: {answer.status_code}"  # type: ignore[attr-defined]
        for route in admin_routes
        if route not in public and not refused(answer := anonymous.get(concrete(route)), login="/admin/login/")
    ]
    assert open_ == []
    nobody = user(None, name="nobody")  # logged in, not staff: the same check (AdminSite.has_permission)
    assert refused(nobody.get("/admin/"), login="/admin/login/")
    assert refused(nobody.get("/admin/auditlog/auditentry/"), login="/admin/login/")


def test_staff_without_permissions_gets_no_model_in_the_admin():
    staff = User.objects.create_user("staff-only", password="pw-for-tests-only", is_staff=True)
    client = Client()
    client.force_login(staff)
    models = "|".join(f"{m._meta.app_label}/{m._meta.model_name}" for m in admin.site._registry)
    views = re.compile(rf"admin/({models})/(|<path:object_id>/change/)$")  # list and view: the rest need more
    model_views = [route for route, _ in routes() if views.match(route)]
    assert len(model_views) > 50
    # 403, or for an object that does not exist the admin's redirect to its index (showing nothing).
    open_ = [
        f"{route}: {a.status_code}"
        for route in model_views
        if (a := client.get(concrete(route))).status_code != 403 and a.headers.get("Location") != "/admin/"
    ]
    assert open_ == []


def test_a_user_without_a_role_is_refused_where_roles_apply():
    nobody = user(None, name="no-role")
    open_ = [
        f"{method} {route}: {answer.status_code}"  # type: ignore[attr-defined]
        for route, endpoint in ENDPOINTS.items()
        if endpoint.roles is not PERSON
        for method in endpoint.methods
        if (answer := call(nobody, method, concrete(route))).status_code != 403  # type: ignore[attr-defined]
    ]
    assert open_ == []


def test_the_nearest_role_outside_an_endpoint_is_refused():
    # The role just below the endpoint's (viewer < engineer < finance): the one most likely let in.
    outside = {role: user(role, name=f"only-{role}") for role in READERS}
    open_ = [
        f"{role} {method} {route}: {answer.status_code}"  # type: ignore[attr-defined]
        for route, endpoint in ENDPOINTS.items()
        if endpoint.roles is not PERSON
        for role in [r for r in ("finance", "engineer", "viewer") if r not in endpoint.roles][:1]
        for method in endpoint.methods
        if (answer := call(outside[role], method, concrete(route))).status_code != 403  # type: ignore[attr-defined]
    ]
    assert open_ == []


@pytest.fixture
def two_lines(collector: Collector) -> None:
    records = [factories.record(**{"dims.business_line": line}) for line in (VISIBLE, HIDDEN) for _ in range(3)]
    bad = factories.record(**{"dims.business_line": HIDDEN, "model": factories.DELETE})
    assert collector.send([*records, bad]).json()["accepted"] == 6
    assert Rejection.objects.filter(raw__contains=HIDDEN).exists()


@pytest.mark.usefixtures("two_lines")
def test_a_scoped_user_sees_nothing_of_other_lines_and_is_refused_company_wide_views():
    scoped = user("admin", lines=[VISIBLE], name="scoped-admin")
    everyone = user("admin", name="unscoped-admin")
    leaks, shown = [], set()
    for route, endpoint in ENDPOINTS.items():
        url = concrete(route) + (f"?{endpoint.query}" if endpoint.query else "")
        for method in endpoint.methods:
            answer = call(scoped, method, url)
            if endpoint.scope == "company" and answer.status_code != 403:  # type: ignore[attr-defined]
                leaks.append(f"{method} {route}: {answer.status_code}, not refused")  # type: ignore[attr-defined]
            if method == "GET" and HIDDEN in body(answer):
                leaks.append(f"GET {route}: shows {HIDDEN}")
            if route in SHOWS_EVERY_LINE and HIDDEN in call(everyone, method, url).content.decode():  # type: ignore[attr-defined]
                shown.add(route)
    assert leaks == []
    assert SHOWS_EVERY_LINE <= shown, "the unscoped user should see the hidden line there"


def body(answer: object) -> str:
    """The text of an answer, streamed (the FOCUS export) or not."""
    if getattr(answer, "streaming", False):
        return b"".join(answer.streaming_content).decode()  # type: ignore[attr-defined]
    return answer.content.decode()  # type: ignore[attr-defined]


def test_it_refuses_every_read_api_to_a_user_without_a_role():
    nobody = user(None, name="logged-in-no-role")
    api = [route for route, _ in routes() if route.startswith("api/") and route not in PUBLIC]
    assert len(api) > 20
    open_ = [f"GET {route}: {a.status_code}" for route in api if (a := nobody.get(concrete(route))).status_code != 403]
    assert open_ == []


# --- the admin, as users scoped to some business lines ---------------------------------------


def line_rows(line: str) -> dict[str, Model]:
    """A row of `line` in every admin model whose rows belong to a business line."""
    from apps.alerts.models import Alert
    from apps.classification.models import HealthThreshold
    from apps.ledger.models import CostCentre, ElasticWindow, Finding
    from apps.plans.planning import budget_set, revenue_set

    now = datetime.now(UTC)
    month = now.date().replace(day=1)
    rows = [
        budget_set(business_line=line, month=month, amount=Decimal("10"), currency="CNY"),
        revenue_set(business_line=line, month=month, amount=Decimal("20"), currency="CNY"),
        ElasticWindow.objects.create(business_line=line, name=f"peak {line}", start=now, end=now + timedelta(days=1)),
        Finding.objects.create(kind="revenue_missing", action="enter_revenue", period=month, business_line=line),
        factories.alert_rule("spend_spike", business_line=line),
        Alert.objects.create(
            dedup_key=f"k-{line}", kind="spend_spike", status="firing", severity=20, business_line=line, created_at=now
        ),
        factories.dimset({"business_line": line}),
        CostCentre.objects.create(business_line=line, code=f"CC-{len(line)}", name=f"centre of {line}"),
        HealthThreshold.objects.create(business_line=line, cache_hit_min=Decimal("0.10"), note=f"RAG of {line}"),
    ]
    return {row._meta.label_lower: row for row in rows}


def admin_urls(model: type[Model], pk: object) -> dict[str, str]:
    base = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
    return {
        "changelist": base,
        "add": f"{base}add/",
        "change": f"{base}{pk}/change/",
        "delete": f"{base}{pk}/delete/",
        "history": f"{base}{pk}/history/",
    }


def snapshot(model: type[Model], pk: object) -> dict[str, object] | None:
    return model._default_manager.filter(pk=pk).values().first()


def scoped_admin_leaks(client: Client, model: type[Model], pk: object, line_bound: bool) -> list[str]:
    """Each admin URL of `model` for the row `pk` (of the hidden line, for a line-bound model):
    refused, or answered without the hidden line; POSTs (change, delete, every action) leave
    the row as it was. A model spanning lines is refused at every URL."""
    leaks, before = [], snapshot(model, pk)
    for view, url in admin_urls(model, pk).items():
        answer = client.get(url)
        if not line_bound and answer.status_code not in (403, 404):
            leaks.append(f"GET {url}: {answer.status_code}, a scoped user has no access to this model")
        elif answer.status_code == 200 and HIDDEN in answer.content.decode():
            leaks.append(f"GET {url}: shows {HIDDEN}")
        if view in ("change", "delete"):
            client.post(url, {"post": "yes", "business_line": VISIBLE})
    for _, action, _ in admin.site._registry[model]._get_base_actions():
        form = {"action": action, "_selected_action": [pk], "post": "yes"}
        answer = client.post(admin_urls(model, pk)["changelist"], form)
        if not line_bound and answer.status_code != 403:
            leaks.append(f"action {action} on {model._meta.label}: {answer.status_code}")
    if snapshot(model, pk) != before:
        leaks.append(f"{model._meta.label} {pk} was changed or deleted")
    return leaks


@pytest.mark.usefixtures("two_lines")
@pytest.mark.parametrize("role", READERS)
def test_a_scoped_user_of_each_role_sees_and_edits_only_their_lines_in_the_admin(role):
    line_rows(VISIBLE)
    hidden = line_rows(HIDDEN)
    made = factories.finance_user(f"scoped-{role}", role=role)
    User.objects.filter(pk=made.pk).update(is_staff=True)
    UserScope.objects.create(user=made, business_lines=[VISIBLE])
    scoped, everyone = Client(), Client()
    scoped.force_login(made)
    everyone.force_login(User.objects.create_user(f"all-{role}", password="pw-tests", is_staff=True))
    User.objects.get(username=f"all-{role}").groups.add(*made.groups.all())
    leaks, shown, open_to_everyone = [], set(), set()
    for model in admin.site._registry:
        label = model._meta.label_lower
        row = hidden.get(label) or model._default_manager.order_by("pk").first()
        pk = row.pk if row is not None else 1
        urls = admin_urls(model, pk)
        if everyone.get(urls["changelist"]).status_code == 200:
            open_to_everyone.add(label)
        if label in hidden and HIDDEN in everyone.get(urls["change"]).content.decode():
            shown.add(label)
        leaks += scoped_admin_leaks(scoped, model, pk, line_bound=label in hidden)
    assert leaks == []
    # Not vacuous: the same role without a scope opens the hidden line's rows, and the models
    # refused to the scoped user.
    viewable = {label for model in admin.site._registry if can_view(made, label := model._meta.label_lower)}
    assert shown == viewable & set(hidden) and open_to_everyone == viewable
    assert role not in ("admin", "finance") or "plans.budget" in shown


def can_view(person: User, label: str) -> bool:
    app, model = label.split(".")
    return person.has_perm(f"{app}.view_{model}") or person.has_perm(f"{app}.change_{model}")


def test_metrics_needs_its_token_or_an_allowed_address(settings):
    settings.METRICS_TOKEN = "metrics-token-for-tests"
    outside = Client(REMOTE_ADDR="203.0.113.9")
    assert outside.get("/metrics").status_code == 403
    assert outside.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert outside.get("/metrics", HTTP_AUTHORIZATION="Bearer metrics-token-for-tests").status_code == 200


def test_the_public_routes_hold_no_data():
    anonymous = Client()
    assert anonymous.get("/healthz").json() == {"status": "ok"}
    assert anonymous.get("/login/").status_code == 200
    assert anonymous.get("/api/schema/").status_code == 200
