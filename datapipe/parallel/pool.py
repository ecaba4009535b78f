"""Chunks and the hand-off primitives between a stage's workers and its consumer.

A thread-to-thread round trip costs about 88 µs on the 2-vCPU machines we measure on
(docs/architecture.md, "Chunks"), so parallel stages never hand single elements between
threads: a worker takes a *chunk* of input elements, processes it, and hands back one
``Chunk``. Chunk sizes grow from 1 (a first element comes fast) towards a target
duration of work per chunk (``ChunkSizer``). The threads themselves are the executors'
(``executors.py``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from datapipe._positions import Failed

# How long a waiting thread sleeps before re-checking the stop flag (seconds).
POLL_S = 0.05
# Target wall time of work per chunk: large against the ~88 µs hand-off, small enough that
# a deterministic consumer is not held up long behind one chunk.
TARGET_CHUNK_S = 0.004
# ... and with worker processes, whose round trip (pipe, pickle, shared-memory segment)
# costs ~0.1-0.3 ms here: larger chunks keep it at ~1% of the work.
PROCESS_CHUNK_S = 0.02
MAX_CHUNK = 4096

# The deadline of the close() running on this thread (see ``close_deadline``).
_closing = threading.local()


@contextlib.contextmanager
def close_deadline(timeout: float = 1.0) -> Iterator[None]:
    """Closes nested in this block share one deadline for joining their threads.

    A pipeline is closed from its outermost stage inwards, each stage joining its threads
    before closing its input; with a deadline per stage, N stages whose threads are blocked
    (in a user function, or on an input that is not closed yet) took N times ``timeout``.
    """
    if getattr(_closing, "deadline", None) is not None:
        yield
        return
    _closing.deadline = time.monotonic() + timeout
    try:
        yield
    finally:
        _closing.deadline = None


class ChunkSizer:
    """Chooses how many elements the next chunk holds.

    Starts at 1 and at most doubles per chunk (so the first elements and a ``take(1)``
    never wait on a large chunk), towards ``target_s`` of work per element as the stage's
    meter measures it (``stage.Meter.per_elem_s``: a moving average of each finished
    chunk's wall time per element). ``limit`` caps it (the RAM budget, the op's needs).
    """

    def __init__(self, meter: Any, target_s: float = TARGET_CHUNK_S, max_chunk: int = MAX_CHUNK):
        self.meter, self.target_s, self.max_chunk = meter, target_s, max_chunk
        self.size = 1

    def next_size(self, limit: int | None = None) -> int:
        want = self.max_chunk
        per = self.meter.per_elem_s
        if per is not None and per > 0:
            want = int(self.target_s / per)
        size = max(1, min(want, self.size * 2, self.max_chunk))
        self.size = size
        if limit is not None:
            size = max(1, min(size, limit))
        return size


class Chunk:
    """One unit of hand-off: the results of a run of consecutive input elements.

    Attributes:
        start: index of the chunk's first input element in the lane's input stream.
        size: number of input elements taken for it.
        skip: how many of them were consumed before a restore (``items`` holds the rest).
        state_before: the input's state before the chunk was taken (replayable lanes).
        inputs: the elements taken (stored-state lanes and identity lanes; see replay.py).
        items: results; a failed element is a ``Failed`` in its place.
        done: results are ready.
        consumed: how many items the consumer has taken.
        reserved: bytes reserved against the RAM budget.
        input_error: the input raised while this chunk was taken (the error until it is
            delivered as a ``Failed`` item, then True); ``error_text`` its message.
    """

    __slots__ = (
        "start",
        "size",
        "skip",
        "state_before",
        "inputs",
        "items",
        "done",
        "consumed",
        "reserved",
        "input_error",
        "error_text",
        "failed",
    )

    def __init__(self, start: int, state_before: Any):
        self.start, self.state_before = start, state_before
        self.size = 0
        self.skip = 0
        self.inputs: Any = ()
        self.items: list = []
        self.done = False
        self.consumed = 0
        self.reserved = 0
        self.input_error: Any = None
        self.error_text: str | None = None
        self.failed = False  # some item is a Failed


def take_ready(items: list, start: int, n: int) -> tuple[list, BaseException | None, int]:
    """From ``items[start:]``, the elements before the first ``Failed`` (at most ``n``).

    Returns (elements, error or None, new position). The error is returned only when it is
    the very next item, so good elements are always delivered before a failure. A
    control-flow exception the function raised (``KeyboardInterrupt``, ``SystemExit``,
    ``GeneratorExit``: not an ``Exception``) is no element's failure: the position stays
    at that element, so a state taken after it (the public iterator closes on it) computes
    the element again on resume, as a sequential ``map`` does.
    """
    out: list = []
    i, end = start, min(len(items), start + n)
    while i < end:
        x = items[i]
        if type(x) is Failed:
            if not out:
                # Drop our reference: once raised, the error's traceback holds the consumer's
                # frames (and so the public iterator); a worker-reachable reference would keep
                # the pipeline alive after the consumer let go of it.
                items[i] = None
                err = x.error
                return [], err, i if not isinstance(err, Exception) else i + 1
            break
        out.append(x)
        i += 1
    return out, None, i
