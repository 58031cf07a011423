"""collectors/jsonscan.py: a few values out of a JSON answer fed in pieces, in bounded memory."""

from __future__ import annotations

import json

import pytest

from collectors.jsonscan import JsonScan

ANSWER = {
    "id": "chatcmpl-1",
    "model": 'qwen "2.5"',
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": 'a "quoted" \\ line\nnext é ☃'},
            "finish_reason": "length",
        },
        {"index": 1, "message": {"content": None}, "finish_reason": "stop"},
    ],
    "usage": {"prompt_tokens": 12, "completion_tokens": 34, "prompt_tokens_details": {"cached_tokens": 5}},
    "flags": [1, -2.5e3, True, None, {"usage": "nested, not top level"}],
}
WANTED = {
    ("usage",): 1024,
    ("model",): 64,
    ("choices", "*", "finish_reason"): 16,
    ("choices", "*", "message", "content"): 1024,
    ("flags",): 1024,
}


@pytest.mark.parametrize("piece", [1, 2, 3, 7, 64, 100_000])
def test_it_reads_the_wanted_values_whatever_the_pieces(piece: int) -> None:
    raw = json.dumps(ANSWER, ensure_ascii=False).encode()
    scan = JsonScan(WANTED)

    for start in range(0, len(raw), piece):
        scan.feed(raw[start : start + piece])

    assert scan.first("usage") == ANSWER["usage"]
    assert scan.first("model") == 'qwen "2.5"'
    assert scan.first("choices", "*", "finish_reason") == "length"  # the first only
    assert scan.first("choices", "*", "message", "content") == 'a "quoted" \\ line\nnext é ☃'
    assert scan.first("flags") == ANSWER["flags"]


def test_it_drops_a_value_over_its_limit_rather_than_keep_part_of_it() -> None:
    scan = JsonScan({("choices", "*", "message", "content"): 8, ("usage",): 1024})

    scan.feed(json.dumps(ANSWER).encode())

    assert scan.first("choices", "*", "message", "content") is None
    assert scan.first("usage") == ANSWER["usage"]


def test_it_keeps_every_value_of_a_repeated_path_when_asked() -> None:
    doc = {"output": [{"content": [{"text": "one"}, {"text": "two"}]}, {"content": [{"text": "three"}]}]}
    path = ("output", "*", "content", "*", "text")
    scan = JsonScan({path: 64}, repeat=frozenset({path}))

    scan.feed(json.dumps(doc).encode())

    assert scan.found[path] == ["one", "two", "three"]
