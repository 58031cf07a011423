"""The parsed tree. The parser leaves `type` empty; `check` returns a copy with every `type` set."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from .errors import Position
from .schema import Type

Value = str | int | bool | None


@dataclass(frozen=True, slots=True)
class Literal:
    value: Value
    pos: Position
    type: Type | None = None


@dataclass(frozen=True, slots=True)
class Field:
    path: str
    pos: Position
    type: Type | None = None


@dataclass(frozen=True, slots=True)
class Call:
    name: str
    args: tuple[Node, ...]
    pos: Position
    type: Type | None = None


@dataclass(frozen=True, slots=True)
class Neg:
    operand: Node
    pos: Position
    type: Type | None = None


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node
    pos: Position
    type: Type | None = None


@dataclass(frozen=True, slots=True)
class Arith:
    """`operands[0] ops[0] operands[1] ops[1] ...`, left to right, all of one precedence level
    (flat, so a long sum does not make a deep tree)."""

    operands: tuple[Node, ...]
    ops: tuple[str, ...]
    pos: Position
    type: Type | None = None


@dataclass(frozen=True, slots=True)
class Compare:
    op: str
    left: Node
    right: Node
    pos: Position  # the operator's
    type: Type | None = None


@dataclass(frozen=True, slots=True)
class InList:
    operand: Node
    items: tuple[Literal, ...]
    negated: bool
    pos: Position  # the `in` (or the `not` of `not in`)
    type: Type | None = None


@dataclass(frozen=True, slots=True)
class Logic:
    op: str  # "and" | "or"; flat like Arith
    operands: tuple[Node, ...]
    pos: Position
    type: Type | None = None


Node = Literal | Field | Call | Neg | Not | Arith | Compare | InList | Logic


T = TypeVar("T")


class Operations(Generic[T]):
    """What every pass over the tree (the type check, the Python and the SQL compilers) does the
    same way: a comparison, a membership test and a function call each go to a method of its own."""

    def compare(self, node: Compare) -> T:
        raise NotImplementedError

    def in_list(self, node: InList) -> T:
        raise NotImplementedError

    def call(self, node: Call) -> T:
        raise NotImplementedError

    def operation(self, node: Node, refused: str) -> T:
        """The method of `node`'s kind; AssertionError(`refused`) for a kind the pass met before it
        got here (a pass handles every other kind itself)."""
        match node:
            case Compare():
                return self.compare(node)
            case InList():
                return self.in_list(node)
            case Call():
                return self.call(node)
        raise AssertionError(f"{refused} {node!r}")


def leftmost(node: Node) -> Position:
    """Where the text of an expression starts (less any opening parentheses)."""
    match node:
        case Arith(operands=operands) | Logic(operands=operands):
            return leftmost(operands[0])
        case Compare(left=left) | InList(operand=left):
            return leftmost(left)
    return node.pos


def type_of(node: Node) -> Type:
    if node.type is None:
        raise ValueError("the tree is not type-checked: pass it through check() first")
    return node.type
