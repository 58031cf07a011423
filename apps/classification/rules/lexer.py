"""Rule text to tokens."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import Position, RuleError

MAX_LENGTH = 2000
MAX_INT = 2**63 - 1  # literals fit a PostgreSQL bigint
KEYWORDS = frozenset({"and", "or", "not", "in", "true", "false", "null"})

_TOKEN = re.compile(
    r"""(?P<space>[ \t\r\n]+)
      | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)
      | (?P<int>[0-9]+)
      | (?P<op>==|!=|<=|>=|[<>+\-*()\[\],])
      | (?P<quote>")""",
    re.VERBOSE,
)
_ESCAPES = {'"': '"', "\\": "\\"}
_HINTS = {"=": "; compare with `==`", "!": "; write `!=` or `not`", "&": "; write `and`", "|": "; write `or`"}


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # "name", "str", "int", "end", a keyword or an operator
    text: str
    value: str | int
    pos: Position


class _Lexer:
    def __init__(self, source: str) -> None:
        self.source = source
        self.line = 1
        self.line_start = 0

    def position(self, offset: int) -> Position:
        return Position(offset, self.line, offset - self.line_start + 1)

    def tokens(self) -> list[Token]:
        source, offset, found = self.source, 0, []
        while offset < len(source):
            match = _TOKEN.match(source, offset)
            if match is None:
                char = source[offset]
                raise RuleError(f"unexpected character {char!r}{_HINTS.get(char, '')}", self.position(offset))
            kind, text = match.lastgroup or "", match.group()
            if kind == "space":
                self.skip(offset, text)
                offset = match.end()
                continue
            token = self.string(offset) if kind == "quote" else self.simple(kind, text, offset)
            found.append(token)
            offset += len(token.text)
        found.append(Token("end", "", "", self.position(offset)))
        return found

    def skip(self, offset: int, text: str) -> None:
        newline = text.rfind("\n")
        if newline >= 0:
            self.line += text.count("\n")
            self.line_start = offset + newline + 1

    def simple(self, kind: str, text: str, offset: int) -> Token:
        pos = self.position(offset)
        if kind == "int":
            digits = text.lstrip("0") or "0"
            if len(digits) > 19 or int(digits) > MAX_INT:
                raise RuleError(f"integer literal is too large (at most {MAX_INT})", pos)
            return Token("int", text, int(digits), pos)
        if kind == "name" and text in KEYWORDS:
            return Token(text, text, text, pos)
        return Token(kind if kind == "name" else text, text, text, pos)

    def string(self, start: int) -> Token:
        source, chars, offset = self.source, [], start + 1
        while offset < len(source) and source[offset] not in '"\n':
            char = source[offset]
            if char == "\\":
                escaped = _ESCAPES.get(source[offset + 1 : offset + 2])
                if escaped is None:
                    message = 'unknown escape in string: only \\" and \\\\ are allowed'
                    raise RuleError(message, self.position(offset))
                chars.append(escaped)
                offset += 2
            elif char == "\x00":
                raise RuleError("a string cannot hold the NUL character", self.position(offset))
            else:
                chars.append(char)
                offset += 1
        if offset >= len(source) or source[offset] != '"':
            raise RuleError("unterminated string", self.position(start))
        return Token("str", source[start : offset + 1], "".join(chars), self.position(start))


def tokenize(source: str) -> list[Token]:
    """The tokens of `source`, ending with an "end" token. Refuses text over MAX_LENGTH characters."""
    if len(source) > MAX_LENGTH:
        raise RuleError(f"a rule is at most {MAX_LENGTH} characters long", Position.at(source, MAX_LENGTH))
    try:
        source.encode("utf-8")
    except UnicodeEncodeError as exc:  # lone surrogates: neither PostgreSQL nor a file can hold them
        raise RuleError("the rule holds a character that is not valid Unicode", Position.at(source, exc.start)) from exc
    return _Lexer(source).tokens()
