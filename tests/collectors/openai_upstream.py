"""A loopback aiohttp server that answers like an OpenAI-compatible engine, for proxy tests
and bench/proxy.py. The model name chooses the behaviour:

  any name        a normal answer (stream or not) of WORDS, with usage as OpenAI reports it
  fail-400/-429/-500   that status with an OpenAI error body
  slow            a stream of 40 deltas, one every 50 ms
  stall           headers, one delta, then silence for 5 s
  cut             a stream whose connection drops after 3 deltas
  mute            no answer for 5 s

A request body may carry `reasoning_tokens` (N): the answer then thinks first, as vLLM's
OpenAI server does with a reasoning parser: N words of `reasoning_content` (message field, or N
stream deltas) before the content, counted in completion_tokens and reported as
usage.completion_tokens_details.reasoning_tokens (and output_tokens_details on /v1/responses).

A body may carry `cache_write_tokens` (W): W of the prompt were written to the prompt cache,
reported as OpenAI-style gateways do (prompt_tokens_details.cache_write_tokens, prompt_tokens
counting them); with `usage_shape: "anthropic"` the usage is in Anthropic's shape instead:
input_tokens WITHOUT the cache reads and writes, cache_read_input_tokens,
cache_creation_input_tokens, output_tokens.

Every request is kept in `seen` (path, headers, JSON body); `disconnects` counts streams
whose client went away before the end.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

WORDS = ["The", " refund", " was", " sent", " to", " your", " account", "."]
THOUGHT = " hmm"
PROMPT_TOKENS = 37
CACHED_TOKENS = 16


class Upstream:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.disconnects = 0
        self.counter = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.completions)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/embeddings", self.embeddings)
        app.router.add_post("/v1/responses", self.responses)
        app.router.add_get("/v1/models", self.models)
        return app

    def _usage(self, completion: int, reasoning: int = 0, body: dict[str, Any] | None = None) -> dict[str, Any]:
        written = int((body or {}).get("cache_write_tokens") or 0)
        if (body or {}).get("usage_shape") == "anthropic":
            return {
                "input_tokens": PROMPT_TOKENS - CACHED_TOKENS - written,
                "cache_read_input_tokens": CACHED_TOKENS,
                "cache_creation_input_tokens": written,
                "output_tokens": completion + reasoning,
            }
        usage: dict[str, Any] = {
            "prompt_tokens": PROMPT_TOKENS,
            "completion_tokens": completion + reasoning,
            "total_tokens": PROMPT_TOKENS + completion + reasoning,
            "prompt_tokens_details": {"cached_tokens": CACHED_TOKENS}
            | ({"cache_write_tokens": written} if written else {}),
        }
        if reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        return usage

    async def _take(self, request: web.Request) -> dict[str, Any]:
        body = await request.json()
        self.seen.append({"path": request.path, "headers": dict(request.headers), "body": body})
        self.counter += 1
        return body

    @staticmethod
    def _failure(model: str) -> web.Response | None:
        if model.startswith("fail-"):
            status = int(model.removeprefix("fail-"))
            error = {"error": {"message": f"upstream says {status}", "type": "invalid_request_error", "code": status}}
            return web.json_response(error, status=status)
        return None

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await self._take(request)
        model = str(body.get("model", ""))
        if (failure := self._failure(model)) is not None:
            return failure
        if model == "mute":
            await asyncio.sleep(5)
        chat = request.path.endswith("chat/completions")
        ident = f"{'chatcmpl' if chat else 'cmpl'}-{self.counter}"
        if not body.get("stream"):
            choice: dict[str, Any] = {"index": 0, "finish_reason": "stop"}
            text = "".join(WORDS)
            if body.get("reply_words"):  # a long answer: this word that many times
                text = "refund " * int(body["reply_words"])
            reasoning = int(body.get("reasoning_tokens") or 0)
            if chat:
                choice["message"] = {"role": "assistant", "content": body.get("reply", text)}
                if reasoning:
                    choice["message"]["reasoning_content"] = THOUGHT * reasoning
            else:
                choice["text"] = text
            answer = {"id": ident, "object": "chat.completion", "model": model, "choices": [choice]}
            # A test can choose the reply and its token count ("reply", "reply_tokens").
            usage = self._usage(body.get("reply_tokens", len(WORDS)), reasoning, body)
            return web.json_response(answer | {"usage": usage})
        return await self._stream(request, body, ident, chat)

    async def _stream(self, request: web.Request, body: dict[str, Any], ident: str, chat: bool) -> web.StreamResponse:
        model = str(body["model"])
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        words = WORDS * 5 if model in ("slow", "stall") else WORDS
        sent = 0
        reasoning = int(body.get("reasoning_tokens") or 0)

        async def event(doc: Any) -> None:
            await response.write(f"data: {json.dumps(doc)}\n\n".encode())

        def chunk(text: str | None, finish: str | None = None) -> dict[str, Any]:
            if chat:
                choice = {"index": 0, "delta": {"content": text} if text else {}, "finish_reason": finish}
            else:
                choice = {"index": 0, "text": text or "", "finish_reason": finish}
            return {"id": ident, "object": "chat.completion.chunk", "model": model, "choices": [choice]}

        try:
            if chat:
                await event({"id": ident, "model": model, "choices": [{"index": 0, "delta": {"role": "assistant"}}]})
                for _ in range(reasoning):
                    thought = {"index": 0, "delta": {"reasoning_content": THOUGHT}, "finish_reason": None}
                    await event({"id": ident, "object": "chat.completion.chunk", "model": model, "choices": [thought]})
            for word in words:
                await event(chunk(word))
                sent += 1
                if model == "slow":
                    await asyncio.sleep(0.05)
                if model == "stall":
                    await asyncio.sleep(5)
                if model == "cut" and sent == 3:
                    assert request.transport is not None
                    request.transport.close()
                    return response
            await event(chunk(None, "stop"))
            if (body.get("stream_options") or {}).get("include_usage"):
                await event({"id": ident, "model": model, "choices": [], "usage": self._usage(sent, reasoning, body)})
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except ConnectionResetError:
            self.disconnects += 1
        return response

    async def embeddings(self, request: web.Request) -> web.Response:
        body = await self._take(request)
        data = [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2, 0.3]}]
        usage = {"prompt_tokens": 11, "total_tokens": 11}
        return web.json_response({"object": "list", "model": body["model"], "data": data, "usage": usage})

    def _response_object(self, model: str, reasoning: int = 0) -> dict[str, Any]:
        done = {
            "id": f"resp_{self.counter}",
            "object": "response",
            "model": model,
            "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
            "output": [{"type": "message", "content": [{"type": "output_text", "text": "".join(WORDS)}]}],
            "usage": {
                "input_tokens": 50,
                "input_tokens_details": {"cached_tokens": 32},
                "output_tokens": 8 + reasoning,
                "total_tokens": 58 + reasoning,
            },
        }
        if reasoning:
            done["usage"]["output_tokens_details"] = {"reasoning_tokens": reasoning}  # type: ignore[index]
        return done

    async def responses(self, request: web.Request) -> web.StreamResponse:
        body = await self._take(request)
        done = self._response_object(str(body["model"]), int(body.get("reasoning_tokens") or 0))
        if not body.get("stream"):
            return web.json_response(done)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for word in WORDS:
            doc = {"type": "response.output_text.delta", "delta": word}
            await response.write(f"event: response.output_text.delta\ndata: {json.dumps(doc)}\n\n".encode())
        doc = {"type": "response.incomplete", "response": done}
        await response.write(f"event: response.incomplete\ndata: {json.dumps(doc)}\n\n".encode())
        await response.write_eof()
        return response

    async def models(self, request: web.Request) -> web.Response:
        self.seen.append({"path": request.path, "headers": dict(request.headers), "body": None})
        return web.json_response({"object": "list", "data": [{"id": "qwen2.5-7b-instruct", "object": "model"}]})
