"""A transport sends one rendered message to one channel, or raises TransportError."""

from __future__ import annotations

import json
import time
from typing import Any

from apps.alerts import http
from apps.alerts.messages import Message
from apps.alerts.models import Channel


class TransportError(Exception):
    """A failed send. `permanent` errors (bad key, bad signature, 4xx) disable the channel;
    the others are retried with backoff."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent


class Transport:
    def __init__(self, channel: Channel) -> None:
        self.channel = channel

    def payload(self, message: Message) -> dict[str, Any]:
        """What the provider gets for `message` (the channels page previews it)."""
        raise NotImplementedError

    def notify(self, message: Message) -> None:
        raise NotImplementedError


class HttpTransport(Transport):
    """JSON over HTTP through apps.alerts.http, with the HTTP status rules all providers share."""

    # Provider error codes in a 200 answer that mean the configuration is wrong (see each subclass).
    code_field = ""
    permanent_codes: frozenset[int] = frozenset()

    @staticmethod
    def now() -> float:
        return time.time()

    def url(self) -> str:
        return self.channel.url

    def headers(self, body: bytes) -> dict[str, str]:
        return {"Content-Type": "application/json; charset=utf-8"}

    def post(self, payload: dict[str, Any]) -> http.Response:
        body = json.dumps(payload, ensure_ascii=False).encode()
        try:
            response = http.post(self.url(), body=body, headers=self.headers(body))
        except http.OutboundError as exc:
            raise TransportError(str(exc), permanent=exc.blocked) from None
        self.check(response)
        return response

    def check(self, response: http.Response) -> None:
        status = response.status
        if status in (408, 429) or status >= 500:
            raise TransportError(f"HTTP {status}")
        if status >= 300:  # 3xx too: a webhook URL that redirects is misconfigured
            raise TransportError(f"HTTP {status}: {response.body[:200].decode(errors='replace')}", permanent=True)
        if self.code_field:
            self.check_code(response.json() or {})

    def check_code(self, answer: dict[str, Any]) -> None:
        code = answer.get(self.code_field, answer.get("StatusCode", 0))
        if code in (0, None):
            return
        text = answer.get("msg") or answer.get("errmsg") or answer.get("StatusMessage") or ""
        raise TransportError(f"{self.code_field} {code}: {text}"[:300], permanent=int(code) in self.permanent_codes)
