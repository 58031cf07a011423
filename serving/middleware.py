"""ASGI middleware for vLLM's OpenAI server: `--middleware serving.middleware.CostplatformMiddleware`.

Every route of vLLM's server is metered, passed (it computes no tokens) or refused with a 404
before vLLM sees it (wire/edge.py: an allow-list, checked against vLLM's route table); a
request with two Authorization headers is refused with a 400, a body over 32 MiB with a 413, a
metered request whose body is no JSON object with a 400: what cannot be decided never reaches
the engine.

For each metered request it reads the attribution headers and the body, makes sure the
request carries an X-Request-Id (vLLM names the engine request after it, which is how the
engine's counts find their way back), watches the response and the client's disconnect,
and when the request ends hands what it saw to the runtime, which waits for the engine's
counts off the request's task. Who sends it, who pays for it and whether a hard budget refuses
it are decided here, once, by the edge's pipeline (wire/edge.py, Door): the attribution map
(wire/attribution.py) over the caller's `Authorization: Bearer` key (the one value vLLM's own
--api-key check reads) and its claims.
It never changes what the client sends or gets, except that with
COSTPLATFORM_CACHE_SALT_DIM set it sets the `cache_salt` from that dim's trusted value
(prefix-cache isolation between business lines), with a caller's own salt mixed in.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
import uuid
from typing import Any

from serving import hooks, runtime
from serving.runtime import Seen
from wire import edge
from wire.budgets import Refusal

log = logging.getLogger("costplatform.serving")

# vLLM's engine request id for each endpoint is this prefix + X-Request-Id.
ENGINE_ID_PREFIX = {
    "chat.completions": "chatcmpl-",
    "completions": "cmpl-",
    "embeddings": "embd-",
    "responses": "resp_",
}
MAX_RESPONSE_KEPT = 4 * 1024 * 1024


def expected_sequences(endpoint: str, body: dict[str, Any]) -> int:
    """How many finished engine sequences make up the request (n choices, list prompts)."""
    try:
        n = int(body.get("n") or 1)
    except (TypeError, ValueError):
        n = 1
    if endpoint == "completions":
        prompt = body.get("prompt")
        if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int):
            return n * len(prompt)
    return n


def cache_salt(key: bytes, value: str) -> str:
    return hashlib.blake2b(value.encode(), key=key[:64], digest_size=12).hexdigest()


def trusted_salt(key: bytes, trusted: str | None, claimed: Any) -> str | None:
    """The cache_salt vLLM gets: from the dim's trusted value, the caller's own salt mixed in,
    so a caller can split its line's cache further but never reach another line's."""
    own = claimed if isinstance(claimed, str) and claimed else None
    if not trusted and own is None:
        return None
    return cache_salt(key, json.dumps([trusted or "", own]))


class CostplatformMiddleware:
    def __init__(self, app: Any) -> None:
        self.app = app
        self.runtime = runtime.get()
        if self.runtime is not None:
            rt = self.runtime
            rt.middleware_active = True
            hooks.install(rt.join, lambda state: getattr(state, "lora_name", None) or rt.served_model)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        kind = scope.get("type")
        if self.runtime is None or kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        method = scope.get("method", "GET") if kind == "http" else "WEBSOCKET"
        path = scope.get("path", "").removeprefix(scope.get("root_path", ""))
        route = edge.vllm_route(method, path)
        try:
            if not route.served:
                raise edge.route_refused(method, path)
            headers = _headers(scope.get("headers", []))
            if route.endpoint is None:
                await self.app(scope, receive, send)
                return
            body, body_bytes, arrival = await _read_body(headers.get("content-length"), receive)
        except edge.Refused as refused:
            await _answer(refused, scope, receive, send)
            return
        except _Disconnected:
            return
        await self._metered(scope, receive, send, route.endpoint, headers, body, body_bytes, arrival)

    async def _metered(
        self,
        scope: dict[str, Any],
        receive: Any,
        send: Any,
        endpoint: str,
        headers: dict[str, str],
        body: dict[str, Any],
        body_bytes: bytes,
        arrival: float,
    ) -> None:
        rt = self.runtime
        assert rt is not None
        raw_headers = list(scope.get("headers", []))
        request_id = headers.get("x-request-id")
        if not request_id:
            request_id = uuid.uuid4().hex
            raw_headers.append((b"x-request-id", request_id.encode()))
        authorization = headers.get("authorization")  # one at most: _headers refused two
        seen = Seen(
            record_id=ENGINE_ID_PREFIX[endpoint] + request_id,
            arrival=arrival,
            endpoint=endpoint,
            headers=headers,
            body=body,
            request_id=request_id,
            streamed=bool(body.get("stream")),
        )
        who = rt.door.who([authorization] if authorization else [])
        if rt.door.reserves:  # a round trip to the reservations' Redis, and the prompt tokenized: off the loop
            decision, refusal = await asyncio.to_thread(rt.door.admit, seen, who)
        else:
            decision, refusal = rt.door.admit(seen, who)
        if refusal is not None:
            await _refuse(rt, refusal, seen, send)
            return
        if rt.config.cache_salt_dim:
            salt = trusted_salt(rt.config.hash_key, decision.dims.get(rt.config.cache_salt_dim), body.get("cache_salt"))
            if salt is not None:
                body["cache_salt"] = salt
                body_bytes = json.dumps(body).encode()
                raw_headers = [(k, v) for k, v in raw_headers if k.lower() != b"content-length"]
                raw_headers.append((b"content-length", str(len(body_bytes)).encode()))
        scope = dict(scope, headers=raw_headers)
        waiter = rt.join.expect(seen.record_id, expected_sequences(endpoint, body))
        replay = _replay(body_bytes, receive, seen=seen)

        async def watch(message: dict[str, Any]) -> None:
            kind = message["type"]
            if kind == "http.response.start":
                seen.status = message["status"]
            elif kind == "http.response.body":
                part = message.get("body", b"")
                if part and seen.first_byte is None:
                    seen.first_byte = time.time()
                if len(seen.response) < MAX_RESPONSE_KEPT:
                    seen.response += part
                if not message.get("more_body"):
                    seen.end = time.time()
            try:
                await send(message)
            except OSError:
                seen.disconnected = True
                raise

        try:
            await self.app(scope, replay, watch)
        except BaseException as exc:
            seen.error = type(exc).__name__
            raise
        finally:
            seen.end = seen.end or time.time()
            # A request that never reached the engine (refused by validation) has no counts to wait for.
            engine_ran = seen.status is None or seen.status < 400 or seen.disconnected
            rt.finish_later(seen, waiter, wait=rt.config.stats_wait if engine_ran else 0.05)


async def _refuse(rt: runtime.Runtime, refusal: Refusal, seen: Seen, send: Any) -> None:
    """Answer a request refused by a hard budget, without the engine, and record it as
    rejected (no tokens: the engine never saw it; nothing of its body but its model)."""
    response_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(refusal.body)).encode())]
    response_headers += [(k.lower().encode(), v.encode()) for k, v in refusal.headers.items()]
    await send({"type": "http.response.start", "status": refusal.status, "headers": response_headers})
    await send({"type": "http.response.body", "body": refusal.body})
    seen.refused()
    seen.status, seen.end = refusal.status, time.time()
    rt.emitter.submit(seen, [])


class _Disconnected(Exception):
    """The client went away before its request's body was read."""


def _headers(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """The request's headers by lower-case name, the first value of each as vLLM reads it
    (Starlette's Headers.get: X-Request-Id above all); edge.Refused for two Authorization."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw}
    if len(headers) < len(raw):  # a repeated header (rare): the first value, and one Authorization
        edge.authorization_of(raw)
        headers = {}
        for k, v in raw:
            headers.setdefault(k.decode("latin-1").lower(), v.decode("latin-1"))
    return headers


async def _read_body(length: str | None, receive: Any) -> tuple[dict[str, Any], bytes, float]:
    """A metered request's JSON object, its bytes and its arrival; edge.Refused for a body over
    edge.MAX_BODY (413: never passed on unread) or no JSON object (400)."""
    arrival = time.time()
    if edge.declared_too_large(length):
        raise edge.too_large()
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if size > edge.MAX_BODY:
            raise edge.too_large()
        if not message.get("more_body"):
            break
    body_bytes = b"".join(chunks)
    return edge.json_object(body_bytes), body_bytes, arrival


async def _answer(refused: edge.Refused, scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The edge's refusal: an OpenAI-style error, or a closed websocket (policy violation)."""
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.close", "code": 1008})
        return
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(refused.body())).encode())]
    await send({"type": "http.response.start", "status": refused.status, "headers": headers})
    await send({"type": "http.response.body", "body": refused.body()})


def _replay(body: bytes, receive: Any, *, seen: Seen | None = None) -> Any:
    """A receive() that gives the app the body we already read, then the client's next messages."""
    sent = False

    async def replayed() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        message = await receive()
        if message["type"] == "http.disconnect" and seen is not None and seen.end is None:
            seen.disconnected = True
        return message

    return replayed
