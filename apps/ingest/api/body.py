"""Reading an ingest request body safely: its size bounded before and after decompression,
its encoding and charset checked, and the time a client may take to send it."""

from __future__ import annotations

import signal
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from rest_framework import exceptions, status

UTF8_CHARSETS = {"utf-8", "utf8"}


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "Request body too large."
    default_code = "payload_too_large"


class BodyTimeout(exceptions.APIException):
    status_code = status.HTTP_408_REQUEST_TIMEOUT
    default_detail = "The request body was not received in time."
    default_code = "request_timeout"


def charset_check(request: HttpRequest) -> None:
    """JSON is UTF-8 (RFC 8259); a Content-Type naming another charset is refused, not guessed at."""
    charset = request.content_params.get("charset") if request.content_params else None
    if charset is not None and charset.strip().strip('"').lower() not in UTF8_CHARSETS:
        raise exceptions.UnsupportedMediaType(
            request.content_type, f"charset {charset!r}: records are JSON, sent as UTF-8 (charset=utf-8 or none)."
        )


def body_read(request: HttpRequest) -> bytes:
    """The body as sent, refusing anything over the size limit without reading it all."""
    limit = settings.INGEST_MAX_BYTES
    declared = int(request.META.get("CONTENT_LENGTH") or 0)
    if declared > limit:
        raise PayloadTooLarge(f"Body is {declared} bytes; the limit is {limit} bytes.")
    stream: Any = request
    if not declared and request.META.get("wsgi.input_terminated"):
        # A chunked body has no Content-Length, and Django reads nothing without one; the server
        # (gunicorn) de-chunks wsgi.input and ends it at the last chunk.
        stream = request.META["wsgi.input"]
    with _deadline(settings.INGEST_BODY_TIMEOUT):
        body = stream.read(limit + 1)
    if len(body) > limit:
        raise PayloadTooLarge(f"Body exceeds the limit of {limit} bytes.")
    return body


def body_inflate(request: HttpRequest, body: bytes) -> bytes:
    """The body decompressed as its Content-Encoding says; ParseError when it is broken gzip."""
    limit = settings.INGEST_MAX_BYTES
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding == "gzip":
        return gunzip(body, limit)
    if encoding not in {"", "identity"}:
        raise exceptions.UnsupportedMediaType(encoding, f"Content-Encoding {encoding!r}: only gzip is accepted.")
    return body


MAX_GZIP_MEMBERS = 1000  # `cat a.gz b.gz ...` of a few files, not one member per record
GZIP_WINDOW = 64 * 1024  # bytes of the body an inflater is handed at a time


def gunzip(body: bytes, limit: int, *, max_members: int = MAX_GZIP_MEMBERS) -> bytes:
    """Every gzip member of the body (`cat a.gz b.gz` is valid gzip), inflating at most `limit`
    bytes in all: a bomb stops at the limit, holding no more than the limit in memory.

    The body is walked in place, a window at a time, so a member never copies the rest of
    the body (with half a million empty members that copying took minutes), and there are at
    most `max_members` members."""
    view = memoryview(body)
    parts: list[bytes] = []
    size = offset = members = 0
    while offset < len(body):
        members += 1
        if members > max_members:
            raise exceptions.ParseError(f"Body has more than {max_members} gzip members.")
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        while not inflater.eof:
            if offset >= len(body):
                raise exceptions.ParseError("Body is truncated gzip.")
            window = view[offset : offset + GZIP_WINDOW]
            offset += len(window)
            try:
                data = inflater.decompress(window, limit + 1 - size)  # >= 1: 0 would mean "no limit"
            except zlib.error as exc:
                raise exceptions.ParseError(f"Body is not valid gzip: {exc}") from exc
            size += len(data)
            if size > limit or inflater.unconsumed_tail:
                raise PayloadTooLarge(f"Decompressed body exceeds the limit of {limit} bytes.")
            parts.append(data)
        offset -= len(inflater.unused_data)  # the next member starts in this window
    return b"".join(parts)


@contextmanager
def _deadline(seconds: int) -> Iterator[None]:
    """Raise BodyTimeout when the block takes longer than `seconds`.

    A gunicorn sync worker (the product's) serves one request at a time in its main thread,
    blocked in recv() while a client trickles its body; SIGALRM interrupts that read. Where the
    request is served in another thread nothing is armed, and the server's own timeout applies
    (docs/reliability.md, Hostile input)."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return
    armed = True

    def expired(signum: int, frame: FrameType | None) -> None:
        if armed:
            raise BodyTimeout(f"The body was not received within {seconds} s.")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
