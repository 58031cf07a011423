"""Send an NDJSON file of token records v1 to the ingest API, in batches.

    python -m collectors.send FILE --url URL --key KEY [--batch N] [--ts-end TIME] [--gzip]

FILE holds one record per line ("-" reads stdin). URL is the server (http://host:port) or the
full endpoint (…/api/v1/records). KEY is a collector key (cpk_…); instead of --key, set
COSTPLATFORM_COLLECTOR_KEY or pass --key-file, so the key stays out of the process list.

The API stores a record once per (source, record_id, ts), so re-sending a file, or a batch
after a lost response, counts the repeats as duplicates and changes nothing; this program
retries a batch on connection errors, 429 and 5xx for that reason. Invalid lines are sent
as they are: the API refuses them one by one, with reasons, and keeps the rest.

--ts-end shifts every valid timestamp by one offset so that the latest lands at TIME
(RFC 3339, or "now"), which makes an old sample file look recent. Lines whose ts cannot be
read are sent unchanged. Standard library only.
"""

from __future__ import annotations

import gzip
import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

ENDPOINT = "/api/v1/records"
DEFAULT_BATCH = 1000
RETRY_STATUSES = {429, 500, 502, 503, 504}


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


def _ts_of(line: bytes) -> tuple[dict | None, datetime | None]:
    try:
        record = json.loads(line)
    except ValueError:
        return None, None
    if not isinstance(record, dict) or not isinstance(record.get("ts"), str):
        return None, None
    try:
        ts = datetime.fromisoformat(record["ts"])
    except ValueError:
        return None, None
    return (record, ts) if ts.tzinfo is not None else (None, None)


def latest_ts(lines: Iterable[bytes]) -> datetime | None:
    latest = None
    for line in lines:
        _, ts = _ts_of(line)
        if ts is not None and (latest is None or ts > latest):
            latest = ts
    return latest


def _format_ts(ts: datetime) -> str:
    ts = ts.astimezone(UTC)
    return ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


def shift_line(line: bytes, offset: timedelta) -> bytes:
    """The line with its ts moved by `offset`; unchanged when its ts cannot be read."""
    record, ts = _ts_of(line)
    if record is None or ts is None or not offset:
        return line
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


def post_batch(
    url: str, key: str, body: bytes, *, compress: bool = False, timeout: float = 60, retries: int = 5
) -> dict:
    """POST one NDJSON body; the API's answer {"accepted", "duplicates", "rejected": [...]}."""
    headers = {
        "Authorization": f"Bearer {key}",
        "Content-Type": "application/x-ndjson",
        "Accept": "application/json",
        "User-Agent": "costplatform-collectors-send/1",
    }
    if compress:
        body = gzip.compress(body)
        headers["Content-Encoding"] = "gzip"
    delay = 0.5
    for attempt in range(retries + 1):
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", errors="replace")[:500]
            if exc.code not in RETRY_STATUSES or attempt == retries:
                raise SendError(f"HTTP {exc.code} from {url}: {detail}") from exc
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            if attempt == retries:
                raise SendError(f"cannot reach {url}: {exc}") from exc
        time.sleep(delay)
        delay = min(delay * 2, 10)
    raise AssertionError("unreachable")


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
    target = endpoint_url(url)
    summary = Summary()
    for items in _batches(_numbered(read_lines()), batch):
        body = b"\n".join(shift_line(line, offset) for _, line in items) + b"\n"
        answer = post_batch(target, key, body, compress=compress)
        summary.lines += len(items)
        summary.batches += 1
        summary.accepted += int(answer.get("accepted", 0))
        summary.duplicates += int(answer.get("duplicates", 0))
        for rejected in answer.get("rejected", []):
            index = rejected.get("index", 0)
            line = items[index][0] if 0 <= index < len(items) else 0
            summary.rejections.append(Rejection(line, rejected.get("record_id", ""), rejected.get("errors", {})))
        if progress is not None:
            progress(summary)
    return summary


def send_file(path: Path | str, **kwargs: object) -> Summary:
    """Send an NDJSON file ("-" for stdin); keyword arguments as for send_lines."""
    if str(path) == "-":
        data = sys.stdin.buffer.read().splitlines()
        return send_lines(lambda: data, **kwargs)  # type: ignore[arg-type]

    def read() -> Iterator[bytes]:
        with open(path, "rb") as handle:
            yield from handle

    return send_lines(read, **kwargs)  # type: ignore[arg-type]
