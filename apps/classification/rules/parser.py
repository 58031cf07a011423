"""Tokens to tree, by recursive descent. Binding, loosest first: `or`, `and`, comparisons
(`== != < <= > >= in`, `not in`), `+ -`, `*`, then the prefixes `not` and `-`."""

from __future__ import annotations

from collections.abc import Callable

from .errors import RuleError
from .lexer import Token, tokenize
from .nodes import Arith, Call, Compare, Field, InList, Literal, Logic, Neg, Node, Not

MAX_DEPTH = 32
COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">="})
_LITERALS = {"true": True, "false": False, "null": None}


def _describe(token: Token) -> str:
    if token.kind == "end":
        return "the end of the rule"
    text = token.text if len(token.text) <= 40 else token.text[:37] + "..."
    return f"`{text}`"


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.index = 0
        self.depth = 0

    @property
    def peek(self) -> Token:
        return self.tokens[self.index]

    def advance(self) -> Token:
        token = self.tokens[self.index]
        self.index += min(1, len(self.tokens) - 1 - self.index)  # stay on "end"
        return token

    def expect(self, kind: str, context: str) -> Token:
        if self.peek.kind != kind:
            raise RuleError(f"expected `{kind}` {context}, found {_describe(self.peek)}", self.peek.pos)
        return self.advance()

    def enter(self, token: Token) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise RuleError(f"the rule nests deeper than {MAX_DEPTH} levels", token.pos)

    def rule(self) -> Node:
        node = self.or_()
        if self.peek.kind != "end":
            raise RuleError(f"unexpected {_describe(self.peek)} after a complete rule", self.peek.pos)
        return node

    def or_(self) -> Node:
        return self.logic("or", self.and_)

    def and_(self) -> Node:
        return self.logic("and", self.comparison)

    def logic(self, op: str, operand: Callable[[], Node]) -> Node:
        operands, found = [operand()], []
        while self.peek.kind == op:
            found.append(self.advance())
            operands.append(operand())
        return Logic(op, tuple(operands), found[0].pos) if found else operands[0]

    def comparison(self) -> Node:
        left = self.sum()
        token = self.peek
        if token.kind in COMPARISONS:
            self.advance()
            node: Node = Compare(token.kind, left, self.sum(), token.pos)
        elif self.at_membership():
            self.index += 2 if token.kind == "not" else 1
            node = InList(left, self.items(), token.kind == "not", token.pos)
        elif token.kind == "not":
            after = self.tokens[self.index + 1]
            raise RuleError(f"expected `in` after `not`, found {_describe(after)}", after.pos)
        else:
            return left
        if self.peek.kind in COMPARISONS or self.at_membership():
            raise RuleError("comparisons cannot be chained; join them with `and`", self.peek.pos)
        return node

    def at_membership(self) -> bool:
        """At `in` or `not in`."""
        kind = self.peek.kind
        return kind == "in" or (kind == "not" and self.tokens[self.index + 1].kind == "in")

    def items(self) -> tuple[Literal, ...]:
        self.expect("[", "to open the list after `in`")
        items = [self.item()]
        while self.peek.kind == ",":
            self.advance()
            items.append(self.item())
        self.expect("]", "to close the list")
        return tuple(items)

    def item(self) -> Literal:
        token = self.advance()
        if token.kind == "-" and self.peek.kind == "int":
            return Literal(-int(self.advance().value), token.pos)
        if token.kind in ("str", "int"):
            return Literal(token.value, token.pos)
        if token.kind in _LITERALS:
            return Literal(_LITERALS[token.kind], token.pos)
        message = "a list needs at least one value" if token.kind == "]" else "a list holds only literal values"
        raise RuleError(f"{message}, found {_describe(token)}", token.pos)

    def sum(self) -> Node:
        return self.arith(("+", "-"), self.product)

    def product(self) -> Node:
        return self.arith(("*",), self.unary)

    def arith(self, ops: tuple[str, ...], operand: Callable[[], Node]) -> Node:
        operands, found = [operand()], []
        while self.peek.kind in ops:
            found.append(self.advance())
            operands.append(operand())
        if not found:
            return operands[0]
        return Arith(tuple(operands), tuple(t.kind for t in found), found[0].pos)

    def unary(self) -> Node:
        token = self.peek
        if token.kind not in ("not", "-"):
            return self.primary()
        self.advance()
        self.enter(token)
        operand = self.unary()
        self.depth -= 1
        if token.kind == "not":
            return Not(operand, token.pos)
        if isinstance(operand, Literal) and type(operand.value) is int:
            return Literal(-operand.value, token.pos)  # a negative literal, usable in lists
        return Neg(operand, token.pos)

    def primary(self) -> Node:
        token = self.advance()
        if token.kind in ("str", "int"):
            return Literal(token.value, token.pos)
        if token.kind in _LITERALS:
            return Literal(_LITERALS[token.kind], token.pos)
        if token.kind == "name":
            return self.call(token) if self.peek.kind == "(" else self.field(token)
        if token.kind == "(":
            self.enter(token)
            node = self.or_()
            self.expect(")", f"to close the `(` at line {token.pos.line}, column {token.pos.column}")
            self.depth -= 1
            return node
        raise RuleError(f"expected a value, found {_describe(token)}", token.pos)

    def field(self, token: Token) -> Field:
        path = str(token.value)
        while self.peek.kind == "[":  # dims["cost-center"]: names that are not identifiers
            self.advance()
            name = self.expect("str", "(a quoted name) inside `[...]`")
            if not name.value:
                raise RuleError("a field name cannot be empty", name.pos)
            self.expect("]", "after the quoted name")
            path = f"{path}.{name.value}"
        return Field(path, token.pos)

    def call(self, name: Token) -> Call:
        opening = self.advance()
        self.enter(opening)
        args = [] if self.peek.kind == ")" else [self.or_()]
        while self.peek.kind == ",":
            self.advance()
            args.append(self.or_())
        self.expect(")", f"to close the call to `{name.value}`")
        self.depth -= 1
        return Call(str(name.value), tuple(args), name.pos)


def parse(source: str) -> Node:
    """The tree of a rule (untyped: pass it to `check`). Raises RuleError."""
    return _Parser(tokenize(source)).rule()
