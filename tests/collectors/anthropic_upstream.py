"""A loopback aiohttp server that answers POST /v1/messages as Anthropic's Messages API does, for
the proxy's tests. The usage is in Anthropic's shape: `input_tokens` WITHOUT the cache reads
(CACHE_READ) and writes (the body's `cache_write_tokens`, default 0), `output_tokens`.

A streamed answer (`stream: true`) is message_start (its usage: the input and cache counts and
an output count of 1), a text block of one content_block_delta per word with a ping among them,
message_delta (the stop reason and the final output count; with `final_usage: "full"` the input
and cache counts too, FINAL_INPUT instead of INPUT, as newer versions of the API send them) and
message_stop. The model `slow` streams 40 words, one every 50 ms; `max-out` stops for
max_tokens; `fail-<status>` answers that status with an Anthropic error body.

Every request is kept in `seen` (path, headers, JSON body); `disconnects` counts streams whose
client went away before the end.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

WORDS = ["Your", " refund", " is", " on", " its", " way", "."]
INPUT = 21  # prompt tokens neither read from nor written to the cache
FINAL_INPUT = 23  # message_delta's input count where it carries one
CACHE_READ = 16


class MessagesUpstream:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.disconnects = 0
        self.counter = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/messages", self.messages)
        return app

    @staticmethod
    def usage(body: dict[str, Any], output: int, *, start: bool = False) -> dict[str, Any]:
        return {
            "input_tokens": INPUT if start or body.get("final_usage") != "full" else FINAL_INPUT,
            "cache_creation_input_tokens": int(body.get("cache_write_tokens") or 0),
            "cache_read_input_tokens": CACHE_READ,
            "output_tokens": output,
        }

    async def messages(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.seen.append({"path": request.path, "headers": dict(request.headers), "body": body})
        self.counter += 1
        model = str(body.get("model", ""))
        if model.startswith("fail-"):
            status = int(model.removeprefix("fail-"))
            error = {"type": "error", "error": {"type": "api_error", "message": f"upstream says {status}"}}
            return web.json_response(error, status=status)
        stop = "max_tokens" if model == "max-out" else "end_turn"
        message = {"id": f"msg_{self.counter}", "type": "message", "role": "assistant", "model": model}
        if not body.get("stream"):
            content = [{"type": "text", "text": "".join(WORDS)}]
            usage = self.usage(body, len(WORDS))
            return web.json_response(message | {"content": content, "stop_reason": stop, "usage": usage})
        return await self._stream(request, body, message, stop)

    async def _stream(
        self, request: web.Request, body: dict[str, Any], message: dict[str, Any], stop: str
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        words = WORDS * 6 if message["model"] == "slow" else WORDS

        async def event(doc: dict[str, Any]) -> None:
            await response.write(f"event: {doc['type']}\ndata: {json.dumps(doc)}\n\n".encode())

        try:
            start = message | {"content": [], "stop_reason": None, "usage": self.usage(body, 1, start=True)}
            await event({"type": "message_start", "message": start})
            await event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
            await event({"type": "ping"})
            for word in words:
                await event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": word}})
                if message["model"] == "slow":
                    await asyncio.sleep(0.05)
            await event({"type": "content_block_stop", "index": 0})
            delta = {"stop_reason": stop, "stop_sequence": None}
            await event({"type": "message_delta", "delta": delta, "usage": self.final_usage(body, len(words))})
            await event({"type": "message_stop"})
            await response.write_eof()
        except ConnectionResetError:
            self.disconnects += 1
        return response

    def final_usage(self, body: dict[str, Any], output: int) -> dict[str, Any]:
        """message_delta's usage: the output count, and the others where the body asks for them."""
        return self.usage(body, output) if body.get("final_usage") == "full" else {"output_tokens": output}
