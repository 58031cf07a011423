"""The record builder: pure functions, checked against the platform's own contract."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest

from apps.ingest.contract import RecordV1
from serving.config import parse_dims
from serving.middleware import cache_salt, expected_sequences, trusted_salt
from serving.runtime import EngineCounts, Seen, outcome, parse_response, reasoning_tokens
from wire import record as rec


def test_it_takes_claims_from_headers_over_metadata() -> None:
    dims = rec.claimed_dims(
        {"X-Costplatform-Business-Line": "search", "x-costplatform-feature": "ask", "X-Costplatform-Attempt": "2"},
        {"metadata": {"feature": "other", "team": "blue", "count": 3}},
    )
    assert dims == {"team": "blue", "feature": "ask", "count": "3", "business_line": "search"}


def test_it_drops_dim_keys_the_contract_refuses_and_cuts_long_values() -> None:
    claims = rec.claimed_dims({"X-Costplatform-Bad Key": "x", "X-Costplatform-Long": "v" * 300}, None)
    assert rec.clean_dims(claims) == {"long": "v" * 256}


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, (1, None)),
        ({"X-Costplatform-Attempt": "3", "X-Costplatform-Retry-Of": "req-1"}, (3, "req-1")),
        ({"X-Costplatform-Attempt": "zero"}, (1, None)),
        ({"X-Costplatform-Attempt": "99999"}, (1000, None)),
    ],
)
def test_it_reads_the_retry_chain(headers: dict[str, str], expected: tuple[int, str | None]) -> None:
    assert rec.retry_chain(headers) == expected


def test_it_hashes_prompts_that_differ_only_in_spacing_alike_and_by_key() -> None:
    a = [{"role": "user", "content": "where  is\nmy order"}]
    b = [{"role": "user", "content": [{"type": "text", "text": "where is my order "}]}]
    c = [{"role": "system", "content": "where is my order"}]
    assert rec.prompt_hash(a, b"k") == rec.prompt_hash(b, b"k")
    assert rec.prompt_hash(a, b"k") != rec.prompt_hash(c, b"k")
    assert rec.prompt_hash(a, b"k") != rec.prompt_hash(a, b"other key")


def test_it_builds_records_the_platform_accepts_with_consistent_counts() -> None:
    record = rec.make_record(
        record_id="chatcmpl-1",
        ts=datetime(2026, 11, 29, 12, tzinfo=UTC),
        model="m",
        tokens={"prompt": 10, "prompt_cached": 12, "system": 8, "tool": 8, "completion": 5, "structural": 9},
        status="ok",
        finish_reason="stop",
        endpoint="chat.completions",
        dims={"business_line": "x"},
        timing={"e2e": 12.6, "ttft": None},
        attempt=2,
        retry_of="chatcmpl-0",
        prompt_hash="ab" * 16,
    )
    decoded = msgspec.json.decode(msgspec.json.encode(record), type=RecordV1)
    assert decoded.tokens.prompt_cached == 10
    assert (decoded.tokens.system, decoded.tokens.tool) == (8, 2)
    assert decoded.tokens.structural == 5
    assert decoded.timing is not None and decoded.timing.e2e == 13 and decoded.timing.ttft is None
    assert decoded.attempt == 2 and decoded.retry_of == "chatcmpl-0"


def test_it_marks_json_scaffolding_and_keys_as_structural_but_not_values() -> None:
    text = '{"name": "Ann", "ids": [1, 22], "ok": true}'
    mask = rec._structural_mask(text)
    structural = "".join(c for c, m in zip(text, mask, strict=True) if m)
    values = "".join(c for c, m in zip(text, mask, strict=True) if not m)
    assert values == "Ann122true"
    assert structural.replace(" ", "") == '{"name":"","ids":[,],"ok":}'


def test_it_reads_a_json_output_cut_short() -> None:
    text = '{"answer": "the refund is on its w'
    mask = rec._structural_mask(text)
    assert "".join(c for c, m in zip(text, mask, strict=True) if not m) == "the refund is on its w"


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> object:
    from transformers import AutoTokenizer  # here: every worker collects this module, one runs it

    from devtools.tiny_model import build_tiny_model

    path: Path = build_tiny_model(tmp_path_factory.mktemp("tok"))
    return AutoTokenizer.from_pretrained(path)


def test_it_counts_structural_tokens_with_the_models_tokenizer(tokenizer: object) -> None:
    keys_only = rec.structural_tokens('{"order_id": 1, "status": 2}', tokenizer)
    long_values = rec.structural_tokens('{"a": "refund refund refund refund refund refund"}', tokenizer)
    assert keys_only >= 6
    assert 0 < long_values < len(tokenizer('{"a": "refund refund refund refund refund refund"}')["input_ids"])


def test_it_counts_system_and_tool_tokens_with_the_chat_template(tokenizer: object) -> None:
    messages = [
        {"role": "system", "content": "you help with orders " * 10},
        {"role": "user", "content": "where is it"},
        {"role": "tool", "content": "order 12 shipped"},
    ]
    system, tool = rec.PromptSegments(tokenizer).count(messages)
    whole = tokenizer.apply_chat_template(messages, tokenize=False)  # type: ignore[attr-defined]
    total = len(tokenizer(whole, add_special_tokens=False)["input_ids"])  # type: ignore[operator]
    content = len(tokenizer("you help with orders " * 10, add_special_tokens=False)["input_ids"])  # type: ignore[operator]
    assert content < system < total
    assert 0 < tool < total - system


def test_its_segment_counts_are_the_growth_of_the_tokenized_prompt_and_repeats_come_from_its_cache(
    tokenizer: object,
) -> None:
    def length(messages: list[dict[str, str]]) -> int:
        text = tokenizer.apply_chat_template(messages, tokenize=False) if messages else ""  # type: ignore[attr-defined]
        return len(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else 0  # type: ignore[operator]

    segments = rec.PromptSegments(tokenizer, cache_size=8)
    for n in range(12):
        messages = [
            {"role": "system", "content": "you help with orders, {json} and refunds. " * 20},
            {"role": "user", "content": f"where is order {n}?"},
            {"role": "tool", "content": f'{{"order": {n}, "status": "shipped"}}'},
        ]
        expected = (length(messages[:1]), length(messages) - length(messages[:2]))
        assert segments.count(messages) == expected
    assert len(segments._sizes) == 8  # bounded

    calls: list[str] = []
    counting = rec.PromptSegments(tokenizer)
    counting._tokens = lambda text: calls.append(text) or rec.PromptSegments._tokens(counting, text)  # type: ignore[method-assign]
    counting.count(messages)
    counting.count(messages)
    assert len(calls) == 2  # the system message and the tool message, once each


@pytest.mark.parametrize(
    ("status", "disconnected", "reasons", "aborted", "expected"),
    [
        (200, False, ["stop"], False, ("ok", "stop")),
        (200, False, ["length", "stop"], False, ("ok", "length")),
        (200, True, [], False, ("aborted", "abort")),
        (200, True, ["abort"], True, ("aborted", "abort")),
        (400, False, [], False, ("error", "error")),
        (429, False, [], False, ("rejected", None)),
        (504, False, [], False, ("timeout", None)),
        (500, False, ["error"], False, ("error", "error")),
    ],
)
def test_it_tells_the_outcome(
    status: int, disconnected: bool, reasons: list[str], aborted: bool, expected: tuple[str, str | None]
) -> None:
    seen = Seen("r", "chatcmpl-r", 0.0, "chat.completions", {}, {}, status=status, disconnected=disconnected)
    counts = [EngineCounts("chatcmpl-r", "m", 1, 0, 1, reason, aborted=aborted) for reason in reasons]
    assert outcome(seen, counts) == expected


def test_it_reads_text_finish_reason_and_usage_of_a_stream() -> None:
    body = (
        b'data: {"choices":[{"delta":{"content":"{\\"a\\""}}]}\n\n'
        b'data: {"choices":[{"delta":{"content":": 1}"},"finish_reason":"stop"}]}\n\n'
        b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\ndata: [DONE]\n\n'
    )
    seen = Seen("r", "chatcmpl-r", 0.0, "chat.completions", {}, {}, response=bytearray(body), streamed=True)
    assert parse_response(seen) == {
        "text": '{"a": 1}',
        "finish_reason": "stop",
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    }


def test_it_expects_one_sequence_per_choice_and_prompt() -> None:
    assert expected_sequences("chat.completions", {"n": 3}) == 3
    assert expected_sequences("completions", {"prompt": ["a", "b"], "n": 2}) == 4
    assert expected_sequences("completions", {"prompt": [1, 2, 3]}) == 1


def test_it_salts_the_cache_per_value_and_key() -> None:
    assert cache_salt(b"k", "search") == cache_salt(b"k", "search") != cache_salt(b"k", "ads")
    assert cache_salt(b"k", "search") != cache_salt(b"k2", "search")


def test_it_mixes_a_callers_own_salt_with_the_trusted_value_and_never_passes_it_alone() -> None:
    ads = trusted_salt(b"k", "ads", None)

    assert trusted_salt(b"k", "search", ads) not in (ads, trusted_salt(b"k", "search", None))
    assert trusted_salt(b"k", None, ads) != ads
    assert trusted_salt(b"k", "", None) is None and trusted_salt(b"k", None, 7) is None


def test_it_refuses_malformed_default_dims() -> None:
    assert parse_dims("business_line=search, env=prod") == {"business_line": "search", "env": "prod"}
    with pytest.raises(ValueError, match="key=value"):
        parse_dims("business_line")


# --- reasoning: vLLM 0.32 with a reasoning parser (its own response classes make the bodies) ------
# A real-vLLM run needs a model with think tokens and a reasoning parser that the tiny test model
# lacks, so the middleware's reading is tested at its seam: bodies serialised by vLLM's own
# protocol classes, as its OpenAI server sends them.


def _vllm_answer(*, reasoning: str, content: str, reasoning_tokens: int | None) -> bytes:
    from vllm.entrypoints.openai.chat_completion.protocol import (
        ChatCompletionResponse,
        ChatCompletionResponseChoice,
        ChatMessage,
    )
    from vllm.entrypoints.serve.engine.protocol import CompletionTokenUsageInfo, UsageInfo

    details = CompletionTokenUsageInfo(reasoning_tokens=reasoning_tokens) if reasoning_tokens is not None else None
    usage = UsageInfo(prompt_tokens=9, completion_tokens=40, total_tokens=49, completion_tokens_details=details)
    message = ChatMessage(role="assistant", content=content, reasoning=reasoning)
    choice = ChatCompletionResponseChoice(index=0, message=message, finish_reason="stop")
    return ChatCompletionResponse(model="m", choices=[choice], usage=usage).model_dump_json().encode()


def _vllm_stream(*, thoughts: list[str], words: list[str], usage: bool) -> bytes:
    from vllm.entrypoints.generate.base.protocol import DeltaMessage
    from vllm.entrypoints.openai.chat_completion.protocol import (
        ChatCompletionResponseStreamChoice,
        ChatCompletionStreamResponse,
    )
    from vllm.entrypoints.serve.engine.protocol import CompletionTokenUsageInfo, UsageInfo

    def chunk(delta: DeltaMessage, finish: str | None = None) -> bytes:
        choice = ChatCompletionResponseStreamChoice(index=0, delta=delta, finish_reason=finish)
        doc = ChatCompletionStreamResponse(id="chatcmpl-r", model="m", choices=[choice])
        return b"data: " + doc.model_dump_json(exclude_unset=True).encode() + b"\n\n"

    body = b"".join(chunk(DeltaMessage(reasoning=t)) for t in thoughts)
    body += b"".join(chunk(DeltaMessage(content=w)) for w in words) + chunk(DeltaMessage(), "stop")
    if usage:
        details = CompletionTokenUsageInfo(reasoning_tokens=len(thoughts))
        total = UsageInfo(
            prompt_tokens=9, completion_tokens=len(thoughts) + len(words), completion_tokens_details=details
        )
        doc = ChatCompletionStreamResponse(id="chatcmpl-r", model="m", choices=[], usage=total)
        body += b"data: " + doc.model_dump_json(exclude_unset=True).encode() + b"\n\n"
    return body + b"data: [DONE]\n\n"


def _seen(body: bytes, *, streamed: bool) -> Seen:
    return Seen("r", "chatcmpl-r", 0.0, "chat.completions", {}, {}, response=bytearray(body), streamed=streamed)


def test_it_takes_vllms_reasoning_count_from_the_usage_of_an_answer(tokenizer: object) -> None:
    body = _vllm_answer(reasoning="let me think " * 5, content="It left.", reasoning_tokens=31)

    response = parse_response(_seen(body, streamed=False))

    assert response["text"] == "It left."
    assert response["reasoning"] == "let me think " * 5
    assert reasoning_tokens(response, tokenizer) == 31  # vLLM's count wins over re-tokenizing


def test_it_takes_vllms_reasoning_count_from_a_streams_usage_chunk() -> None:
    body = _vllm_stream(thoughts=["Hmm", ",", " refunds", " take", " days"], words=["It", " left"], usage=True)

    response = parse_response(_seen(body, streamed=True))

    assert (response["text"], response["reasoning"]) == ("It left", "Hmm, refunds take days")
    assert reasoning_tokens(response, None) == 5


def test_it_counts_the_reasoning_text_of_a_stream_without_usage_with_the_tokenizer(tokenizer: object) -> None:
    thoughts = ["Hmm", ",", " refunds", " take", " days"]
    response = parse_response(_seen(_vllm_stream(thoughts=thoughts, words=["It"], usage=False), streamed=True))

    expected = len(tokenizer("Hmm, refunds take days", add_special_tokens=False)["input_ids"])  # type: ignore[operator]
    assert expected > 0
    assert reasoning_tokens(response, tokenizer) == expected
    assert reasoning_tokens(response, None) == 0  # no tokenizer: nothing to count with


def test_an_answer_without_a_reasoning_parser_has_no_reasoning(tokenizer: object) -> None:
    response = parse_response(
        _seen(_vllm_answer(reasoning="", content="It left.", reasoning_tokens=None), streamed=False)
    )

    assert "reasoning" not in response
    assert reasoning_tokens(response, tokenizer) == 0


def test_it_keeps_reasoning_within_completion_and_structural_within_the_rest() -> None:
    record = rec.make_record(
        record_id="r",
        ts=datetime(2026, 1, 1, tzinfo=UTC),
        model="m",
        tokens={"prompt": 5, "completion": 10, "reasoning": 12, "structural": 4},
        status="ok",
    )

    assert record["tokens"] == {"prompt": 5, "completion": 10, "reasoning": 10}
    msgspec.convert(record, RecordV1)  # the platform accepts it


def test_it_keeps_cache_writes_within_what_the_cache_reads_leave_of_the_prompt() -> None:
    record = rec.make_record(
        record_id="r",
        ts=datetime(2026, 1, 1, tzinfo=UTC),
        model="m",
        tokens={"prompt": 100, "completion": 1, "prompt_cached": 70, "prompt_cache_write": 50},
        status="ok",
    )

    assert record["tokens"] == {"prompt": 100, "completion": 1, "prompt_cached": 70, "prompt_cache_write": 30}
    msgspec.convert(record, RecordV1)  # the platform accepts it


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        # OpenAI's prompt_tokens counts the cache reads and writes it details
        (
            {
                "prompt_tokens": 100,
                "completion_tokens": 5,
                "prompt_tokens_details": {"cached_tokens": 60, "cache_write_tokens": 30},
            },
            {"prompt": 100, "completion": 5, "prompt_cached": 60, "prompt_cache_write": 30},
        ),
        # a gateway passing Anthropic's counts beside an inclusive prompt_tokens
        (
            {
                "prompt_tokens": 100,
                "completion_tokens": 5,
                "cache_read_input_tokens": 60,
                "cache_creation_input_tokens": 30,
            },
            {"prompt": 100, "completion": 5, "prompt_cached": 60, "prompt_cache_write": 30},
        ),
        # Anthropic's input_tokens counts neither: the prompt is the sum
        (
            {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 60, "cache_creation_input_tokens": 30},
            {"prompt": 100, "completion": 5, "prompt_cached": 60, "prompt_cache_write": 30},
        ),
        ({"input_tokens": 10, "output_tokens": 5}, {"prompt": 10, "completion": 5}),
    ],
    ids=["openai", "openai-with-anthropic-keys", "anthropic", "anthropic-without-cache"],
)
def test_it_reads_prompt_cache_reads_and_writes_of_either_usage_shape(usage: dict, expected: dict) -> None:
    assert rec.usage_tokens(usage) == expected
