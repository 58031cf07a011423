"""An app reads another only through its public names: no `from apps.<other>... import _name`, no
`apps.<other>...._name` attribute either. A private name is the owning app's to change; a second
app depending on it (the dashboards once reached into classification's `_ruleset_sql`) turns
every such change into a break somewhere else. The scan names the file, the line and the name."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _app_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "apps" else ""


def private_reaches(source: str, app: str, where: str = "<source>") -> list[str]:
    """Each place `source` (a module of the app `app`) uses another app's private name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            module, names = node.module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            module, names = "", [a.name for a in node.names]
        else:
            continue
        for name in names:
            reached = f"{module}.{name}" if module else name
            other = _app_of(reached)
            if other and other != app and any(part.startswith("_") for part in reached.split(".")[2:]):
                found.append(f"{where}:{node.lineno}: {reached}")
    return found


def test_no_app_uses_another_apps_private_names() -> None:
    found = every_private_reach()
    assert found == [], "\n".join(found)


def test_the_scan_names_each_kind_of_reach() -> None:
    source = (
        "from apps.classification.services import _ruleset_sql, ruleset_compiled\n"
        "from apps.ingest._wire import decode\n"
        "import apps.pricing._book\n"
        "from apps.dashboards.tables import _sorted\n"  # the app's own: allowed
        "from apps.common.buckets import parse_month as _parse_month\n"  # a public name kept private here: allowed
    )
    assert private_reaches(source, "dashboards") == [
        "<source>:1: apps.classification.services._ruleset_sql",
        "<source>:2: apps.ingest._wire.decode",
        "<source>:3: apps.pricing._book",
    ]


def every_private_reach() -> list[str]:
    found = []
    for path in sorted((REPO / "apps").rglob("*.py")):
        app = path.relative_to(REPO / "apps").parts[0]
        found += private_reaches(path.read_text(), app, str(path.relative_to(REPO)))
    return found


if __name__ == "__main__":  # make lint: the scan alone, without Django
    for where in every_private_reach():
        print(f"another app's private name (use or add a public one): {where}")
    raise SystemExit(1 if every_private_reach() else 0)
