"""The spool on a real filesystem: durable across reopen and kill, torn tails, both full policies."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wire.spool import Spool, SpoolFull, SpoolLocked


def rec(n: int, pad: int = 0) -> dict:
    return {"record_id": f"r{n}", "ts": "2025-03-01T10:00:00+00:00", "pad": "x" * pad}


def ids(records: list[bytes]) -> list[str]:
    return [json.loads(r)["record_id"] for r in records]


def drain(spool: Spool, size: int = 100) -> list[str]:
    got: list[str] = []
    while batch := spool.read(size):
        got += ids(batch.records)
        spool.ack(batch)
    return got


def segments(path: Path) -> list[Path]:
    return sorted(path.glob("*.seg"))


def test_it_reads_back_what_it_took_after_a_reopen(tmp_path):
    with Spool(tmp_path) as spool:
        assert spool.append([rec(1), rec(2), rec(3)]) == 3

    with Spool(tmp_path) as spool:
        batch = spool.read(10)

    assert ids(batch.records) == ["r1", "r2", "r3"]
    assert batch.body() == b"".join(r + b"\n" for r in batch.records)


def test_it_resumes_after_the_acknowledged_records(tmp_path):
    with Spool(tmp_path) as spool:
        spool.append([rec(n) for n in range(5)])
        spool.ack(spool.read(2))
        assert spool.pending == 3

    with Spool(tmp_path) as spool:
        assert spool.pending == 3
        assert ids(spool.read(10).records) == ["r2", "r3", "r4"]


def test_reading_again_before_ack_returns_the_same_records(tmp_path):
    with Spool(tmp_path) as spool:
        spool.append([rec(n) for n in range(4)])

        assert spool.read(3) == spool.read(3)
        spool.ack(spool.read(3))
        assert ids(spool.read(3).records) == ["r3"]


def test_an_acknowledged_batch_acknowledged_again_changes_nothing(tmp_path):
    with Spool(tmp_path) as spool:
        spool.append([rec(n) for n in range(4)])
        batch = spool.read(2)
        spool.ack(batch)
        spool.ack(batch)

        assert ids(spool.read(10).records) == ["r2", "r3"]


def test_it_moves_across_segments_and_deletes_the_shipped_ones(tmp_path):
    with Spool(tmp_path, segment_bytes=300) as spool:
        for n in range(20):
            spool.append([rec(n, pad=50)])
        assert len(segments(tmp_path)) > 3
        got = drain(spool, 7)

        assert got == [f"r{n}" for n in range(20)]
        assert len(segments(tmp_path)) == 1
        assert spool.pending == 0

    with Spool(tmp_path, segment_bytes=300) as spool:
        assert spool.read(10).records == []
        spool.append([rec(99)])
        assert ids(spool.read(10).records) == ["r99"]


def test_it_cuts_a_torn_last_line_on_open(tmp_path, caplog):
    with Spool(tmp_path) as spool:
        spool.append([rec(1), rec(2)])
    with open(segments(tmp_path)[-1], "ab") as handle:
        handle.write(b'{"record_id": "r3", "ts": "2025-')  # the write a crash interrupted

    with Spool(tmp_path) as spool:
        spool.append([rec(4)])
        got = ids(spool.read(10).records)

    assert got == ["r1", "r2", "r4"]
    assert "torn tail" in caplog.text


def test_it_cuts_unreadable_bytes_after_the_last_good_line(tmp_path):
    with Spool(tmp_path) as spool:
        spool.append([rec(1)])
    with open(segments(tmp_path)[-1], "ab") as handle:
        handle.write(b"\0" * 100 + b"\n" + b"\0" * 50)  # unwritten blocks a crash can leave

    with Spool(tmp_path) as spool:
        assert spool.pending == 1
        spool.append([rec(2)])
        assert ids(spool.read(10).records) == ["r1", "r2"]


def test_drop_oldest_deletes_the_oldest_records_logs_and_counts_them(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    counted: list[int] = []
    with Spool(tmp_path, max_bytes=2000, segment_bytes=500, on_drop=counted.append) as spool:
        for n in range(40):
            assert spool.append([rec(n, pad=40)]) == 1
        spool_bytes, dropped, pending = spool.size_bytes, spool.dropped, spool.pending
        kept = drain(spool)

    assert spool_bytes <= 2000
    assert dropped > 0 and sum(counted) == dropped
    assert dropped + pending == 40
    assert kept[-1] == "r39" and kept[0] == f"r{dropped}"
    assert f"dropped {counted[0]} unshipped records" in caplog.text


@pytest.mark.parametrize("delivered", [True, False])
def test_records_out_in_a_send_when_their_segment_goes_count_as_dropped_only_if_it_fails(tmp_path, delivered):
    """A send carries the oldest batch while the writer drops its segment: delivered, none of it
    was lost; failed (the next read finds the cursor past it), all of it was, and is counted."""
    counted: list[int] = []
    with Spool(tmp_path, max_bytes=2000, segment_bytes=500, on_drop=counted.append) as spool:
        for n in range(8):
            spool.append([rec(n, pad=40)])
        out = spool.read(2)  # the send takes r0 and r1 of the first segment (r0..r3)
        n = 8
        while segments(tmp_path)[0].name.startswith("0" * 20):
            spool.append([rec(n, pad=40)])  # until the first segment is dropped to make room
            n += 1
        in_first = ids(out.records)
        if delivered:
            spool.ack(out)  # a no-op for the cursor (it is past), but the records were delivered
        after = spool.read(100)
        first_kept = int(ids(after.records)[0][1:])
        lost = first_kept - (len(in_first) if delivered else 0)
        assert spool.dropped == sum(counted) == lost, (spool.dropped, first_kept, delivered)
        assert first_kept > len(in_first)  # the whole first segment went, the batch and more
        spool.ack(after)
        assert spool.dropped == lost  # nothing counted twice


def test_a_batch_out_when_the_spool_closes_unacknowledged_is_counted(tmp_path):
    counted: list[int] = []
    spool = Spool(tmp_path, max_bytes=2000, segment_bytes=500, on_drop=counted.append)
    for n in range(8):
        spool.append([rec(n, pad=40)])
    out = spool.read(2)
    n = 8
    while segments(tmp_path)[0].name.startswith("0" * 20):
        spool.append([rec(n, pad=40)])
        n += 1
    before = spool.dropped
    spool.close()
    assert spool.dropped == before + len(out) == sum(counted)


def test_drop_oldest_keeps_the_newest_of_a_write_bigger_than_the_spool(tmp_path):
    with Spool(tmp_path, max_bytes=1000, segment_bytes=400) as spool:
        taken = spool.append([rec(n, pad=40) for n in range(30)])

        assert 0 < taken < 30
        assert spool.dropped == 30 - taken
        assert drain(spool)[-1] == "r29"


def test_refuse_raises_and_takes_nothing_until_records_are_shipped(tmp_path):
    with Spool(tmp_path, max_bytes=1000, segment_bytes=300, when_full="refuse") as spool:
        n = 0
        with pytest.raises(SpoolFull):
            while True:
                spool.append([rec(n, pad=40)])
                n += 1
        assert spool.pending == n
        assert spool.dropped == 0

        drain(spool)
        assert spool.append([rec(1000, pad=40)]) == 1
        assert ids(spool.read(10).records) == ["r1000"]


def test_a_second_open_of_the_same_directory_is_refused(tmp_path):
    with Spool(tmp_path), pytest.raises(SpoolLocked):
        Spool(tmp_path)


def test_it_knows_the_ts_of_its_oldest_unshipped_record(tmp_path):
    with Spool(tmp_path) as spool:
        assert spool.oldest_ts() is None
        spool.append(
            [{"record_id": "a", "ts": "2025-03-01T10:00:00+08:00"}, {"record_id": "b", "ts": "2025-03-02T00:00:00Z"}]
        )
        first = spool.oldest_ts()
        spool.ack(spool.read(1))

        assert first is not None and first.isoformat() == "2025-03-01T10:00:00+08:00"
        assert str(spool.oldest_ts()) == "2025-03-02 00:00:00+00:00"


CHILD = """
import sys
from wire.spool import Spool
spool = Spool(sys.argv[1], segment_bytes=20_000)
n = 0
while True:
    spool.append([{"record_id": f"r{n + i}", "ts": "2025-03-01T10:00:00Z", "pad": "x" * 200} for i in range(7)])
    n += 7
    print("wrote", n, flush=True)
    if n % 70 == 0:
        batch = spool.read(35)
        print("acking", batch.end_seq, flush=True)
        spool.ack(batch)
        print("acked", spool.acked_seq, flush=True)
"""
ACK_BATCH = 35  # the most records the child acknowledges at once


def crashed_child(directory: Path, kill_at_ack: int | None) -> list[tuple[str, int]]:
    """Run CHILD on the directory and SIGKILL it: 0.8 s after its first write, or as soon as it starts its
    `kill_at_ack`th acknowledgement (so the kill most likely lands inside the cursor's write).
    What it reported, as (word, number) lines."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(directory)], stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[2]
    )
    assert child.stdout is not None
    lines: list[str] = []
    if kill_at_ack is None:
        # Killed 0.8 s after it started writing (its start, imports included, takes longer on a
        # loaded machine: a fixed time from the launch could kill it before its first record).
        line = child.stdout.readline()
        assert line, "the child ended"
        lines.append(line)
        time.sleep(0.8)
    else:
        while sum(line.startswith("acking") for line in lines) < kill_at_ack:
            line = child.stdout.readline()
            assert line, "the child ended"
            lines.append(line)
    os.kill(child.pid, signal.SIGKILL)  # mid-write or mid-acknowledgement
    child.wait()
    lines += child.stdout.read().splitlines()
    return [(word, int(number)) for word, number in (line.split() for line in lines if line.strip())]


@pytest.mark.slow
@pytest.mark.parametrize("kill_at_ack", [None, 3, 12])
def test_a_killed_writer_and_reader_resumes_between_the_last_ack_and_the_first_unacknowledged(tmp_path, kill_at_ack):
    reported = crashed_child(tmp_path, kill_at_ack)
    written = max((n for word, n in reported if word == "wrote"), default=0)
    acked = max((n for word, n in reported if word == "acked"), default=0)  # acknowledged, and told so
    # An acknowledgement started and not reported done may or may not have reached the disk.
    acking = max((n for word, n in reported if word == "acking"), default=0)
    unacked = max(acked, acking)  # no record from here on was ever acknowledged
    assert written, "the child wrote nothing"

    with Spool(tmp_path, segment_bytes=20_000) as spool:
        got = drain(spool, 1000)
    seqs = [int(record_id[1:]) for record_id in got]
    first = seqs[0] if seqs else spool.next_seq

    assert seqs == list(range(first, first + len(seqs)))  # in order, none missing between, none twice
    assert acked <= first <= unacked, (acked, first, unacked)  # resumed between the last ack and the first unacked
    lost = len(set(range(unacked, written)) - set(seqs))  # told durable, never acknowledged, not read back
    duplicates = sum(seq < unacked for seq in seqs)  # read again though handed to an acknowledgement
    assert lost == 0, f"{lost} records lost: wrote {written}, acked {acked}, resumed at {first}"
    assert duplicates <= ACK_BATCH and duplicates == unacked - first, (duplicates, acked, first, unacked)
