"""A type-checked tree to a Python predicate made of closures; no Python source is generated.

Null: a comparison (or function) with a null operand is False; `== null` / `!= null` test for it.
Getters are resolved once, here, so a call does only attribute reads and comparisons.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from .errors import RuleError
from .nodes import Arith, Call, Compare, Field, InList, Literal, Logic, Neg, Node, Not, Operations, type_of

Getter = Callable[[Any], Any]
Predicate = Callable[[Any], bool]
Accessor = Callable[[str], Getter]

Test = Callable[[Any, Any], bool]
COMPARE: dict[str, Test] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
ARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul}
FUNCTIONS: dict[str, Test] = {"startswith": str.startswith, "contains": operator.contains}


def _nullable(node: Node) -> bool:
    return type_of(node).nullable


def _is_null(node: Node) -> bool:
    return isinstance(node, Literal) and node.value is None


class _Compiler(Operations[Predicate]):
    def __init__(self, accessor: Accessor) -> None:
        self.accessor = accessor

    def value(self, node: Node) -> Getter:
        match node:
            case Literal(value=constant):
                return lambda obj: constant
            case Field(path=path):
                try:
                    return self.accessor(path)
                except (KeyError, AttributeError) as exc:
                    raise RuleError(f"field `{path}` cannot be read here", node.pos) from exc
            case Neg(operand=operand):
                get = self.value(operand)
                return lambda obj: None if (v := get(obj)) is None else -v
            case Arith():
                return self.arith(node)
        return self.condition(node)

    def arith(self, node: Arith) -> Getter:
        getters = [self.value(o) for o in node.operands]
        steps = [(ARITH[op], get) for op, get in zip(node.ops, getters[1:], strict=True)]
        first = getters[0]
        if len(steps) == 1 and not _nullable(node):
            (fn, second), *_ = steps
            return lambda obj: fn(first(obj), second(obj))

        def evaluate(obj: Any) -> Any:
            result = first(obj)
            for fn, get in steps:
                value = get(obj)
                if result is None or value is None:
                    return None
                result = fn(result, value)
            return result

        return evaluate

    def condition(self, node: Node) -> Predicate:
        match node:
            case Literal(value=constant):
                return lambda obj: constant is True
            case Field():
                get = self.value(node)
                return lambda obj: get(obj) is True
            case Not(operand=operand):
                inner = self.condition(operand)
                return lambda obj: not inner(obj)
            case Logic():
                return self.logic(node)
        return self.operation(node, "not a condition:")

    def logic(self, node: Logic) -> Predicate:
        parts = [self.condition(o) for o in node.operands]
        if len(parts) == 2:
            a, b = parts
            return (lambda obj: a(obj) and b(obj)) if node.op == "and" else (lambda obj: a(obj) or b(obj))
        stop_at = node.op == "or"  # the answer that decides: True for `or`, False for `and`

        def evaluate(obj: Any) -> bool:
            for part in parts:
                if part(obj) is stop_at:
                    return stop_at
            return not stop_at

        return evaluate

    def compare(self, node: Compare) -> Predicate:
        left, right, fn = node.left, node.right, COMPARE[node.op]
        if _is_null(left) or _is_null(right):
            get = self.value(right if _is_null(left) else left)
            return (lambda obj: get(obj) is None) if node.op == "==" else (lambda obj: get(obj) is not None)
        if isinstance(right, Literal):
            return self.against(left, fn, right.value)
        if isinstance(left, Literal):
            return self.against(right, fn, left.value, constant_first=True)
        return self.both(node.left, node.right, fn)

    def against(self, node: Node, fn: Test, constant: Any, *, constant_first: bool = False) -> Predicate:
        """`fn(value of node, constant)`, False when the value is null; the common, fast case."""
        get = self.value(node)
        if constant_first:
            if _nullable(node):
                return lambda obj: (v := get(obj)) is not None and fn(constant, v)
            return lambda obj: fn(constant, get(obj))
        if _nullable(node):
            return lambda obj: (v := get(obj)) is not None and fn(v, constant)
        return lambda obj: fn(get(obj), constant)

    def both(self, left: Node, right: Node, fn: Test) -> Predicate:
        first, second = self.value(left), self.value(right)
        if _nullable(left) or _nullable(right):
            return lambda obj: (a := first(obj)) is not None and (b := second(obj)) is not None and fn(a, b)
        return lambda obj: fn(first(obj), second(obj))

    def in_list(self, node: InList) -> Predicate:
        values = frozenset(item.value for item in node.items)
        return self.against(node.operand, _not_in if node.negated else operator.contains, values, constant_first=True)

    def call(self, node: Call) -> Predicate:
        fn = FUNCTIONS[node.name]
        subject, argument = node.args
        if isinstance(argument, Literal):
            return self.against(subject, fn, argument.value)
        return self.both(subject, argument, fn)


def _not_in(values: frozenset[Any], value: Any) -> bool:
    return value not in values


def compile_predicate(tree: Node, accessor: Accessor) -> Predicate:
    """A function from a record to bool. `tree` comes from `check`; `accessor(path)` gives the
    getter of a field path for the caller's record representation (see accessors.py)."""
    type_of(tree)
    return _Compiler(accessor).condition(tree)
