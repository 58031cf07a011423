"""Types for every node of a parsed rule, against a Schema; refusals as RuleError."""

from __future__ import annotations

import difflib
from dataclasses import replace

from .errors import RuleError
from .nodes import Arith, Call, Compare, Field, InList, Literal, Logic, Neg, Node, Not, Operations, leftmost
from .schema import BOOL, INT, NULL, STR, Kind, Schema, Type

# name -> argument types; every function answers a bool, false when an argument is null
FUNCTIONS: dict[str, tuple[Kind, ...]] = {"startswith": (Kind.STR, Kind.STR), "contains": (Kind.STR, Kind.STR)}
ORDERING = frozenset({"<", "<=", ">", ">="})
_LITERAL_TYPES = {str: STR, int: INT, bool: BOOL, type(None): NULL}


_A_KIND = {Kind.STR: "a str", Kind.INT: "an int", Kind.BOOL: "a bool", Kind.NULL: "null"}
_PLURAL = {Kind.STR: "strings", Kind.INT: "ints", Kind.BOOL: "bools", Kind.NULL: "nulls"}


def _kind_name(node: Node) -> str:
    return _A_KIND[(node.type or NULL).kind]


class _Checker(Operations[Node]):
    def __init__(self, schema: Schema) -> None:
        self.schema = schema

    def node(self, node: Node) -> Node:
        match node:
            case Literal():
                return replace(node, type=_LITERAL_TYPES[type(node.value)])
            case Field():
                return self.field(node)
            case Neg():
                operand = self.int_operand(node.operand, "`-`")
                return replace(node, operand=operand, type=operand.type)
            case Arith():
                operands = tuple(self.int_operand(o, "arithmetic") for o in node.operands)
                nullable = any(o.type and o.type.nullable for o in operands)
                return replace(node, operands=operands, type=Type(Kind.INT, nullable))
            case Not():
                hint = " (`not` binds tighter than comparisons: write `not (a == b)`)"
                return replace(node, operand=self.condition(node.operand, "`not` needs a condition", hint), type=BOOL)
            case Logic():
                what = f"`{node.op}` needs a condition on each side"
                operands = tuple(self.condition(o, what) for o in node.operands)
                return replace(node, operands=operands, type=BOOL)
        return self.operation(node, "unknown node")

    def field(self, node: Field) -> Field:
        spec = self.schema.lookup(node.path)
        if spec is None:
            close = difflib.get_close_matches(node.path, self.schema.fields, n=1)
            hint = f"; did you mean `{close[0]}`?" if close else ""
            raise RuleError(f"unknown field `{node.path}`{hint}", node.pos)
        return replace(node, type=spec.type)

    def int_operand(self, node: Node, what: str) -> Node:
        typed = self.node(node)
        if typed.type != INT and typed.type != Type(Kind.INT, True):
            raise RuleError(f"{what} needs ints, but this is {_kind_name(typed)}", leftmost(node))
        return typed

    def condition(self, node: Node, what: str, hint: str = "") -> Node:
        typed = self.node(node)
        if typed.type == Type(Kind.BOOL, True):
            raise RuleError(f"a nullable bool must be compared: write `{_text(node)} == true`", leftmost(node))
        if typed.type != BOOL:
            raise RuleError(f"{what}, but this is {_kind_name(typed)}{hint}", leftmost(node))
        return typed

    def compare(self, node: Compare) -> Compare:
        left, right = self.node(node.left), self.node(node.right)
        lkind, rkind = (left.type or NULL).kind, (right.type or NULL).kind
        if Kind.NULL in (lkind, rkind):
            if node.op not in ("==", "!="):
                raise RuleError("null can only be compared with `==` or `!=`", node.pos)
            if lkind == rkind:
                raise RuleError("comparing null with null tests nothing", node.pos)
        elif lkind != rkind:
            raise RuleError(f"cannot compare {_kind_name(left)} with {_kind_name(right)}", node.pos)
        elif node.op in ORDERING and lkind is not Kind.INT:
            raise RuleError(f"{_PLURAL[lkind]} cannot be ordered with `{node.op}`; only ints can", node.pos)
        self.known_values(left, (right,))
        self.known_values(right, (left,))
        return replace(node, left=left, right=right, type=BOOL)

    def in_list(self, node: InList) -> InList:
        operand = self.node(node.operand)
        items = tuple(replace(item, type=_LITERAL_TYPES[type(item.value)]) for item in node.items)
        first = items[0]
        for item in items:
            if item.value is None:
                raise RuleError("a list cannot hold null; test with `== null`", item.pos)
            if item.type != first.type:
                raise RuleError(f"the list mixes {_kind_name(first)} and {_kind_name(item)}", item.pos)
        if operand.type is None or operand.type.kind != (first.type or NULL).kind:
            kind = (first.type or NULL).kind
            raise RuleError(f"cannot look for {_kind_name(operand)} in a list of {_PLURAL[kind]}", node.pos)
        self.known_values(operand, items)
        return replace(node, operand=operand, items=items, type=BOOL)

    def known_values(self, node: Node, others: tuple[Node, ...]) -> None:
        """An enumerated field compared with a literal it can never hold is a typo: refuse it."""
        if not isinstance(node, Field):
            return
        spec = self.schema.lookup(node.path)
        if spec is None or spec.choices is None:
            return
        for other in others:
            if isinstance(other, Literal) and isinstance(other.value, str) and other.value not in spec.choices:
                choices = ", ".join(spec.choices)
                message = f'"{other.value}" is never a value of `{node.path}` (one of: {choices})'
                raise RuleError(message, other.pos)

    def call(self, node: Call) -> Call:
        kinds = FUNCTIONS.get(node.name)
        if kinds is None:
            raise RuleError(f"unknown function `{node.name}`; known: {', '.join(sorted(FUNCTIONS))}", node.pos)
        if len(node.args) != len(kinds):
            raise RuleError(f"`{node.name}` takes {len(kinds)} arguments, not {len(node.args)}", node.pos)
        args = tuple(self.node(arg) for arg in node.args)
        for number, (arg, kind) in enumerate(zip(args, kinds, strict=True), start=1):
            if arg.type is None or arg.type.kind is not kind:
                message = f"argument {number} of `{node.name}` must be {_A_KIND[kind]}, not {_kind_name(arg)}"
                raise RuleError(message, leftmost(arg))
        return replace(node, args=args, type=BOOL)


def _text(node: Node) -> str:
    return node.path if isinstance(node, Field) else "..."


def check(tree: Node, schema: Schema) -> Node:
    """The tree with types; refuses unknown fields, ill-typed operations and a non-condition rule."""
    return _Checker(schema).condition(tree, "a rule must be a condition (true or false)")
