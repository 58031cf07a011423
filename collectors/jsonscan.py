"""Read a few values out of a JSON document that arrives in pieces, in bounded memory.

The proxy meters non-streamed answers that can be many megabytes (a long completion, n > 1,
embeddings): it needs only `usage`, `model`, the finish reason and perhaps the text. `JsonScan`
is fed the answer chunk by chunk as it is relayed and keeps the values at the paths it was
asked for (each up to its own byte limit); everything else is skipped as it passes. Strings
are crossed with a regular-expression search, not byte by byte, so a 16 MB answer costs
milliseconds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

Path = tuple[str, ...]  # object keys, "*" for any array element
_STRUCTURE = re.compile(rb'["{}\[\],:]')
# The rest of a string's body: runs of plain bytes and escape pairs (stops at its closing quote,
# or at a backslash whose escaped byte is in the next chunk).
_STRING_BODY = re.compile(rb'(?:[^"\\]+|\\.)*', re.DOTALL)
MAX_KEY = 256
PIECE = 64 * 1024


class JsonScan:
    def __init__(self, wanted: Mapping[Path, int], *, repeat: frozenset[Path] = frozenset()) -> None:
        self.wanted = dict(wanted)  # path -> largest value kept, in bytes
        self.repeat = repeat  # paths whose every value is kept (the others: the first only)
        self.found: dict[Path, list[Any]] = {}
        self._stack: list[list[Any]] = []  # [kind, key]: kind "{" or "["
        self._expect_key = False
        self._value_pending = True  # the document itself is a value
        self._in_string = False
        self._escape = False
        self._key: bytearray | None = None
        self._cap: bytearray | None = None
        self._cap_path: Path = ()
        self._cap_kind = ""  # s(tring), c(ontainer), v (number, true, false, null)
        self._cap_depth = 0
        self._cap_over = False

    def first(self, *path: str) -> Any:
        values = self.found.get(path)
        return values[0] if values else None

    def feed(self, chunk: bytes) -> None:
        for start in range(0, len(chunk), PIECE):  # the string regex is fastest on modest pieces
            piece = chunk[start : start + PIECE]
            i, n = 0, len(piece)
            while i < n:
                i = self._string(piece, i) if self._in_string else self._structure(piece, i)

    # --- inside a string ------------------------------------------------------------------

    def _string(self, chunk: bytes, i: int) -> int:
        if self._escape:
            self._escape = False
            self._take(chunk[i : i + 1])
            return i + 1
        m = _STRING_BODY.match(chunk, i)
        j = m.end() if m else i
        if j >= len(chunk):
            self._take(chunk[i:])
            return j
        self._take(chunk[i : j + 1])
        if chunk[j] == 0x5C:  # a backslash at the chunk's end: its escaped byte comes next
            self._escape = True
            return j + 1
        self._in_string = False
        if self._key is not None:
            self._end_key()
        elif self._cap_kind == "s" and self._cap_depth == len(self._stack):
            self._end_capture()
        return j + 1

    def _end_key(self) -> None:
        assert self._key is not None
        raw, self._key = bytes(self._key[:-1]), None  # without the closing quote
        try:
            key = json.loads(b'"' + raw + b'"')
        except ValueError:
            key = ""
        if self._stack:
            self._stack[-1][1] = key
        self._expect_key = False

    # --- between strings --------------------------------------------------------------------

    def _structure(self, chunk: bytes, i: int) -> int:
        m = _STRUCTURE.search(chunk, i)
        j = m.start() if m else len(chunk)
        text = chunk[i:j]
        if self._value_pending and text.strip():  # a number, true, false or null begins
            self._value_pending = False
            self._begin("v")
        self._take(text)
        if m is None:
            return j
        self._symbol(chunk[j : j + 1])
        return j + 1

    def _symbol(self, c: bytes) -> None:
        if c == b'"':
            is_key = self._expect_key and bool(self._stack) and self._stack[-1][0] == "{"
            if not is_key and self._value_pending:
                self._value_pending = False
                self._begin("s")
            self._take(c)
            self._key = bytearray() if is_key else None
            self._in_string = True
        elif c in (b"{", b"["):
            if self._value_pending:
                self._begin("c")
            self._take(c)
            self._stack.append([c.decode(), None])
            self._expect_key = c == b"{"
            self._value_pending = c == b"["
        elif c in (b"}", b"]"):
            self._end_scalar()
            self._take(c)
            if self._stack:
                self._stack.pop()
            if self._cap_kind == "c" and self._cap_depth == len(self._stack):
                self._end_capture()
            self._expect_key = self._value_pending = False
        elif c == b",":
            self._end_scalar()
            self._take(c)
            top = self._stack[-1][0] if self._stack else ""
            self._expect_key, self._value_pending = top == "{", top == "["
        elif c == b":":
            self._take(c)
            self._value_pending = True

    # --- keeping values ---------------------------------------------------------------------

    def _path(self) -> Path:
        return tuple("*" if kind == "[" else str(key) for kind, key in self._stack)

    def _begin(self, kind: str) -> None:
        if self._cap is not None:
            return
        path = self._path()
        if self.wanted.get(path, 0) > 0 and (path in self.repeat or path not in self.found):
            self._cap, self._cap_path, self._cap_kind = bytearray(), path, kind
            self._cap_depth, self._cap_over = len(self._stack), False

    def _take(self, data: bytes) -> None:
        if self._key is not None:
            if len(self._key) < MAX_KEY:
                self._key += data[: MAX_KEY - len(self._key)]
            elif data.endswith(b'"'):
                self._key += b'"'
        if self._cap is None or self._cap_over or not data:
            return
        if len(self._cap) + len(data) > self.wanted[self._cap_path]:
            self._cap_over = True  # too large to keep: dropped, never half kept
            self._cap = bytearray()
        else:
            self._cap += data

    def _end_scalar(self) -> None:
        if self._cap_kind == "v" and self._cap_depth == len(self._stack):
            self._end_capture()

    def _end_capture(self) -> None:
        raw, over = bytes(self._cap or b""), self._cap_over
        self._cap, self._cap_kind = None, ""
        if over:
            return
        try:
            value = json.loads(raw)
        except ValueError:
            return
        self.found.setdefault(self._cap_path, []).append(value)
