"""A type-checked tree to a parameterised SQL boolean expression for PostgreSQL.

The expression is TRUE or FALSE for every row, never NULL: a comparison that may meet a null is
wrapped in `(...) IS TRUE`, which is how the Python predicate reads it too (false), and `== null`
becomes `IS NULL`. Every literal travels as a `%s` parameter. Arithmetic runs in `numeric`, so it
neither overflows nor differs from Python's ints.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .errors import RuleError
from .nodes import Arith, Call, Compare, Field, InList, Literal, Logic, Neg, Node, Not, Operations, type_of
from .schema import Kind

SQL_COMPARE = {"==": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
SQL_FUNCTIONS = {"startswith": "starts_with({}, {})", "contains": "(strpos({}, {}) > 0)"}
SQL_CAST = {Kind.STR: "text", Kind.INT: "bigint", Kind.BOOL: "boolean"}


@dataclass(frozen=True, slots=True)
class Column:
    """How a field reads in SQL: `sql`, an expression over the caller's FROM clause. Under a
    wildcard key ("dims.*") `sql` holds one `%s`, which receives the name after the prefix. `codes`
    maps each value of an enumerated field to what the column stores (`{"ok": 0, "error": 1}`).
    A column must not yield NULL for a field the schema says is never null; write a literal `%`
    as `%%` (the SQL goes through psycopg's `%s` formatting)."""

    sql: str
    codes: Mapping[str, object] | None = None


Columns = Mapping[str, Column]


def _guard(expression: str, nullable: bool) -> str:
    return f"({expression} IS TRUE)" if nullable else expression


class _Compiler(Operations[str]):
    def __init__(self, columns: Columns) -> None:
        self.columns = columns
        self.params: list[object] = []

    def param(self, value: object, cast: str | None = None) -> str:
        self.params.append(value)
        return f"CAST(%s AS {cast})" if cast else "%s"

    def literal(self, node: Literal) -> str:
        return self.param(node.value, SQL_CAST[type_of(node).kind])

    def column(self, node: Field) -> Column:
        column = self.columns.get(node.path)
        if column is None:
            prefix = node.path.partition(".")[0]
            column = self.columns.get(f"{prefix}.*")
            if column is None:
                raise RuleError(f"field `{node.path}` has no SQL column", node.pos)
            if column.sql.count("%s") != 1:
                raise ValueError(f"the column template for `{prefix}.*` needs exactly one %s")
        return column

    def raw(self, node: Field) -> str:
        """The column as stored (codes for an enumerated field); appends the wildcard's name."""
        column = self.column(node)
        if node.path not in self.columns:
            self.params.append(node.path.partition(".")[2])
        return f"({column.sql})"

    def may_be_null(self, node: Node) -> bool:
        # A decoded enum is NULL for a code it does not know, whatever the schema says.
        return type_of(node).nullable or (isinstance(node, Field) and self.column(node).codes is not None)

    def value(self, node: Node) -> str:
        match node:
            case Literal():
                return self.literal(node)
            case Field():
                codes = self.column(node).codes
                return self.decode(self.raw(node), codes) if codes is not None else self.raw(node)
            case Neg(operand=operand):
                return f"(-CAST({self.value(operand)} AS numeric))"
            case Arith(operands=operands, ops=ops):
                parts = [f"CAST({self.value(o)} AS numeric)" for o in operands]
                return "(" + "".join(f"{p} {op} " for p, op in zip(parts, ops, strict=False)) + parts[-1] + ")"
        return self.condition(node)

    def decode(self, raw: str, codes: Mapping[str, object]) -> str:
        if not codes:
            return "CAST(NULL AS text)"
        arms = " ".join(f"WHEN {self.param(code)} THEN {self.param(label, 'text')}" for label, code in codes.items())
        return f"(CASE {raw} {arms} END)"

    def condition(self, node: Node) -> str:
        match node:
            case Literal():
                return self.literal(node)
            case Field():
                return self.raw(node)
            case Not(operand=operand):
                return f"(NOT {self.condition(operand)})"
            case Logic(op=op, operands=operands):
                return "(" + f" {op.upper()} ".join(self.condition(o) for o in operands) + ")"
        return self.operation(node, "not a condition:")

    def compare(self, node: Compare) -> str:
        left, right = node.left, node.right
        for subject, other in ((left, right), (right, left)):
            if isinstance(other, Literal) and other.value is None:
                target = self.raw(subject) if isinstance(subject, Field) else self.value(subject)
                return f"({target} IS {'NOT ' if node.op == '!=' else ''}NULL)"
            if node.op in ("==", "!=") and self.is_enum_literal(subject, other):
                assert isinstance(subject, Field) and isinstance(other, Literal)
                return self.encoded(subject, [str(other.value)], negated=node.op == "!=")
        expression = f"({self.value(left)} {SQL_COMPARE[node.op]} {self.value(right)})"
        return _guard(expression, self.may_be_null(left) or self.may_be_null(right))

    def is_enum_literal(self, subject: Node, other: Node) -> bool:
        return (
            isinstance(subject, Field)
            and self.column(subject).codes is not None
            and isinstance(other, Literal)
            and isinstance(other.value, str)
        )

    def encoded(self, field: Field, labels: list[str], *, negated: bool) -> str:
        """An enumerated field against labels, compared as stored codes (an index can serve it).
        A label without a code matches nothing."""
        codes_of = self.column(field).codes or {}
        codes = list(dict.fromkeys(codes_of[label] for label in labels if label in codes_of))
        if not codes:
            return f"({self.raw(field)} IS NOT NULL)" if negated else self.param(False, "boolean")
        raw = self.raw(field)
        if len(codes) == 1:
            expression = f"({raw} {'<>' if negated else '='} {self.param(codes[0])})"
        else:
            placeholders = ", ".join(self.param(code) for code in codes)
            expression = f"({raw} {'NOT IN' if negated else 'IN'} ({placeholders}))"
        return _guard(expression, type_of(field).nullable)

    def in_list(self, node: InList) -> str:
        subject = node.operand
        if all(self.is_enum_literal(subject, item) for item in node.items):
            assert isinstance(subject, Field)
            return self.encoded(subject, [str(item.value) for item in node.items], negated=node.negated)
        target = self.value(subject)
        placeholders = ", ".join(self.literal(item) for item in node.items)
        expression = f"({target} {'NOT IN' if node.negated else 'IN'} ({placeholders}))"
        return _guard(expression, self.may_be_null(subject))

    def call(self, node: Call) -> str:
        expression = SQL_FUNCTIONS[node.name].format(*(self.value(arg) for arg in node.args))
        return _guard(expression, any(self.may_be_null(arg) for arg in node.args))


def compile_sql(tree: Node, columns: Columns) -> tuple[str, list[object]]:
    """An SQL boolean expression (TRUE/FALSE, never NULL) and its parameters, for psycopg `%s`
    placeholders. `tree` comes from `check`; `columns` maps field paths (and wildcards such as
    "dims.*") to Column."""
    type_of(tree)
    compiler = _Compiler(columns)
    return compiler.condition(tree), compiler.params
