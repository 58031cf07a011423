"""A lower app never names a higher one, not even in a string (docs/architecture.md, "How an app
declares itself"): the higher app registers what it needs with the lower one. Import-linter sees
imports only; this scan reads the string literals of apps/**/*.py (not the migrations; docstrings
are prose) and flags, in an app, a string that names an app above it in the layers of the
contract "the record flows one way" (pyproject.toml, read here so the two stay in step), or an
app beside it that it may not import (plans and reconciliation):

- a module path, `"apps.<higher>..."`;
- a model label, `"<higher>.<Model>"`, or a permission, `"<higher>.<action>_<model>"`;
- a URL of the higher app: `"<namespace>:<name>"`, or one of its URL names given to `reverse()`
  (or `reverse_lazy`, `redirect`, `resolve_url`) or written in a template's `{% url %}`;
- its label given to `apps.get_model()` or `apps.get_app_config()`;

and in the app's templates (`templates/<app>/`), a `{% url %}` of a higher app's page.

Each app's URL names are read from its own files (`path(..., name=...)`, `app_name`), so the scan
runs without Django: alone from `make lint`, and in the suite."""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
APPS = REPO / "apps"
CONTRACT = "the record flows one way"
ACTIONS = ("add", "change", "delete", "view")
LINKERS = frozenset({"reverse", "reverse_lazy", "redirect", "resolve_url"})
REGISTRY_READERS = frozenset({"get_model", "get_app_config"})
TEMPLATE_URL = re.compile(r"""\{%\s*url\s+['"]([\w:-]+)['"]""")


def layers(pyproject: Path = REPO / "pyproject.toml") -> list[list[tuple[str, bool]]]:
    """The apps of the layers contract, top first: each layer's apps with whether they are
    independent of each other (`|`) or may import each other (`:`)."""
    config = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in config if c["type"] == "layers" and c["name"].startswith(CONTRACT)]
    found = []
    for layer in contract["layers"]:
        independent = "|" in layer
        names = [n.strip() for n in re.split(r"[|:]", layer)]
        found.append([(n.removeprefix("apps."), independent) for n in names])
    return found


def forbidden(app: str, order: list[list[tuple[str, bool]]]) -> set[str]:
    """The apps `app` may not name: those in the layers above its own, and those beside it that it
    may not import."""
    for at, layer in enumerate(order):
        names = [name for name, _ in layer]
        if app in names:
            above = {name for upper in order[:at] for name, _ in upper}
            beside = {name for name, independent in layer if independent and name != app}
            return above | beside
    return set()


@dataclass(frozen=True)
class Urls:
    """The URL names (bare) and namespaces each app declares."""

    names: dict[str, str]  # name -> app
    namespaces: dict[str, str]  # namespace -> app


def urls_of(sources: dict[str, list[str]]) -> Urls:
    names: dict[str, str] = {}
    namespaces: dict[str, str] = {}
    for app, texts in sources.items():
        for text in texts:
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.Call) and _called(node) in {"path", "re_path"}:
                    for keyword in node.keywords:
                        if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
                            names[str(keyword.value.value)] = app
                elif isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "app_name" for t in node.targets
                ):
                    if isinstance(node.value, ast.Constant):
                        namespaces[str(node.value.value)] = app
    return Urls(names, namespaces)


def _called(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _strings(tree: ast.AST) -> Iterator[tuple[ast.expr, str]]:
    """Each string literal with its text; an f-string's replacement fields read as `{}`."""
    parts = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            yield node, "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts:
            yield node, node.value


def _first_args(tree: ast.AST, calls: frozenset[str]) -> set[int]:
    """The ids of the string constants passed first to one of `calls`."""
    return {
        id(node.args[0])
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _called(node) in calls and node.args
    }


def upward_names(source: str, higher: set[str], urls: Urls, where: str = "<source>") -> list[str]:
    """Each place a string literal of `source` names one of the `higher` apps."""
    if not higher:
        return []
    tree = ast.parse(source)
    prose, linked, read = _docstrings(tree), _first_args(tree, LINKERS), _first_args(tree, REGISTRY_READERS)
    labels = "|".join(sorted(higher))
    named = [
        re.compile(rf"(?<![\w.])apps\.(?:{labels})(?!\w)"),
        re.compile(rf"(?<![\w./])(?:{labels})\.(?:[A-Z]\w*|(?:{'|'.join(ACTIONS)})_[a-z]\w*)(?![\w.])"),
    ]
    found: list[tuple[int, str]] = []
    for node, text in _strings(tree):
        if id(node) in prose:
            continue
        hits = [m.group(0) for pattern in named for m in pattern.finditer(text)]
        namespace, _, name = text.partition(":")
        if name and urls.namespaces.get(namespace) in higher:
            hits.append(text)
        if id(node) in linked and urls.names.get(text) in higher:
            hits.append(text)
        if id(node) in read and text in higher:
            hits.append(text)
        hits += [hit.rpartition(": ")[2].strip("'") for hit in template_links(text, higher, urls)]
        found += [(node.lineno, hit) for hit in hits]
    return [f"{where}:{line}: {hit!r}" for line, hit in sorted(found)]


def app_sources() -> dict[str, list[tuple[Path, str]]]:
    found: dict[str, list[tuple[Path, str]]] = {}
    for path in sorted(APPS.rglob("*.py")):
        parts = path.relative_to(APPS).parts
        if len(parts) > 1 and "migrations" not in parts:
            found.setdefault(parts[0], []).append((path, path.read_text()))
    return found


def template_links(text: str, higher: set[str], urls: Urls, where: str = "<template>") -> list[str]:
    """Each `{% url %}` of a template that names a page of one of the `higher` apps."""
    found = []
    for m in TEMPLATE_URL.finditer(text):
        namespace, _, name = m.group(1).rpartition(":")
        if urls.namespaces.get(namespace) in higher or (not namespace and urls.names.get(name) in higher):
            found.append(f"{where}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(1)!r}")
    return found


def every_upward_name() -> list[str]:
    sources, order = app_sources(), layers()
    urls = urls_of({app: [text for _, text in files] for app, files in sources.items()})
    found = []
    for app, files in sources.items():
        higher = forbidden(app, order)
        for path, text in files:
            found += upward_names(text, higher, urls, str(path.relative_to(REPO)))
        for path in sorted((REPO / "templates" / app).rglob("*")):
            if path.is_file():
                found += template_links(path.read_text(), higher, urls, str(path.relative_to(REPO)))
    return found


def test_no_app_names_a_higher_one_in_a_string() -> None:
    found = every_upward_name()
    assert found == [], "\n".join(found)


def test_the_scan_names_each_kind_of_upward_string() -> None:
    urls = Urls(names={"finance-plans": "plans", "prices": "pricing"}, namespaces={"dashboards": "dashboards"})
    source = (
        '"""Docstrings are prose: apps.plans and plans.Budget may be named here."""\n'
        'AUDITED = ("plans.Budget", "pricing.Price")\n'
        'TASK = "apps.plans.tasks.budgets_check"\n'
        'GRANT = "plans.change_budget"\n'
        'page = reverse("finance-plans", kwargs={"month": month}) + reverse("prices")\n'
        'waste = reverse_lazy("dashboards:waste")\n'
        'model = apps.get_model("plans", "Revenue")\n'
        'ok = ("plans", "plansx.Budget", "apps.plansx", "myplans.Budget")\n'
        "html = \"{% url 'finance-plans' month=m %}\"\n"
    )
    assert upward_names(source, {"plans", "dashboards"}, urls) == [
        "<source>:2: 'plans.Budget'",
        "<source>:3: 'apps.plans'",
        "<source>:4: 'plans.change_budget'",
        "<source>:5: 'finance-plans'",
        "<source>:6: 'dashboards:waste'",
        "<source>:7: 'plans'",
        "<source>:9: 'finance-plans'",
    ]
    assert template_links("<a>\n{% url 'dashboards:waste' %}{% url 'prices' %}", {"dashboards"}, urls) == [
        "<template>:2: 'dashboards:waste'"
    ]


def test_the_layers_come_from_the_contract() -> None:
    order = layers()
    assert forbidden("common", order) >= {"auditlog", "accounts", "ledger", "finance", "pipeline"}
    assert forbidden("ledger", order) == {
        "plans",
        "reconciliation",
        "alerts",
        "audits",
        "dashboards",
        "metrics",
        "finance",
        "exports",
        "pipeline",
    }
    assert "reconciliation" in forbidden("plans", order)  # beside it, apart
    assert "dashboards" not in forbidden("finance", order)  # readers read each other
    assert forbidden("pipeline", order) == set()


if __name__ == "__main__":  # make lint: the scan alone, without Django
    for where in every_upward_name():
        print(f"a string naming a higher app (let that app register itself): {where}")
    raise SystemExit(1 if every_upward_name() else 0)
