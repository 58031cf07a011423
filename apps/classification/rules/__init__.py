"""A small expression language for token-classification rules.

    tree = check(parse('outcome.status == "ok" and tokens.prompt > 1000'), RECORD_SCHEMA)
    matches = compile_predicate(tree, attribute_accessor)      # at ingest, record by record
    condition, params = compile_sql(tree, columns)             # set-based, in PostgreSQL (composed)

The grammar and the semantics are in docs/rules.md. Pure Python: no Django here.
"""

from __future__ import annotations

from .accessors import attribute_accessor, dict_accessor
from .compile_py import Accessor, Getter, Predicate, compile_predicate
from .compile_sql import Column, Columns, compile_sql
from .errors import Position, RuleError
from .lexer import MAX_LENGTH
from .nodes import Node
from .parser import MAX_DEPTH, parse
from .record import RECORD_SCHEMA
from .schema import BOOL, INT, STR, FieldSpec, Kind, Schema, Type
from .typecheck import FUNCTIONS, check


def parse_rule(source: str, schema: Schema = RECORD_SCHEMA) -> Node:
    """`parse` then `check`: the type-checked tree of a rule, or RuleError."""
    return check(parse(source), schema)


__all__ = [
    "BOOL",
    "FUNCTIONS",
    "INT",
    "MAX_DEPTH",
    "MAX_LENGTH",
    "RECORD_SCHEMA",
    "STR",
    "Accessor",
    "Column",
    "Columns",
    "FieldSpec",
    "Getter",
    "Kind",
    "Node",
    "Position",
    "Predicate",
    "RuleError",
    "Schema",
    "Type",
    "attribute_accessor",
    "check",
    "compile_predicate",
    "compile_sql",
    "dict_accessor",
    "parse",
    "parse_rule",
]
