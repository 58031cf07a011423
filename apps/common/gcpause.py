"""Pausing Python's cyclic garbage collector around work that allocates many objects and makes no cycles.

An ingest batch allocates tens of thousands of tuples and lists that stay alive until the
request ends; the collector walks them again at every collection it triggers (2 to 3 us a
record, 15% of an ingest worker's CPU, docs/benchmarks.md). Reference counting still frees
everything; a cycle made meanwhile waits for the next collection after the pause.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """The collector off for the block; nested and concurrent blocks (threads) keep it off until
    the last one ends, which restores what the first one found."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
