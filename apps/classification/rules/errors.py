"""The one error a rule can raise, with where in the rule text it happened."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Position:
    """A place in the rule text: `offset` counts characters from 0; `line` and `column` from 1."""

    offset: int
    line: int
    column: int

    @classmethod
    def at(cls, source: str, offset: int) -> Position:
        line_start = source.rfind("\n", 0, offset) + 1
        return cls(offset, source.count("\n", 0, offset) + 1, offset - line_start + 1)


class RuleError(ValueError):
    """A rule that cannot be read, type-checked or compiled; `message` says why, `position` where."""

    def __init__(self, message: str, position: Position) -> None:
        super().__init__(f"{message} (line {position.line}, column {position.column})")
        self.message = message
        self.position = position

    @property
    def line(self) -> int:
        return self.position.line

    @property
    def column(self) -> int:
        return self.position.column

    @property
    def offset(self) -> int:
        return self.position.offset
