"""One record contract: the record's token kinds are listed once, in wire/contract.py (the fields
of `Tokens`, as TOKEN_FIELDS), and everything else reads them from there: the edge's record
builder, the platform's decoder and its columns, the tests.

The scan fails on a second list: any tuple, list or set literal in the product, its tests, its
benchmarks or its tooling that spells out three or more token kinds, mostly nothing else (it
names the file and line; classification's components, which share a few names, are another
list). What has columns of those names is held to the one list instead."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from wire.contract import (
    ENDPOINTS,
    FINISH_REASONS,
    QUALITY_TIERS,
    STATUSES,
    TIMING_FIELDS,
    TOKEN_FIELDS,
    Outcome,
    RecordV1,
    Tokens,
    json_schema,
)

REPO = Path(__file__).resolve().parent.parent
SCANNED = ("apps", "wire", "collectors", "serving", "tests", "bench", "devtools", "costplatform")
# A literal naming more token kinds than this, and mostly them, is a list of them: pairs such as
# ("prompt", "completion") say which kinds a rule is about, not what the kinds are.
MOST_NAMED = 2


def second_lists(root: Path = REPO) -> Iterator[str]:
    """`path:line` of each literal that lists token kinds, outside wire/contract.py."""
    kinds = set(TOKEN_FIELDS)
    for package in SCANNED:
        for path in sorted((root / package).rglob("*.py")):
            if path == root / "wire" / "contract.py":
                continue
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Tuple | ast.List | ast.Set):
                    words = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                    named = kinds.intersection(words)
                    if len(named) > MOST_NAMED and 2 * len(named) > len(words):
                        yield f"{path.relative_to(root)}:{node.lineno} names {', '.join(sorted(named))}"


def test_the_token_kinds_are_listed_once() -> None:
    found = list(second_lists())
    assert not found, "token kinds listed outside wire/contract.py (import TOKEN_FIELDS):\n" + "\n".join(found)


def test_the_scan_finds_a_second_list(tmp_path: Path) -> None:
    (tmp_path / "apps").mkdir()
    (tmp_path / "apps" / "sums.py").write_text(
        'FIELDS = ("prompt", "completion", "prompt_cached")\n'
        'PARTS = ["cached_prompt", "output", "padding", "reasoning"]\n'
        'SUMS = {"prompt", "completion", "tool", "reasoning", "e2e"}\n'
    )

    assert list(second_lists(tmp_path)) == [
        "apps/sums.py:1 names completion, prompt, prompt_cached",
        "apps/sums.py:3 names completion, prompt, reasoning, tool",
    ]


def test_the_published_schema_has_the_token_kinds_and_timings_in_their_order() -> None:
    schema = json.loads((REPO / "docs" / "record-v1.schema.json").read_text())

    assert tuple(schema["$defs"]["Tokens"]["properties"]) == TOKEN_FIELDS
    assert tuple(schema["$defs"]["Timing"]["properties"]) == TIMING_FIELDS
    assert schema == json_schema()


def test_the_platform_keeps_a_column_of_each_token_kind_and_timing() -> None:
    from apps.ingest.models import HourlyUsage, Record

    def columns(model: type) -> set[str]:
        return {field.name for field in model._meta.get_fields()}  # type: ignore[attr-defined]

    assert set(TOKEN_FIELDS) | set(TIMING_FIELDS) <= columns(Record)
    assert set(TOKEN_FIELDS) <= columns(HourlyUsage)


def test_the_platform_codes_the_contracts_words_in_their_order() -> None:
    from apps.ingest.models import Endpoint, FinishReason, QualityTier, Status
    from apps.ingest.services import ENDPOINT_CODES, FINISH_CODES, STATUS_CODES, TIER_CODES

    for choices, words, codes in (
        (Endpoint, ENDPOINTS, ENDPOINT_CODES),
        (Status, STATUSES, STATUS_CODES),
        (FinishReason, FINISH_REASONS, FINISH_CODES),
        (QualityTier, QUALITY_TIERS, TIER_CODES),
    ):
        assert [label for _, label in choices.choices] == list(words)
        assert {label: value for value, label in choices.choices} == codes


def test_a_stored_row_holds_each_token_count_in_its_column() -> None:
    from apps.ingest.services import RECORD_COLUMNS, _rows

    counts = {name: 100 + i for i, name in enumerate(TOKEN_FIELDS)}
    record = RecordV1(
        record_id="r-1",
        ts=datetime(2026, 1, 1, tzinfo=UTC),
        model="m",
        tokens=Tokens(**counts),
        outcome=Outcome(status="ok"),
    )

    (row,) = _rows(7, [record], [(1, 1)], {("m", ""): 3})

    names = [name for name, _ in RECORD_COLUMNS]
    assert {name: row[names.index(name)] for name in TOKEN_FIELDS} == counts


if __name__ == "__main__":  # make lint: the scan alone, without Django
    found = list(second_lists())
    for where in found:
        print(f"a second list of the token kinds (import wire.contract.TOKEN_FIELDS): {where}")
    raise SystemExit(1 if found else 0)
