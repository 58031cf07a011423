"""The edge's one HTTP sender of records (Sender), and sending an NDJSON file of token records
v1 to the ingest API with it, in batches.

    python -m collectors.send FILE --url URL --key KEY [--batch N] [--ts-end TIME] [--gzip]

A Sender POSTs NDJSON bodies to the records endpoint with the collector key, gzip'd when asked,
over one kept-alive connection (http.client). `post` gives the one answer it got (the
shipper's Pipeline decides what an answer means: its backoff, Retry-After, splitting a batch
the API finds too large, halting on a refused key); `deliver` retries on its own (this file's
sending, below).

FILE holds one record per line ("-" reads stdin). URL is the server (http://host:port) or the
full endpoint (…/api/v1/records). KEY is a collector key (cpk_…); instead of --key, set
COSTPLATFORM_COLLECTOR_KEY or pass --key-file, so the key stays out of the process list.

The API stores a record once per (source, record_id, ts), so re-sending a file, or a batch
after a lost response, counts the repeats as duplicates and changes nothing; this program
retries a batch on connection errors, 429 and 5xx for that reason. Invalid lines are sent
as they are: the API refuses them one by one, with reasons, and keeps the rest.

--ts-end shifts every valid timestamp by one offset so that the latest lands at TIME
(RFC 3339, or "now"), which makes an old sample file look recent. Lines whose ts cannot be
read are sent unchanged. Standard library and msgspec only.
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from wire.contract import ts_of
from wire.keys import collector_key, collector_key_arguments

ENDPOINT = "/api/v1/records"
DEFAULT_BATCH = 1000
RETRY_STATUSES = {429, 500, 502, 503, 504}
SHIPPER_AGENT = "costplatform-collectors-shipper/1"
SEND_AGENT = "costplatform-collectors-send/1"


class SendError(RuntimeError):
    """A batch could not be delivered (refused as a whole, or the server stayed unreachable)."""


@dataclass
class Rejection:
    line: int  # 1-based line number in the file
    record_id: str
    errors: dict[str, list[str]]

    def __str__(self) -> str:
        reasons = "; ".join(f"{name}: {', '.join(msgs)}" for name, msgs in self.errors.items())
        return f"line {self.line} ({self.record_id or 'no record_id'}): {reasons}"


@dataclass
class Summary:
    lines: int = 0
    batches: int = 0
    accepted: int = 0
    duplicates: int = 0
    rejections: list[Rejection] = field(default_factory=list)

    @property
    def rejected(self) -> int:
        return len(self.rejections)

    def __str__(self) -> str:
        return (
            f"{self.lines} lines in {self.batches} request{'s' if self.batches != 1 else ''}: "
            f"{self.accepted} accepted, {self.duplicates} duplicates, {self.rejected} rejected"
        )


def sender_arguments(parser: argparse.ArgumentParser, *, batch: int) -> None:
    """The options of a program that sends records with a Sender: --url, the collector key,
    --batch (records a request, `batch` by default) and --gzip."""
    parser.add_argument("--url", required=True, help="server URL, e.g. http://127.0.0.1:8000")
    collector_key_arguments(parser)
    parser.add_argument("--batch", type=int, default=batch, help=f"records a request (default {batch})")
    parser.add_argument("--gzip", action="store_true", help="gzip each request body")


def sender_options(parser: argparse.ArgumentParser, argv: list[str] | None) -> tuple[argparse.Namespace, str]:
    """`argv` parsed by a parser given sender_arguments, and its collector key (a parser error
    when there is none, or when --batch is under 1)."""
    args = parser.parse_args(argv)
    key = collector_key(parser, args)
    if args.batch < 1:
        parser.error("--batch must be at least 1")
    return args, key


def endpoint_url(url: str) -> str:
    """The records endpoint for a server URL; a URL that already names a path is kept."""
    url = url.rstrip("/")
    scheme_end = url.find("://")
    has_path = scheme_end >= 0 and "/" in url[scheme_end + 3 :]
    return url if has_path else url + ENDPOINT


def parse_time(text: str) -> datetime:
    """An RFC 3339 time with offset, or "now"."""
    if text == "now":
        return datetime.now(UTC)
    value = datetime.fromisoformat(text)
    if value.tzinfo is None:
        raise ValueError(f"{text!r} has no UTC offset")
    return value


def latest_ts(lines: Iterable[bytes]) -> datetime | None:
    latest = None
    for line in lines:
        ts = ts_of(line)
        if ts is not None and (latest is None or ts > latest):
            latest = ts
    return latest


def _format_ts(ts: datetime) -> str:
    ts = ts.astimezone(UTC)
    return ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


def shift_line(line: bytes, offset: timedelta) -> bytes:
    """The line with its ts moved by `offset`; unchanged when its ts cannot be read."""
    ts = ts_of(line) if offset else None
    if ts is None:
        return line
    record = json.loads(line)
    record["ts"] = _format_ts(ts + offset)
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode()


def _numbered(lines: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if line:
            yield number, line


def _batches(lines: Iterable[tuple[int, bytes]], size: int) -> Iterator[list[tuple[int, bytes]]]:
    batch: list[tuple[int, bytes]] = []
    for item in lines:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


# --- the sender ------------------------------------------------------------------------------


@dataclass
class Answer:
    status: int
    headers: Mapping[str, str]  # by lower-case name
    body: bytes


class Sender:
    """POSTs NDJSON bodies to the records endpoint over one kept-alive connection."""

    def __init__(
        self, url: str, key: str, *, timeout: float = 30.0, compress: bool = False, user_agent: str = SHIPPER_AGENT
    ) -> None:
        self.url = endpoint_url(url)
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self._parts = parts
        self._path = parts.path + (f"?{parts.query}" if parts.query else "")
        self._headers = {
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/x-ndjson",
            "Accept": "application/json",
            "User-Agent": user_agent,
        }
        self.timeout = timeout
        self.compress = compress
        self._conn: http.client.HTTPConnection | None = None

    def post(self, body: bytes) -> Answer:
        """The answer; raises OSError / http.client.HTTPException when there is none."""
        headers = dict(self._headers)
        if self.compress:
            body = gzip.compress(body, compresslevel=1)
            headers["Content-Encoding"] = "gzip"
        reused = self._conn is not None
        try:
            return self._request(body, headers)
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            self.close()
            if not reused:
                raise
            # The server closed the idle kept-alive connection: one immediate retry on a new one.
            return self._request(body, headers)
        except BaseException:
            self.close()
            raise

    def deliver(self, body: bytes, *, retries: int = 5) -> dict[str, Any]:
        """POST one NDJSON body until the API takes it: the API's answer {"accepted",
        "duplicates", "rejected": [...]}. Connection errors, 429 and 5xx are retried `retries`
        times (after 0.5 s, doubling up to 10 s); SendError when the body was not delivered."""
        delay = 0.5
        for attempt in range(retries + 1):
            last = attempt == retries
            try:
                answer = self.post(body)
            except (OSError, http.client.HTTPException) as exc:
                if last:
                    raise SendError(f"cannot reach {self.url}: {exc}") from exc
            else:
                if 200 <= answer.status < 300:
                    return _answer_document(answer, self.url)
                if answer.status not in RETRY_STATUSES or last:
                    detail = answer.body[:500].decode("utf-8", errors="replace")
                    raise SendError(f"HTTP {answer.status} from {self.url}: {detail}")
            time.sleep(delay)
            delay = min(delay * 2, 10)
        raise AssertionError("unreachable")

    def _request(self, body: bytes, headers: dict[str, str]) -> Answer:
        if self._conn is None:
            kind = http.client.HTTPSConnection if self._parts.scheme == "https" else http.client.HTTPConnection
            self._conn = kind(self._parts.hostname or "", self._parts.port, timeout=self.timeout)
        self._conn.request("POST", self._path, body=body, headers=headers)
        response = self._conn.getresponse()
        data = response.read()
        if response.will_close:
            self.close()
        return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, data)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _answer_document(answer: Answer, url: str) -> dict[str, Any]:
    try:
        document = json.loads(answer.body)
    except ValueError as exc:
        raise SendError(f"HTTP {answer.status} from {url} is no JSON answer: {answer.body[:200]!r}") from exc
    if not isinstance(document, dict):
        raise SendError(f"HTTP {answer.status} from {url} is no JSON object: {answer.body[:200]!r}")
    return document


# --- sending a file ---------------------------------------------------------------------------


def send_lines(
    read_lines: Callable[[], Iterable[bytes]],
    *,
    url: str,
    key: str,
    batch: int = DEFAULT_BATCH,
    ts_end: datetime | None = None,
    compress: bool = False,
    progress: Callable[[Summary], None] | None = None,
) -> Summary:
    """Send the lines `read_lines()` yields. It is called twice when ts_end is given
    (once to find the latest ts), so it must yield the same lines each time."""
    if batch < 1:
        raise ValueError("batch must be at least 1")
    offset = timedelta(0)
    if ts_end is not None:
        latest = latest_ts(read_lines())
        offset = ts_end - latest if latest is not None else timedelta(0)
    sender = Sender(url, key, timeout=60, compress=compress, user_agent=SEND_AGENT)
    summary = Summary()
    try:
        for items in _batches(_numbered(read_lines()), batch):
            body = b"\n".join(shift_line(line, offset) for _, line in items) + b"\n"
            _count(summary, items, sender.deliver(body))
            if progress is not None:
                progress(summary)
    finally:
        sender.close()
    return summary


def _count(summary: Summary, items: list[tuple[int, bytes]], answer: Mapping[str, Any]) -> None:
    """Add a batch's answer to the summary (rejections by their line in the file)."""
    summary.lines += len(items)
    summary.batches += 1
    summary.accepted += int(answer.get("accepted", 0))
    summary.duplicates += int(answer.get("duplicates", 0))
    for rejected in answer.get("rejected", []):
        index = rejected.get("index", 0)
        line = items[index][0] if 0 <= index < len(items) else 0
        summary.rejections.append(Rejection(line, rejected.get("record_id", ""), rejected.get("errors", {})))


def send_file(path: Path | str, **kwargs: object) -> Summary:
    """Send an NDJSON file ("-" for stdin); keyword arguments as for send_lines."""
    if str(path) == "-":
        data = sys.stdin.buffer.read().splitlines()
        return send_lines(lambda: data, **kwargs)  # type: ignore[arg-type]

    def read() -> Iterator[bytes]:
        with open(path, "rb") as handle:
            yield from handle

    return send_lines(read, **kwargs)  # type: ignore[arg-type]
