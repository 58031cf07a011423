"""Dynamic SQL is composed with psycopg's `sql` module, never formatted into a string: this scan
reads every module of the product (the migrations apart). It names the file and line of an
f-string (or str.format) whose text reads as SQL."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The product's code, all of it composed (docs/architecture.md); the migrations hold frozen
# statements, and the benchmarks' own set-up SQL is not the product's.
COMPOSED = ("apps", "collectors", "costplatform", "serving", "wire")
SQL_WORDS = re.compile(r"\b(SELECT|INSERT INTO|DELETE FROM|UPDATE|JOIN|WHERE|LOCK TABLE|TRUNCATE|COPY|SET LOCAL)\b")


def _files() -> list[Path]:
    found: list[Path] = []
    for name in COMPOSED:
        path = ROOT / name
        found += sorted(p for p in path.rglob("*.py") if "migrations" not in p.parts) if path.is_dir() else [path]
    return found


def formatted_sql(source: str) -> list[int]:
    """The lines of f-strings with a substitution, and of str.format calls on a literal, whose text
    reads as SQL."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr) and any(isinstance(v, ast.FormattedValue) for v in node.values):
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format"
            and isinstance(node.func.value, ast.Constant)
            and isinstance(node.func.value.value, str)
        ):
            text = node.func.value.value
        else:
            continue
        if SQL_WORDS.search(text):
            lines.append(node.lineno)
    return lines


def test_the_scan_finds_sql_formatted_into_a_string() -> None:
    assert formatted_sql('t = "x"\nq = f"SELECT * FROM {t} WHERE a = %s"\n') == [2]
    assert formatted_sql('q = "DELETE FROM {} WHERE a = %s".format(t)\n') == [1]
    assert formatted_sql('q = f"no sql {t}"\nr = SQL("SELECT {}").format(t)\n') == []


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_composed_module_formats_no_sql_into_a_string(path: Path) -> None:
    found = formatted_sql(path.read_text())
    assert not found, f"{path.relative_to(ROOT)}: SQL formatted into a string at line(s) {found}; compose it"
