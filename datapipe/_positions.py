"""Failures as positions: what ops with several inputs (or that count elements) need.

The iterator protocol's rule for errors (``OpIterator.next_chunk``): a call that raises
stands for exactly one element of the stream — the next one, which failed — and the next
call continues after it. So a failing element keeps its *position*: ``zip`` drops the
tuple at that position and stays aligned, ``enumerate``/``take``/``skip``/``shard`` count
it, exactly as their random-access paths (which fetch by index) do.

Ops that read ahead from several inputs (``zip``, ``sample_from_datasets``,
``choose_from_datasets``) buffer what they read, failures included: a ``Failed`` entry
holds a failure's place in a buffer, so nothing read before or after it is lost. In an
iterator state a failure is written as its message (``buffer_to_state``), so every state
stays writable by ``save_state``; a restored failure raises a ``PipelineError`` with that
message at the same position.
"""

from __future__ import annotations

import traceback
from typing import overload

from datapipe._iterator import OpIterator
from datapipe.errors import PipelineError, RestoredFailure


class Failed:
    """The place of an element whose production raised ``error``: an entry of a list of
    elements (a parallel stage's results, a multi-input op's read-ahead buffer, a service
    worker's reply) that the consumer raises when it reaches that place.

    ``Failed(error)`` keeps the error as it is: a parallel stage raises it as soon as the
    consumer reaches it and then drops its reference (``parallel.pool.take_ready``), so the
    frames stay there for a debugger. ``Failed.buffered(error)`` detaches it from its frames
    first (``detach``), for an entry that a buffer may hold for long: every frame of a
    traceback links to its caller, up to the ops that hold the buffer and the consumer's
    ``Iterator``, so a kept traceback would be a reference cycle holding the whole
    pipeline, and its threads, alive after the consumer dropped it (until a gc run)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException):
        self.error = error

    @classmethod
    def buffered(cls, error: BaseException) -> Failed:
        """A ``Failed`` whose error is detached from its frames (see the class)."""
        return cls(detach(error))


def detach(error: BaseException) -> BaseException:
    """``error`` (and its causes) without traceback frames; the traceback is kept as text
    in a note (shown below the error when it is raised later)."""
    text = "".join(traceback.format_exception(error)).rstrip()
    seen: set[int] = set()
    had_frames = False
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        had_frames = had_frames or e.__traceback__ is not None
        e.__traceback__ = None
        e = e.__cause__ or e.__context__
    if had_frames and hasattr(error, "add_note"):  # Python >= 3.11
        error.add_note(f"Where it failed (kept as text while it waited):\n{text}")
    return error


def read_positions(it: OpIterator, buf: list, want: int, exact: bool) -> tuple[bool, int]:
    """Read ``it`` into ``buf`` until ``buf`` holds ``want`` positions (a failure takes one,
    as a ``Failed`` entry); with ``exact=False`` stop after the first call that returns
    something or raises. Returns (False once ``it`` has ended (returned ``[]``), the number
    of failures appended). ``KeyboardInterrupt`` and ``SystemExit`` pass through."""
    failures = 0
    while len(buf) < want:
        try:
            got = it.next_chunk(want - len(buf))
        except Exception as e:  # noqa: BLE001 - kept at its position, raised by the caller
            buf.append(Failed.buffered(e))  # detached from its frames (see Failed)
            failures += 1
            if not exact:
                break
            continue
        if not got:
            return False, failures
        buf.extend(got)
        if not exact:
            break
    return True, failures


def first_failure(entries: list) -> int:
    """Index of the first ``Failed`` entry of ``entries``, or ``len(entries)``."""
    for i, x in enumerate(entries):
        if type(x) is Failed:
            return i
    return len(entries)


def buffer_to_state(buf: list) -> dict:
    """``buf`` for an iterator state: the elements, and each failure's index and message."""
    failed = [[i, str(x.error)] for i, x in enumerate(buf) if type(x) is Failed]
    if not failed:
        return {"items": list(buf), "failed": []}
    return {"items": [x for x in buf if type(x) is not Failed], "failed": failed}


def buffer_from_state(state: dict, op: str) -> list:
    """Inverse of ``buffer_to_state`` (a failure comes back as a ``RestoredFailure``)."""
    if isinstance(state, list):  # a plain list of elements
        return list(state)
    buf = list(state["items"])
    for i, message in state["failed"]:
        buf.insert(int(i), Failed.buffered(error_from_state(message, op)))
    return buf


def error_to_state(error: BaseException | None) -> str | None:
    """A failure an iterator holds back (to raise on its next call) for its state: its
    message. Without it a checkpoint taken just before the failure would resume past it
    silently, and every position after it would shift."""
    return None if error is None else str(error)


@overload
def error_from_state(message: str, op: str) -> BaseException: ...
@overload
def error_from_state(message: None, op: str) -> None: ...


def error_from_state(message: str | None, op: str) -> BaseException | None:
    """Inverse of ``error_to_state``: a ``PipelineError`` with the saved message."""
    if message is None:
        return None
    return PipelineError(op, None, RestoredFailure(f"(restored from a checkpoint) {message}"))
