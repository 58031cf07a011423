"""The apps' SQL names a table through its model (`Model._meta.db_table`), never as a literal, so
a renamed table or a moved model cannot leave a query reading a table that no longer exists.

The scan reads the string literals of apps/**/*.py outside the migrations (the parts of an
f-string too; docstrings and comments are prose and may name tables) and flags any installed
model's table name written where SQL would read it: after FROM, JOIN, INTO, UPDATE, TABLE, ONLY,
ON, LOCK or TRUNCATE, qualifying a column (`ingest_record.ts`), as the start of a derived name (a
partition's `ingest_record_` before its month), or as a whole string (a table passed to SQL
built elsewhere). A whole-string table name that is something else by coincidence (the
`ledger_finding` detector, the `ledger_revenue` OpenAPI operation) is allowed by what surrounds
it: a Meta's `db_table`, a dict key, a comparison, a keyword argument not named for a table, or
the first argument of a decorator (a registry's name)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from django.apps import apps as registry

REPO = Path(__file__).resolve().parent.parent
APPS = REPO / "apps"
# The words SQL writes a table after, and what may stand between (ONLY, IF [NOT] EXISTS, a quote).
SQL_BEFORE_TABLE = (
    r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE|ONLY|ON|LOCK|TRUNCATE)\s+"  # the word
    r"(?:ONLY\s+|IF\s+(?:NOT\s+)?EXISTS\s+)?\"?"  # what may stand between
)


def table_names() -> list[str]:
    return sorted({m._meta.db_table for m in registry.get_models(include_auto_created=True)}, key=len, reverse=True)


def patterns(tables: list[str]) -> list[re.Pattern[str]]:
    """Where SQL reads a table: after a keyword, qualifying a column, or starting a derived name
    (group 1 is the table)."""
    names = "|".join(re.escape(t) for t in tables)
    return [
        re.compile(SQL_BEFORE_TABLE + rf"({names})(?!\w)", re.IGNORECASE),
        re.compile(rf"(?<![\w.])({names})\.[a-z_]\w*"),
        re.compile(rf"(?<![\w.])({names})_(?=\d|%|\{{|$)"),
    ]


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of a module, its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def not_table_uses(tree: ast.AST) -> set[int]:
    """The ids of the string constants whose place says they are not a table."""
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "db_table" for t in node.targets):
            allowed.add(id(node.value))
        elif isinstance(node, ast.Dict):
            allowed.update(id(k) for k in node.keys if k is not None)
        elif isinstance(node, ast.Compare):
            allowed.update(id(n) for n in [node.left, *node.comparators])
        elif isinstance(node, ast.Call):
            allowed.update(id(k.value) for k in node.keywords if "table" not in (k.arg or ""))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call) and decorator.args:
                    allowed.add(id(decorator.args[0]))
    return allowed


def strings(tree: ast.AST) -> Iterator[tuple[ast.expr, str]]:
    """Each string literal with its text; an f-string's replacement fields read as `{}`."""
    parts = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            yield node, "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts:
            yield node, node.value


def line_of(source: str, node: ast.expr, text: str, table: str, at: int) -> int:
    """The source line of the occurrence of `table` at offset `at` of the literal's text: the same
    occurrence, counted, in the literal's source (implicitly joined pieces span lines)."""
    word = re.compile(rf"(?<!\w){re.escape(table)}(?!\w)|(?<!\w){re.escape(table)}(?=_(?:\d|\W|$))")
    nth = len(word.findall(text[:at]))
    segment = ast.get_source_segment(source, node) or ""
    found = list(word.finditer(segment))
    return node.lineno + (segment[: found[nth].start()].count("\n") if nth < len(found) else 0)


def literal_tables(source: str, tables: list[str]) -> list[tuple[int, str]]:
    """(line, what) for each table name a string literal of `source` writes where SQL reads it."""
    tree = ast.parse(source)
    prose, allowed, whole, sql = docstrings(tree), not_table_uses(tree), set(tables), patterns(tables)
    found = []
    for node, text in strings(tree):
        if id(node) in prose:
            continue
        for pattern in sql:
            for m in pattern.finditer(text):
                found.append((line_of(source, node, text, m.group(1), m.start(1)), m.group(0)))
        if text.strip() in whole and id(node) not in allowed:
            found.append((node.lineno, text.strip()))
    return sorted(found)


def python_files() -> Iterator[Path]:
    for path in sorted(APPS.rglob("*.py")):
        if "migrations" not in path.relative_to(REPO).parts:
            yield path


def test_the_apps_sql_names_tables_by_their_models() -> None:
    tables = table_names()
    found = [
        f"{path.relative_to(REPO)}:{line}: {hit!r}"
        for path in python_files()
        for line, hit in literal_tables(path.read_text(), tables)
    ]
    assert not found, "table names written as literals (use Model._meta.db_table):\n" + "\n".join(found)


def test_the_scan_finds_a_literal_table_wherever_sql_reads_one() -> None:
    tables = table_names()
    source = '''
"""A docstring naming ingest_record in prose is fine."""
from apps.ingest.models import Record
SQL = "SELECT 1 FROM ingest_record r JOIN ingest_dimset d ON d.id = r.dims_id"
LOCKED = "LOCK TABLE classification_reason IN SHARE ROW EXCLUSIVE MODE"
WRITE = f"INSERT INTO pricing_hourlycost ({COLUMNS}) SELECT 1"
FILTER = "ingest_record.dims_id = ANY(%s)"
PARTITION = f"ingest_record_{month:%Y%m}"
TABLES = ("dashboards_dailycost", "pricing_hourlycost")
FINE = f"SELECT 1 FROM {Record._meta.db_table} r"
KIND = {"ledger_finding": "a detector, not a table"}
JOINED = (
    "SELECT 1 "
    "FROM ledger_journalline l "
    f"JOIN {Record._meta.db_table} r ON true"
)
LONG = """
SELECT 1
FROM alerts_notification n
"""
LOCKED_TOO = "LOCK ingest_hourlyusage; TRUNCATE common_jobrun"
@register("ledger_finding", where="ledger_finding")
def op():
    return view(operation_id="ledger_revenue", table="ledger_revenue")
'''
    hits = list(literal_tables(source, tables))
    assert hits == [
        (4, "FROM ingest_record"),
        (4, "JOIN ingest_dimset"),
        (5, "TABLE classification_reason"),
        (6, "INTO pricing_hourlycost"),
        (7, "ingest_record.dims_id"),
        (8, "ingest_record_"),
        (9, "dashboards_dailycost"),
        (9, "pricing_hourlycost"),
        (14, "FROM ledger_journalline"),
        (19, "FROM alerts_notification"),
        (21, "LOCK ingest_hourlyusage"),
        (21, "TRUNCATE common_jobrun"),
        (24, "ledger_revenue"),
    ], hits
