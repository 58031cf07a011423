"""A type-checked tree to a parameterised SQL boolean expression for PostgreSQL, composed with
psycopg's `sql` module.

The expression is TRUE or FALSE for every row, never NULL: a comparison that may meet a null is
wrapped in `(...) IS TRUE`, which is how the Python predicate reads it too (false), and `== null`
becomes `IS NULL`. Every literal travels as a `%s` parameter. Arithmetic runs in `numeric`, so it
neither overflows nor differs from Python's ints.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from psycopg import sql

from .errors import RuleError
from .nodes import Arith, Call, Compare, Field, InList, Literal, Logic, Neg, Node, Not, Operations, type_of
from .schema import Kind

SQL_COMPARE = {"==": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
SQL_FUNCTIONS = {"startswith": sql.SQL("starts_with({}, {})"), "contains": sql.SQL("(strpos({}, {}) > 0)")}
SQL_LOGIC = {"and": sql.SQL(" AND "), "or": sql.SQL(" OR ")}
SQL_CAST = {Kind.STR: sql.SQL("text"), Kind.INT: sql.SQL("bigint"), Kind.BOOL: sql.SQL("boolean")}
PARAM = sql.Placeholder()


@dataclass(frozen=True, slots=True)
class Column:
    """How a field reads in SQL: `sql`, an expression over the caller's FROM clause. Under a
    wildcard key ("dims.*") `sql` holds one placeholder (`sql.Placeholder()`, `%s`), which receives
    the name after the prefix. `codes` maps each value of an enumerated field to what the column
    stores (`{"ok": 0, "error": 1}`). A column must not yield NULL for a field the schema says is
    never null; write a literal `%` in an `sql.SQL` part as `%%` (the statement goes through
    psycopg's `%s` formatting)."""

    sql: sql.Composable
    codes: Mapping[str, object] | None = None


Columns = Mapping[str, Column]


def placeholders(part: sql.Composable) -> int:
    """How many `%s` the composable holds (a Placeholder, or one written in an SQL part)."""
    if isinstance(part, sql.Composed):
        return sum(placeholders(p) for p in part)
    if isinstance(part, sql.Placeholder):
        return 1
    return part.as_string(None).count("%s") if isinstance(part, sql.SQL) else 0


def _guard(expression: sql.Composable, nullable: bool) -> sql.Composable:
    return sql.SQL("({} IS TRUE)").format(expression) if nullable else expression


def _list(parts: Iterable[sql.Composable]) -> sql.Composed:
    return sql.SQL(", ").join(parts)


class _Compiler(Operations[sql.Composable]):
    def __init__(self, columns: Columns) -> None:
        self.columns = columns
        self.params: list[object] = []

    def param(self, value: object, cast: Kind | None = None) -> sql.Composable:
        self.params.append(value)
        return sql.SQL("CAST({} AS {})").format(PARAM, SQL_CAST[cast]) if cast else PARAM

    def literal(self, node: Literal) -> sql.Composable:
        return self.param(node.value, type_of(node).kind)

    def column(self, node: Field) -> Column:
        column = self.columns.get(node.path)
        if column is None:
            prefix = node.path.partition(".")[0]
            column = self.columns.get(f"{prefix}.*")
            if column is None:
                raise RuleError(f"field `{node.path}` has no SQL column", node.pos)
            if placeholders(column.sql) != 1:
                raise ValueError(f"the column template for `{prefix}.*` needs exactly one placeholder")
        return column

    def raw(self, node: Field) -> sql.Composable:
        """The column as stored (codes for an enumerated field); appends the wildcard's name."""
        column = self.column(node)
        if node.path not in self.columns:
            self.params.append(node.path.partition(".")[2])
        return sql.SQL("({})").format(column.sql)

    def may_be_null(self, node: Node) -> bool:
        # A decoded enum is NULL for a code it does not know, whatever the schema says.
        return type_of(node).nullable or (isinstance(node, Field) and self.column(node).codes is not None)

    def value(self, node: Node) -> sql.Composable:
        match node:
            case Literal():
                return self.literal(node)
            case Field():
                codes = self.column(node).codes
                return self.decode(self.raw(node), codes) if codes is not None else self.raw(node)
            case Neg(operand=operand):
                return sql.SQL("(-CAST({} AS numeric))").format(self.value(operand))
            case Arith(operands=operands, ops=ops):
                parts = [sql.SQL("CAST({} AS numeric)").format(self.value(o)) for o in operands]
                terms: list[sql.Composable] = [parts[0]]
                for op, part in zip(ops, parts[1:], strict=True):
                    terms += [sql.SQL(" {} ").format(sql.SQL(op)), part]
                return sql.SQL("({})").format(sql.Composed(terms))
        return self.condition(node)

    def decode(self, raw: sql.Composable, codes: Mapping[str, object]) -> sql.Composable:
        if not codes:
            return sql.SQL("CAST(NULL AS text)")
        arms = sql.SQL(" ").join(
            sql.SQL("WHEN {} THEN {}").format(self.param(code), self.param(label, Kind.STR))
            for label, code in codes.items()
        )
        return sql.SQL("(CASE {} {} END)").format(raw, arms)

    def condition(self, node: Node) -> sql.Composable:
        match node:
            case Literal():
                return self.literal(node)
            case Field():
                return self.raw(node)
            case Not(operand=operand):
                return sql.SQL("(NOT {})").format(self.condition(operand))
            case Logic(op=op, operands=operands):
                return sql.SQL("({})").format(SQL_LOGIC[op].join(self.condition(o) for o in operands))
        return self.operation(node, "not a condition:")

    def compare(self, node: Compare) -> sql.Composable:
        left, right = node.left, node.right
        for subject, other in ((left, right), (right, left)):
            if isinstance(other, Literal) and other.value is None:
                target = self.raw(subject) if isinstance(subject, Field) else self.value(subject)
                return sql.SQL("({} IS NOT NULL)" if node.op == "!=" else "({} IS NULL)").format(target)
            if node.op in ("==", "!=") and self.is_enum_literal(subject, other):
                assert isinstance(subject, Field) and isinstance(other, Literal)
                return self.encoded(subject, [str(other.value)], negated=node.op == "!=")
        expression = sql.SQL("({} {} {})").format(self.value(left), sql.SQL(SQL_COMPARE[node.op]), self.value(right))
        return _guard(expression, self.may_be_null(left) or self.may_be_null(right))

    def is_enum_literal(self, subject: Node, other: Node) -> bool:
        return (
            isinstance(subject, Field)
            and self.column(subject).codes is not None
            and isinstance(other, Literal)
            and isinstance(other.value, str)
        )

    def encoded(self, field: Field, labels: list[str], *, negated: bool) -> sql.Composable:
        """An enumerated field against labels, compared as stored codes (an index can serve it).
        A label without a code matches nothing."""
        codes_of = self.column(field).codes or {}
        codes = list(dict.fromkeys(codes_of[label] for label in labels if label in codes_of))
        if not codes:
            return sql.SQL("({} IS NOT NULL)").format(self.raw(field)) if negated else self.param(False, Kind.BOOL)
        raw = self.raw(field)
        if len(codes) == 1:
            compared = sql.SQL("({} <> {})" if negated else "({} = {})")
            expression = compared.format(raw, self.param(codes[0]))
        else:
            within = sql.SQL("({} NOT IN ({}))" if negated else "({} IN ({}))")
            expression = within.format(raw, _list(self.param(code) for code in codes))
        return _guard(expression, type_of(field).nullable)

    def in_list(self, node: InList) -> sql.Composable:
        subject = node.operand
        if all(self.is_enum_literal(subject, item) for item in node.items):
            assert isinstance(subject, Field)
            return self.encoded(subject, [str(item.value) for item in node.items], negated=node.negated)
        target = self.value(subject)
        items = _list(self.literal(item) for item in node.items)
        expression = sql.SQL("({} NOT IN ({}))" if node.negated else "({} IN ({}))").format(target, items)
        return _guard(expression, self.may_be_null(subject))

    def call(self, node: Call) -> sql.Composable:
        expression = SQL_FUNCTIONS[node.name].format(*(self.value(arg) for arg in node.args))
        return _guard(expression, any(self.may_be_null(arg) for arg in node.args))


def compile_sql(tree: Node, columns: Columns) -> tuple[sql.Composable, list[object]]:
    """An SQL boolean expression (TRUE/FALSE, never NULL), composed, and its parameters, one for
    each of its `%s` placeholders. `tree` comes from `check`; `columns` maps field paths (and
    wildcards such as "dims.*") to Column."""
    type_of(tree)
    compiler = _Compiler(columns)
    return compiler.condition(tree), compiler.params
