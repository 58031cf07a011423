"""Build token records (v1) from what a server or proxy saw of a request.

Pure functions: no vLLM, no Django, no I/O. The vLLM middleware, the OpenAI-compatible
proxy and the OTLP receiver all build their records here (the middleware's and the proxy's
through wire.edge.exchange_record), so one request yields the same record whichever way it
reached the platform. The contract is wire/contract.py (docs/record-v1.schema.json): prompt
counts are inclusive of cached tokens.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from wire.contract import (
    MAX_DIM_KEY,
    MAX_DIM_VALUE,
    MAX_DIMS,
    MAX_MODEL,
    MAX_MODEL_VERSION,
    MAX_RECORD_ID,
    TIMING_FIELDS,
    TOKEN_FIELDS,
)

log = logging.getLogger("costplatform.record")

DIM_HEADER_PREFIX = "x-costplatform-"
ATTEMPT_HEADER = "x-costplatform-attempt"
RETRY_OF_HEADER = "x-costplatform-retry-of"
_NOT_DIMS = {"attempt", "retry_of"}
_DIM_KEY = re.compile(rf"^[A-Za-z0-9_.\-]{{1,{MAX_DIM_KEY}}}$")

# The metered endpoints: each one's path and the record's name of it.
ENDPOINT_PATHS = {
    "/v1/chat/completions": "chat.completions",
    "/v1/completions": "completions",
    "/v1/responses": "responses",
    "/v1/embeddings": "embeddings",
}
# The proxy's metered endpoints: those, and Anthropic's Messages API, which it forwards to an
# Anthropic-style upstream. vLLM's own /v1/messages stays refused at its edge (wire.edge.VLLM_REFUSED):
# its middleware reads OpenAI-style answers only.
PROXY_ENDPOINT_PATHS = {**ENDPOINT_PATHS, "/v1/messages": "messages"}
# An Anthropic answer's stop_reason as the record's finish reason (refusal, pause_turn: none).
ANTHROPIC_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
}
SYSTEM_ROLES = frozenset({"system", "developer"})
TOOL_ROLES = frozenset({"tool", "function", "ipython"})


def dim_key(name: str) -> str:
    """`Business-Line` -> `business_line`."""
    return name.strip().lower().replace("-", "_")


def claimed_dims(headers: Mapping[str, str], body: Mapping[str, Any] | None) -> dict[str, str]:
    """What a request claims: X-Costplatform-<Dim> headers over the body's `metadata` object.
    Claims only: wire.attribution decides which of them the caller may make."""
    dims: dict[str, str] = {}
    metadata = body.get("metadata") if isinstance(body, Mapping) else None
    if isinstance(metadata, Mapping):
        for key, value in metadata.items():
            if isinstance(value, str | int | float | bool) and isinstance(key, str):
                dims[dim_key(key)] = str(value)
    for name, value in headers.items():
        lower = name.lower()
        if lower.startswith(DIM_HEADER_PREFIX):
            key = dim_key(lower[len(DIM_HEADER_PREFIX) :])
            if key not in _NOT_DIMS:
                dims[key] = value
    return dims


def valid_dim_key(key: str) -> bool:
    """Whether the record contract takes `key` as a dim name."""
    return bool(_DIM_KEY.match(key))


def clean_dims(dims: Mapping[str, str]) -> dict[str, str]:
    """Keys the record contract refuses are dropped and values cut to its limit, so a careless
    header never costs the record its tokens."""
    clean: dict[str, str] = {}
    for key, value in dims.items():
        if _DIM_KEY.match(key) and len(clean) < MAX_DIMS:
            clean[key] = value[:MAX_DIM_VALUE]
    return clean


def retry_chain(headers: Mapping[str, str]) -> tuple[int, str | None]:
    """(attempt, retry_of) from X-Costplatform-Attempt and X-Costplatform-Retry-Of."""
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        attempt = int(lowered.get(ATTEMPT_HEADER, "1"))
    except ValueError:
        attempt = 1
    attempt = min(max(attempt, 1), 1000)
    retry_of = (lowered.get(RETRY_OF_HEADER) or "").strip()[:MAX_RECORD_ID] or None
    return attempt, retry_of


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Iterable) and not isinstance(content, bytes | Mapping):
        return "".join(_content_text(part) for part in content)
    if isinstance(content, Mapping):
        if "text" in content:
            return _content_text(content["text"])
        return json.dumps(content, sort_keys=True)
    return str(content)


def _normal(text: str) -> str:
    return " ".join(text.split())


def normalised_prompt(payload: Any) -> Any:
    """Chat messages (or a completion prompt) with whitespace folded, so two requests that
    differ only in spacing hash alike."""
    if isinstance(payload, Sequence) and not isinstance(payload, str | bytes):
        out: list[Any] = []
        for item in payload:
            if isinstance(item, Mapping):
                entry = [str(item.get("role", "")), _normal(_content_text(item.get("content")))]
                if item.get("tool_calls"):
                    entry.append(json.dumps(item["tool_calls"], sort_keys=True))
                out.append(entry)
            else:
                out.append(_normal(_content_text(item)))
        return out
    return _normal(_content_text(payload))


def prompt_hash(payload: Any, key: bytes) -> str:
    """Keyed BLAKE2b of the normalised prompt: equal prompts give equal hashes, and without
    the key nobody can test a guessed prompt against a stored hash."""
    data = json.dumps(normalised_prompt(payload), separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.blake2b(data, key=key[:64], digest_size=16).hexdigest()


def usage_tokens(usage: Mapping[str, Any] | None) -> dict[str, int]:
    """A `usage` object as record token counts, prompt including the tokens read from and written
    to a prompt cache (the record's inclusive convention). Two shapes are read:

    - OpenAI's: `prompt_tokens` (inclusive), the cache reads in `prompt_tokens_details.cached_tokens`
      and the writes in `prompt_tokens_details.cache_write_tokens`; gateways that pass Anthropic's
      counts beside `prompt_tokens` (`cache_read_input_tokens`, `cache_creation_input_tokens`)
      are read too, `prompt_tokens` still counting them;
    - Anthropic's: `input_tokens` EXCLUDES `cache_read_input_tokens` and
      `cache_creation_input_tokens`, so the prompt is their sum; `output_tokens` is the completion.
    """
    if not usage:
        return {}
    details = usage.get("prompt_tokens_details")
    details = details if isinstance(details, Mapping) else {}
    read = _count(details.get("cached_tokens")) or _count(usage.get("cache_read_input_tokens"))
    write = _count(details.get("cache_write_tokens")) or _count(usage.get("cache_creation_input_tokens"))
    if "prompt_tokens" not in usage and "input_tokens" in usage:  # Anthropic's exclusive input
        prompt, completion = _count(usage.get("input_tokens")) + read + write, _count(usage.get("output_tokens"))
    else:
        prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    tokens = {"prompt": prompt, "completion": completion}
    if read:
        tokens["prompt_cached"] = read
    if write:
        tokens["prompt_cache_write"] = write
    reasoning = usage_reasoning_tokens(usage)
    if reasoning:
        tokens["reasoning"] = reasoning
    return tokens


def _count(value: Any) -> int:
    """A usage count as an int; 0 when absent or not a whole non-negative number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return 0
    return int(value)


def usage_reasoning_tokens(usage: Mapping[str, Any] | None) -> int:
    """`completion_tokens_details.reasoning_tokens` of an OpenAI `usage` object (OpenAI's and
    other reasoning APIs' chat and completions usage), or `output_tokens_details.reasoning_tokens`
    (the Responses API's); 0 when absent or not a count."""
    if not isinstance(usage, Mapping):
        return 0
    for key in ("completion_tokens_details", "output_tokens_details"):
        details = usage.get(key)
        if isinstance(details, Mapping):
            value = details.get("reasoning_tokens")
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return 0


def chat_messages(body: Mapping[str, Any]) -> list[Any] | None:
    """A request's chat messages (None: it has no list of them), an Anthropic request's top-level
    `system` first as a system message: its system prompt is hashed and counted as a chat
    request's is."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    system = body.get("system")
    return [{"role": "system", "content": system}, *messages] if system else messages


def prompt_of(body: Mapping[str, Any]) -> Any:
    """What a request asks of the model: its messages (chat_messages), prompt or input (None:
    none of them)."""
    if (messages := chat_messages(body)) is not None:
        return messages
    for name in ("messages", "prompt", "input"):
        if body.get(name) is not None:
            return body[name]
    return None


def wants_json(body: Mapping[str, Any]) -> bool:
    """Whether a request asks for a JSON answer (response_format, or the Responses API's text.format)."""
    text = body.get("text")
    fmt = body.get("response_format") or (text.get("format") if isinstance(text, Mapping) else None)
    return isinstance(fmt, Mapping) and fmt.get("type") in ("json_object", "json_schema")


def prompt_tokens(body: Mapping[str, Any], tokenizer: Any) -> int:
    """Prompt tokens counted with the model's tokenizer, for an answer that carries no usage;
    0 when they cannot be counted."""
    messages = chat_messages(body)
    try:
        if messages and getattr(tokenizer, "chat_template", None):
            text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            return len(tokenizer(text, add_special_tokens=False)["input_ids"])
        prompt = prompt_of(body)
        if prompt is not None:
            return len(tokenizer(_content_text(prompt), add_special_tokens=True)["input_ids"])
    except Exception:  # a template that refuses the messages: the count stays unknown
        log.debug("could not count the prompt locally", exc_info=True)
    return 0


def make_record(
    *,
    record_id: str,
    ts: datetime,
    model: str,
    tokens: Mapping[str, int],
    status: str,
    finish_reason: str | None = None,
    endpoint: str | None = None,
    model_version: str | None = None,
    dims: Mapping[str, str] | None = None,
    timing: Mapping[str, float | int | None] | None = None,
    attempt: int = 1,
    retry_of: str | None = None,
    prompt_hash: str | None = None,
) -> dict[str, Any]:
    """A record v1 as a JSON-ready dict. Counts are made consistent (cached + cache write <= prompt,
    system + tool <= prompt, reasoning + structural <= completion, accepted <= draft) because
    the parts come from different counters (the engine, a tokenizer) that can disagree by a few.
    Reasoning is measured first and kept; structural (re-tokenized answer text) yields to it."""
    t = {name: max(int(tokens.get(name) or 0), 0) for name in TOKEN_FIELDS}
    t["prompt_cached"] = min(t["prompt_cached"], t["prompt"])
    t["prompt_cache_write"] = min(t["prompt_cache_write"], t["prompt"] - t["prompt_cached"])
    t["system"] = min(t["system"], t["prompt"])
    t["tool"] = min(t["tool"], t["prompt"] - t["system"])
    t["reasoning"] = min(t["reasoning"], t["completion"])
    t["structural"] = min(t["structural"], t["completion"] - t["reasoning"])
    t["draft_accepted"] = min(t["draft_accepted"], t["draft"])
    record: dict[str, Any] = {
        "record_id": record_id[:MAX_RECORD_ID],
        "ts": ts.isoformat(),
        "model": model[:MAX_MODEL],
        "tokens": {k: v for k, v in t.items() if v or k in ("prompt", "completion")},
        "outcome": {"status": status} | ({"finish_reason": finish_reason} if finish_reason else {}),
    }
    if endpoint:
        record["endpoint"] = endpoint
    if model_version:
        record["model_version"] = model_version[:MAX_MODEL_VERSION]
    if dims:
        record["dims"] = dict(dims)
    if timing:
        ms = {k: max(round(v), 0) for k, v in timing.items() if k in TIMING_FIELDS and v is not None}
        if ms:
            record["timing"] = ms
    if attempt != 1:
        record["attempt"] = attempt
    if retry_of:
        record["retry_of"] = retry_of
    if prompt_hash:
        record["prompt_hash"] = prompt_hash
    return record


# --- token counts that need the model's tokenizer -------------------------------------------


def _structural_mask(text: str) -> bytearray:
    """1 for each character of JSON scaffolding: braces, brackets, colons, commas, the
    quotes, whitespace between tokens and whole object keys; 0 for value characters. Reads
    truncated or slightly broken JSON too (an output cut by max_tokens)."""
    n = len(text)
    mask = bytearray(n)
    stack: list[str] = []
    expect_key = False
    i = 0
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            end = min(j, n - 1)
            if stack and stack[-1] == "{" and expect_key:
                mask[i : end + 1] = b"\x01" * (end + 1 - i)
            else:
                mask[i] = 1
                if j < n:
                    mask[j] = 1
            i = j + 1
            continue
        if c in "{[":
            stack.append(c)
            expect_key = c == "{"
            mask[i] = 1
        elif c in "}]":
            if stack:
                stack.pop()
            expect_key = False
            mask[i] = 1
        elif c == ":":
            expect_key = False
            mask[i] = 1
        elif c == ",":
            expect_key = bool(stack) and stack[-1] == "{"
            mask[i] = 1
        elif c.isspace():
            mask[i] = 1
        i += 1
    return mask


def structural_tokens(text: str, tokenizer: Any) -> int:
    """How many tokens of a JSON output are scaffolding (a token counts when at least half
    of its characters are), by re-tokenizing the text with the model's tokenizer."""
    if not text or tokenizer is None:
        return 0
    mask = _structural_mask(text)
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    count = 0
    for start, end in encoded["offset_mapping"]:
        if end > start and 2 * sum(mask[start:end]) >= end - start:
            count += 1
    return count


def _flat_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{**m, "content": _content_text(m.get("content"))} for m in messages]


class PromptSegments:
    """System and tool prompt tokens of a chat request, measured with the model's own
    tokenizer and chat template: each message's share is the growth of the rendered
    prompt when it is added, so template scaffolding around a message counts with it.

    It runs for every request on the serving host, so it avoids re-tokenizing: a message's
    share is remembered by a hash of the messages up to it (system prompts repeat; a
    bounded LRU), and where the template only appends and the seam is a special token
    (Llama 3, ChatML, ...: the tokenizer splits there) only the appended text is tokenized,
    which gives the same count as tokenizing both prefixes."""

    MAX_MESSAGES = 256
    CACHE_SIZE = 4096

    def __init__(self, tokenizer: Any, *, cache_size: int = CACHE_SIZE) -> None:
        self.tokenizer = tokenizer
        self.cache_size = cache_size
        self._sizes: OrderedDict[bytes, int] = OrderedDict()
        self._lock = threading.Lock()
        added = getattr(tokenizer, "added_tokens_encoder", None)
        self._seams = tuple(t for t in (added if isinstance(added, Mapping) else ()) if isinstance(t, str) and t)

    def _render(self, messages: list[dict[str, Any]]) -> str:
        if not messages:
            return ""
        return str(self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False))

    def _tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else 0

    def _content_length(self, message: Mapping[str, Any]) -> int:
        return len(self.tokenizer(_content_text(message.get("content")), add_special_tokens=False)["input_ids"])

    def _size(self, flat: list[dict[str, Any]], i: int, rendered: dict[int, str]) -> int:
        """Tokens the i-th message adds to the rendered prompt."""
        key = hashlib.blake2b(json.dumps(flat[: i + 1], sort_keys=True, default=str).encode(), digest_size=16).digest()
        with self._lock:
            if key in self._sizes:
                self._sizes.move_to_end(key)
                return self._sizes[key]
        for n in (i, i + 1):
            if n not in rendered:
                rendered[n] = self._render(flat[:n])
        before, after = rendered[i], rendered[i + 1]
        added = after[len(before) :]
        if after.startswith(before) and (not before or before.endswith(self._seams) or added.startswith(self._seams)):
            size = self._tokens(added)
        else:
            size = self._tokens(after) - self._tokens(before)
        with self._lock:
            self._sizes[key] = size
            while len(self._sizes) > self.cache_size:
                self._sizes.popitem(last=False)
        return size

    def count(self, messages: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
        if self.tokenizer is None or not messages:
            return 0, 0
        roles = [str(m.get("role", "")) for m in messages]
        wanted = [i for i, role in enumerate(roles) if role in SYSTEM_ROLES or role in TOOL_ROLES]
        if not wanted:
            return 0, 0
        system = tool = 0
        flat = _flat_messages(messages)
        use_template = len(flat) <= self.MAX_MESSAGES and getattr(self.tokenizer, "chat_template", None)
        rendered: dict[int, str] = {}
        for i in wanted:
            size = 0
            if use_template:
                try:
                    size = self._size(flat, i, rendered)
                except Exception:  # a template that refuses a prefix (e.g. "must end with user")
                    use_template = False
            if not use_template or size <= 0:
                size = self._content_length(flat[i])
            if roles[i] in SYSTEM_ROLES:
                system += size
            else:
                tool += size
        return system, tool


_SEGMENTS: dict[int, PromptSegments] = {}


def segments_for(tokenizer: Any) -> PromptSegments:
    """One PromptSegments per tokenizer, so its cache of repeated system prompts lasts."""
    segments = _SEGMENTS.get(id(tokenizer))
    if segments is None or segments.tokenizer is not tokenizer:
        segments = _SEGMENTS[id(tokenizer)] = PromptSegments(tokenizer)
    return segments
