"""Ready-made accessors for compile_predicate: a field path to a getter, resolved once.

`attribute_accessor` reads objects (a RecordV1: `record.tokens.prompt`), `dict_accessor` reads
nested dicts as they are (no contract defaults: a key left out reads as null). Both read null
through a null parent (`timing.ttft` when there is no `timing`) and "" for a missing dim.
A record has no `source`: wrap the accessor to supply it, e.g. for a batch from one source
`lambda path: (lambda r: name) if path == "source" else attribute_accessor(path)`.

`attribute_accessor` reads a record as it will be stored, so a rule decides at ingest what it
decides over the stored records in SQL (storage.record_columns): a model version sent as ""
is stored as none sent and reads as null.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

Getter = Callable[[Any], Any]
MAP_PREFIXES = ("dims",)  # paths whose parent is a dict of names: "dims.team" -> record.dims["team"]
EMPTY_IS_NULL = ("model_version",)  # stored as "" when none was sent: "" reads as null


def _chain(steps: list[Getter]) -> Getter:
    if len(steps) == 1:
        return steps[0]
    if len(steps) == 2:
        first, second = steps

        def two(obj: Any) -> Any:
            parent = first(obj)
            return None if parent is None else second(parent)

        return two

    def many(obj: Any) -> Any:
        for step in steps:
            if obj is None:
                return None
            obj = step(obj)
        return obj

    return many


def _in_map(parent: Getter, name: str) -> Getter:
    def read(obj: Any) -> Any:
        names = parent(obj)
        return names.get(name, "") if names else ""

    return read


def attribute_accessor(path: str) -> Getter:
    prefix, dot, name = path.partition(".")
    if dot and prefix in MAP_PREFIXES:
        return _in_map(attrgetter(prefix), name)
    if path in EMPTY_IS_NULL:
        read = attrgetter(path)
        return lambda obj: read(obj) or None
    return _chain([attrgetter(part) for part in path.split(".")])


def dict_accessor(path: str) -> Getter:
    prefix, dot, name = path.partition(".")
    if dot and prefix in MAP_PREFIXES:
        return _in_map(_key(prefix), name)
    return _chain([_key(part) for part in path.split(".")])


def _key(name: str) -> Getter:
    return lambda obj: obj.get(name)
