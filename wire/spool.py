"""A durable on-disk queue of token records: fsync'd append-only segments and a read cursor.

A spool directory holds

    00000000000000000000.seg    one record per line (compact JSON), named by the sequence
    00000000000000004000.seg    number of its first record; only the newest one is appended to
    cursor.json                 {"segment": N, "offset": BYTES}: everything before is acknowledged
    lock                        flock'ed while a process has the spool open

`append` writes a group of records with one write and one fsync (group commit): when it
returns, the records survive a crash or power loss. `read` returns the oldest records not yet
acknowledged, `ack` moves the cursor past them (written to a temporary file, fsync'd, renamed)
and deletes segments it has passed. A crash can only tear the end of the newest segment; on
open that tail is cut off at the last complete, readable line.

When a write would take the spool over `max_bytes`, `when_full` decides: "drop-oldest" deletes
the oldest segments, unshipped records included, and logs and counts them; "refuse" raises
SpoolFull and takes nothing. Records a read handed out to a send when their segment goes are
counted once the send's fate is known: not at all when it is acknowledged (they were delivered),
at the next read or the close when it is not. Standard library and msgspec only.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from wire.contract import ts_of

log = logging.getLogger(__name__)

GiB = 1024**3
MiB = 1024**2
WHEN_FULL = ("drop-oldest", "refuse")
SEGMENT_SUFFIX = ".seg"
CURSOR_FILE = "cursor.json"
LOCK_FILE = "lock"
DEFAULT_READ_BYTES = 4 * MiB  # a request body well under the ingest API's 10 MiB limit

_encode = msgspec.json.Encoder().encode


class SpoolFull(Exception):
    """The records do not fit under the spool's size limit (when_full="refuse"), or the disk is full."""


class SpoolLocked(Exception):
    """Another process has this spool open."""


class SpoolClosed(Exception):
    pass


@dataclass(frozen=True)
class SpoolBatch:
    """The oldest unacknowledged records, each one JSON document without its newline."""

    records: list[bytes]
    segment: int  # first sequence number of the segment they were read from
    start: int  # byte offsets in that segment
    end: int
    first_seq: int
    end_seq: int  # sequence number after the last record

    def __len__(self) -> int:
        return len(self.records)

    def body(self) -> bytes:
        """The records as an NDJSON request body."""
        return b"\n".join(self.records) + b"\n" if self.records else b""


@dataclass
class _Segment:
    first_seq: int
    size: int
    path: Path


@dataclass
class _Cursor:
    segment: int
    offset: int
    seq: int


@dataclass
class _HeadCache:
    seq: int = -1
    ts: datetime | None = None


class Spool:
    """A spool directory, opened (and locked) for one process; see the module docstring."""

    def __init__(
        self,
        directory: Path | str,
        *,
        max_bytes: int = GiB,
        segment_bytes: int = 16 * MiB,
        when_full: str = "drop-oldest",
        on_drop: Callable[[int], None] | None = None,
    ) -> None:
        if when_full not in WHEN_FULL:
            raise ValueError(f"when_full must be one of {', '.join(WHEN_FULL)}, not {when_full!r}")
        if max_bytes < 1 or segment_bytes < 1:
            raise ValueError("max_bytes and segment_bytes must be positive")
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self.when_full = when_full
        self.on_drop = on_drop  # called with a count each time records are dropped to make room
        self.dropped = 0  # records dropped to make room, since open
        # The records the last read handed out, not acknowledged yet: a send may be carrying them.
        self._out: tuple[int, int] | None = None
        # Those of them whose segment was dropped meanwhile: lost only if their send fails, which
        # the next read (or close) tells; an acknowledgement says they were delivered.
        self._limbo: tuple[int, int] | None = None
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()  # state: segments, cursor, sizes
        self._append_lock = threading.Lock()  # one appender at a time; its fsync runs outside _lock
        self._closed = False
        self._head = _HeadCache()
        self._lock_fd = _lock_directory(self.directory)
        try:
            self._open()
        except BaseException:
            os.close(self._lock_fd)
            raise

    # --- opening and recovery ---------------------------------------------------------------

    def _open(self) -> None:
        firsts = sorted(int(p.stem) for p in self.directory.glob(f"*{SEGMENT_SUFFIX}") if p.stem.isdigit())
        saved = self._load_cursor()
        if saved is not None:
            # Segments wholly before the cursor's were acknowledged; a crash came before their deletion.
            for first in [f for f in firsts if f < saved[0]]:
                self._segment_path(first).unlink()
                firsts.remove(first)
        if not firsts:
            firsts = [saved[0] if saved is not None else 0]
            self._segment_path(firsts[0]).touch()
            _fsync(self.directory)
        self._segments = [_Segment(f, self._segment_path(f).stat().st_size, self._segment_path(f)) for f in firsts]
        self._next_seq = self._recover_tail(self._segments[-1])
        self._cursor = self._place_cursor(saved)
        self._advance_past_finished()
        self._active_fd = os.open(self._segments[-1].path, os.O_WRONLY | os.O_APPEND)

    def _recover_tail(self, segment: _Segment) -> int:
        """Cut the newest segment after its last complete, readable line; its next sequence number."""
        data = segment.path.read_bytes()
        good, count = _valid_prefix(data)
        if good < len(data):
            log.warning("spool %s: cut a torn tail of %d bytes from %s", self.directory, len(data) - good, segment.path)
            os.truncate(segment.path, good)
            _fsync(segment.path)
            segment.size = good
        return segment.first_seq + count

    def _place_cursor(self, saved: tuple[int, int] | None) -> _Cursor:
        first = self._segments[0]
        if saved is None or saved[0] != first.first_seq:
            # No cursor yet, or its segment was dropped: start at the oldest segment left.
            return _Cursor(first.first_seq, 0, first.first_seq)
        offset = min(saved[1], first.size)
        with open(first.path, "rb") as handle:
            seq = first.first_seq + handle.read(offset).count(b"\n")
        return _Cursor(first.first_seq, offset, seq)

    def _load_cursor(self) -> tuple[int, int] | None:
        try:
            saved = json.loads((self.directory / CURSOR_FILE).read_bytes())
            return int(saved["segment"]), int(saved["offset"])
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as exc:
            log.error("spool %s: unreadable cursor (%s); starting from the oldest segment", self.directory, exc)
            return None

    # --- appending ------------------------------------------------------------------------

    def append(self, records: Sequence[Mapping[str, Any] | bytes]) -> int:
        """Write the records and fsync once; how many were taken. Bytes are taken as one
        encoded JSON document each. Raises SpoolFull (nothing taken) when they do not fit
        and when_full is "refuse"."""
        lines = [r if isinstance(r, bytes) else _encode(r) for r in records]
        if any(b"\n" in line for line in lines):
            raise ValueError("an encoded record must not contain a newline")
        if not lines:
            return 0
        with self._append_lock:
            lines = self._fit(lines)
            data = b"\n".join(lines) + b"\n"
            try:
                self._write(data)
            except OSError as exc:
                if exc.errno != errno.ENOSPC or self.when_full == "refuse" or not self._drop_for_disk():
                    raise SpoolFull(f"cannot write to spool {self.directory}: {exc}") from exc
                self._write(data)
            with self._lock:
                self._segments[-1].size += len(data)
                self._next_seq += len(lines)
        return len(lines)

    def _fit(self, lines: list[bytes]) -> list[bytes]:
        """Make room for the lines (dropping or refusing); the lines that will be written."""
        need = sum(len(line) + 1 for line in lines)
        with self._lock:
            self._check_open()
            if self._total_bytes() + need > self.max_bytes:
                if self.when_full == "refuse":
                    raise SpoolFull(
                        f"spool {self.directory} is full ({self._total_bytes()} of {self.max_bytes} bytes); "
                        f"{len(lines)} records refused"
                    )
                while self._total_bytes() + need > self.max_bytes and self._drop_oldest():
                    pass
            lines, need = self._trim_to_limit(lines, need)
            active = self._segments[-1]
            if active.size and active.size + need > self.segment_bytes:
                self._rotate()
        return lines

    def _trim_to_limit(self, lines: list[bytes], need: int) -> tuple[list[bytes], int]:
        # A single write bigger than the whole spool keeps its newest records.
        cut = 0
        while need > self.max_bytes - self._total_bytes() and cut < len(lines) - 1:
            need -= len(lines[cut]) + 1
            cut += 1
        if cut:
            self._count_dropped(cut, "a write larger than the spool")
        return lines[cut:], need

    def _write(self, data: bytes) -> None:
        fd = self._active_fd
        size = self._segments[-1].size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fdatasync(fd)
        except OSError:
            os.ftruncate(fd, size)  # no half-written line is left for the next write to follow
            raise

    def _rotate(self) -> None:
        os.close(self._active_fd)
        segment = _Segment(self._next_seq, 0, self._segment_path(self._next_seq))
        segment.path.touch()
        _fsync(self.directory)
        self._segments.append(segment)
        self._active_fd = os.open(segment.path, os.O_WRONLY | os.O_APPEND)
        self._advance_past_finished()

    def _drop_oldest(self) -> bool:
        """Delete the oldest segment (rotating first when it is the only one); False when empty."""
        if len(self._segments) == 1:
            if not self._segments[0].size:
                return False
            self._rotate()
            if len(self._segments) == 1:  # the rotation found it fully acknowledged and deleted it
                return True
        oldest, after = self._segments[0], self._segments[1]
        start = max(oldest.first_seq, self._cursor.seq)
        unshipped = after.first_seq - start
        out = self._out
        if out is not None and start <= out[0] < out[1] <= after.first_seq:
            self._limbo, self._out = out, None  # counted once its send is known to have failed
            unshipped -= out[1] - out[0]
        if self._cursor.seq < after.first_seq:
            self._cursor = _Cursor(after.first_seq, 0, after.first_seq)
            self._save_cursor()
        self._segments.pop(0)
        oldest.path.unlink()
        _fsync(self.directory)
        if unshipped > 0:
            self._count_dropped(unshipped, f"segment {oldest.path.name}, {oldest.size} bytes")
        return True

    def _limbo_lost(self) -> None:
        """The records out in a send when their segment was dropped, and not acknowledged by the
        next read (or the close): the send failed, and they are gone with the segment."""
        if self._limbo is not None:
            first, end = self._limbo
            self._limbo = None
            self._count_dropped(end - first, "records out in a failed send when their segment was dropped")

    def _drop_for_disk(self) -> bool:
        with self._lock:
            log.warning("spool %s: the disk is full", self.directory)
            return self._drop_oldest()

    def _count_dropped(self, count: int, what: str) -> None:
        self.dropped += count
        log.warning(
            "spool %s is full (limit %d bytes): dropped %d unshipped records (%s)",
            self.directory,
            self.max_bytes,
            count,
            what,
        )
        if self.on_drop is not None:
            self.on_drop(count)

    # --- reading and acknowledging ----------------------------------------------------------

    def read(self, max_records: int, max_bytes: int = DEFAULT_READ_BYTES) -> SpoolBatch:
        """The oldest unacknowledged records (at most max_records, about max_bytes), from one
        segment; empty when everything is acknowledged. Reading again before `ack` returns them again."""
        with self._lock:
            self._check_open()
            self._limbo_lost()
            cursor = self._cursor
            segment = self._segments[0]
            records: list[bytes] = []
            end = cursor.offset
            if max_records > 0 and cursor.offset < segment.size:
                records, end = _read_lines(segment.path, cursor.offset, segment.size, max_records, max_bytes)
            self._out = (cursor.seq, cursor.seq + len(records)) if records else None
            return SpoolBatch(records, segment.first_seq, cursor.offset, end, cursor.seq, cursor.seq + len(records))

    def ack(self, batch: SpoolBatch) -> None:
        """Mark a batch as delivered. A batch the cursor has already passed (acknowledged,
        or dropped to make room meanwhile) changes nothing."""
        with self._lock:
            self._check_open()
            if self._limbo == (batch.first_seq, batch.end_seq):
                self._limbo = None  # delivered after all: its segment's drop lost none of it
            if self._out == (batch.first_seq, batch.end_seq):
                self._out = None
            if not batch.records or batch.end_seq <= self._cursor.seq:
                return
            if batch.first_seq != self._cursor.seq or batch.segment != self._cursor.segment:
                raise ValueError("a batch must be acknowledged in the order it was read")
            self._cursor = _Cursor(batch.segment, batch.end, batch.end_seq)
            if not self._advance_past_finished():
                self._save_cursor()

    def _advance_past_finished(self) -> bool:
        """Move the cursor off fully acknowledged segments that are no longer written, and delete
        them; whether it moved (and was saved)."""
        passed = []
        while len(self._segments) > 1 and self._cursor.offset >= self._segments[0].size:
            passed.append(self._segments.pop(0))
            nxt = self._segments[0]
            self._cursor = _Cursor(nxt.first_seq, 0, nxt.first_seq)
        if passed:
            self._save_cursor()  # before the deletion, so a crash between them loses nothing
            for segment in passed:
                segment.path.unlink()
            _fsync(self.directory)
        return bool(passed)

    def _save_cursor(self) -> None:
        path = self.directory / CURSOR_FILE
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as handle:
            handle.write(json.dumps({"segment": self._cursor.segment, "offset": self._cursor.offset}).encode())
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        _fsync(self.directory)

    # --- state ------------------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Records written and not yet acknowledged."""
        return self._next_seq - self._cursor.seq

    @property
    def next_seq(self) -> int:
        """Sequence number the next record written will get."""
        return self._next_seq

    @property
    def acked_seq(self) -> int:
        """Every record numbered below this one is acknowledged (or dropped)."""
        return self._cursor.seq

    @property
    def size_bytes(self) -> int:
        with self._lock:
            return self._total_bytes()

    def oldest_ts(self) -> datetime | None:
        """The `ts` of the oldest unacknowledged record (None when there is none or it has none)."""
        with self._lock:
            if self._closed or self.pending <= 0:
                return None
            if self._head.seq != self._cursor.seq:
                segment = self._segments[0]
                lines, _ = _read_lines(segment.path, self._cursor.offset, segment.size, 1, 64 * 1024)
                self._head = _HeadCache(self._cursor.seq, ts_of(lines[0]) if lines else None)
            return self._head.ts

    def close(self) -> None:
        with self._append_lock, self._lock:
            if self._closed:
                return
            self._limbo_lost()
            self._closed = True
            os.close(self._active_fd)
            os.close(self._lock_fd)

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _total_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def _segment_path(self, first_seq: int) -> Path:
        return self.directory / f"{first_seq:020d}{SEGMENT_SUFFIX}"

    def _check_open(self) -> None:
        if self._closed:
            raise SpoolClosed(f"spool {self.directory} is closed")


def _read_lines(path: Path, start: int, stop: int, max_records: int, max_bytes: int) -> tuple[list[bytes], int]:
    """Up to max_records complete lines from start (at least one, even when longer than max_bytes)."""
    with open(path, "rb") as handle:
        handle.seek(start)
        data = handle.read(min(stop - start, max(max_bytes, 1)))
        if b"\n" not in data:
            data += handle.read(stop - start - len(data))
    lines = data.split(b"\n", max_records)
    lines.pop()  # the rest after the last newline, or what is over max_records
    return lines, start + sum(len(line) + 1 for line in lines)


def _valid_prefix(data: bytes) -> tuple[int, int]:
    """Length and line count of the longest prefix made of complete, decodable JSON lines."""
    good = count = 0
    decode = msgspec.json.decode
    while True:
        newline = data.find(b"\n", good)
        if newline < 0:
            return good, count
        try:
            decode(data[good:newline])
        except msgspec.DecodeError:
            return good, count
        good, count = newline + 1, count + 1


def _lock_directory(directory: Path) -> int:
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise SpoolLocked(f"spool {directory} is open in another process") from None
    return fd


def _fsync(path: Path) -> None:
    """Flush a file, or a directory's entries (a rename or a new file in it), to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
