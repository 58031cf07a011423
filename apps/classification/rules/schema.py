"""Value types and the schema that tells the type-checker which fields exist."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class Kind(StrEnum):
    STR = "str"
    INT = "int"
    BOOL = "bool"
    NULL = "null"  # only the literal `null` has this kind


@dataclass(frozen=True, slots=True)
class Type:
    kind: Kind
    nullable: bool = False

    def __str__(self) -> str:
        return f"{self.kind} or null" if self.nullable and self.kind is not Kind.NULL else str(self.kind)


STR, INT, BOOL, NULL = Type(Kind.STR), Type(Kind.INT), Type(Kind.BOOL), Type(Kind.NULL)


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """A field's type; `choices`, for an enumerated str field, are the only values a literal may name."""

    type: Type
    choices: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Schema:
    """The fields a rule may read. `fields` are exact paths ("tokens.prompt"); `prefixes` are open
    families ("dims" makes every "dims.<name>" a field of that spec)."""

    fields: Mapping[str, FieldSpec]
    prefixes: Mapping[str, FieldSpec] = field(default_factory=dict)

    def lookup(self, path: str) -> FieldSpec | None:
        spec = self.fields.get(path)
        if spec is not None:
            return spec
        prefix, dot, name = path.partition(".")
        return self.prefixes.get(prefix) if dot and name else None

    def names(self) -> list[str]:
        return [*self.fields, *(f"{prefix}.<name>" for prefix in self.prefixes)]
