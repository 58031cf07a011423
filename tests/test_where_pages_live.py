"""Where pages live (docs/architecture.md): each app owns its pages and their templates. A page
module of apps/<app>/ renders only templates/<app>/; a template of templates/<app>/ includes or
extends only its own app's templates or the site's (base.html, page.html), loads only its own app's
template tags, the shared ones of apps.common or Django's, and links only its own app's or
apps.common's static files (the shared stylesheet), each of them found; and each page is served by the app
that owns its data. The dashboards keep only their own pages."""

from __future__ import annotations

import re
from pathlib import Path

from django.contrib.staticfiles import finders
from django.template.backends.django import get_installed_libraries
from django.urls import resolve

REPO = Path(__file__).resolve().parent.parent
APPS, TEMPLATES = REPO / "apps", REPO / "templates"
# A template named in code or in a template: "<folder>/<name>.html".
TEMPLATE_NAME = re.compile(r"""["']([a-z_]+)/[\w/.-]+\.html["']""")
LOAD = re.compile(r"\{%\s*load\s+([^%]+?)\s*%\}")
STATIC = re.compile(r"""\{%\s*static\s+["']([^"']+)["']\s*%\}""")

# Each page's URL and the app serving it: the app owning what it shows.
OWNERS = {
    "/overview/": "dashboards",
    "/waste/": "dashboards",
    "/waste/requests/": "dashboards",
    "/waste/record/": "dashboards",
    "/waste/duplicates/": "dashboards",
    "/waste/conversation/": "dashboards",
    "/alerts/": "alerts",
    "/alerts/channels/": "alerts",
    "/alerts/channels/new/": "alerts",
    "/alerts/channels/1/edit/": "alerts",
    "/alerts/channels/1/test/": "alerts",
    "/alerts/act/token/": "alerts",
    "/rules/": "classification",
    "/rules/draft/": "classification",
    "/rules/1/try/": "classification",
    "/prices/": "pricing",
    "/collectors/": "ingest",  # the keys (accounts) with their rejections (ingest)
    "/budgets/": "plans",
    "/finance/": "finance",
    "/finance/reconciliation/": "reconciliation",
    "/audits/": "audits",
}


def foreign_templates(app: str, text: str) -> list[str]:
    """The template names in `text` (code or a template of `app`) outside templates/<app>/."""
    return [m.group(0) for m in TEMPLATE_NAME.finditer(text) if m.group(1) != app]


def foreign_libraries(app: str, text: str, libraries: dict[str, str]) -> list[str]:
    """The template tag libraries a template of `app` loads from another app (apps.common and
    Django's own are everyone's)."""
    loaded = {name for m in LOAD.finditer(text) for name in m.group(1).split()}
    owners = {name: libraries.get(name, "django").split(".") for name in loaded}
    return sorted(name for name, parts in owners.items() if parts[0] == "apps" and parts[1] not in (app, "common"))


def foreign_static(app: str, text: str) -> list[str]:
    """The static files a template of `app` links that are another app's, or found nowhere."""
    return [m.group(1) for m in STATIC.finditer(text) if m.group(1).split("/")[0] not in (app, "common")] + [
        f"{m.group(1)} (missing)" for m in STATIC.finditer(text) if finders.find(m.group(1)) is None
    ]


def test_every_app_renders_only_its_own_templates() -> None:
    found = [
        f"{path.relative_to(REPO)}: {name}"
        for path in sorted(APPS.rglob("*.py"))
        for name in foreign_templates(path.relative_to(APPS).parts[0], path.read_text())
    ]
    assert found == []


def test_the_dashboards_render_no_page_of_another_app() -> None:
    rendered = {
        m.group(0) for path in (APPS / "dashboards").rglob("*.py") for m in TEMPLATE_NAME.finditer(path.read_text())
    }
    assert rendered and all(name.strip("\"'").startswith("dashboards/") for name in rendered)


def test_every_template_uses_only_its_own_apps_templates_tags_and_static_files() -> None:
    libraries = get_installed_libraries()
    found = []
    for path in sorted(TEMPLATES.glob("*/**/*.html")):
        app, text = path.relative_to(TEMPLATES).parts[0], path.read_text()
        if app == "registration":  # Django's own login template
            continue
        found += [f"{path.relative_to(REPO)}: {name}" for name in foreign_templates(app, text)]
        found += [f"{path.relative_to(REPO)}: load {name}" for name in foreign_libraries(app, text, libraries)]
        found += [f"{path.relative_to(REPO)}: static {name}" for name in foreign_static(app, text)]
    assert found == []


def test_each_page_is_served_by_the_app_owning_its_data() -> None:
    served = {url: resolve(url).func.__module__.split(".")[1] for url in OWNERS}
    assert served == OWNERS


def test_it_sees_a_page_rendering_another_apps_template() -> None:
    source = 'return render(request, "alerts/history.html", context)\nrender(request, "dashboards/waste.html")'
    assert foreign_templates("dashboards", source) == ['"alerts/history.html"']
    assert foreign_templates("alerts", source) == ['"dashboards/waste.html"']


def test_it_sees_a_template_linking_another_apps_or_a_missing_static_file() -> None:
    text = "{% static 'common/pages.css' %}{% static 'dashboards/dashboards.css' %}"
    assert foreign_static("alerts", text) == ["dashboards/dashboards.css", "dashboards/dashboards.css (missing)"]


def test_it_sees_a_template_loading_another_apps_tags() -> None:
    libraries = get_installed_libraries()
    text = "{% load i18n static dashboards pages %}"
    assert foreign_libraries("ledger", text, libraries) == ["dashboards"]
    assert foreign_libraries("dashboards", text, libraries) == []
