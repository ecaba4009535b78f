"""Parallel interleave opens every empty slot ahead of the cycle (so a remote file's open
overlaps the reads of the others) without changing tf.data's order, the positions of
errors, checkpoints, or how fast close() returns."""

from __future__ import annotations

import threading
import time

import pytest

import datapipe as dp


def drain(it, limit: int | None = None) -> list:
    """Elements and errors in order, an error as ('error', its message's last part: the
    same for the original failure and for one restored from a checkpoint)."""
    out: list = []
    while limit is None or len(out) < limit:
        try:
            out.append(int(next(it)))
        except StopIteration:
            break
        except dp.PipelineError as e:
            out.append(("error", str(e.cause).rsplit(": ", 1)[-1]))
    return out


def outcome(ds) -> list:
    it = iter(ds)
    try:
        return drain(it)
    finally:
        it.close()


def lengths_pipeline(calls, fail_open=frozenset(), fail_input=frozenset()):
    def src(x):
        if int(x) in fail_input:
            raise ValueError(f"input {int(x)}")
        return x

    def sub(n):
        n = int(n)
        if n in fail_open:
            raise ValueError(f"open {n}")
        return dp.range(100 * n, 100 * n + (n * 7) % 5 + 1)

    return dp.range(11).map(src).interleave(sub, cycle_length=3, num_parallel_calls=calls)


@pytest.mark.parametrize(
    "fail_open, fail_input", [((), ()), ({4}, ()), ((), {5}), ({1, 7}, {9}), ({0, 1, 2}, ())]
)
def test_order_and_error_positions_are_the_sequential_ones(fail_open, fail_input):
    seq = outcome(lengths_pipeline(None, set(fail_open), set(fail_input)))
    par = outcome(lengths_pipeline(3, set(fail_open), set(fail_input)))
    assert par == seq
    assert sum(isinstance(x, tuple) for x in seq) == len(fail_open) + len(fail_input)


def test_every_slot_is_open_after_the_first_element():
    ds = dp.range(8).interleave(lambda i: dp.range(3), cycle_length=4, num_parallel_calls=2)
    it = iter(ds)
    next(it)
    assert sum(s is not None for s in it._root.slots) == 4
    it.close()
    seq = iter(dp.range(8).interleave(lambda i: dp.range(3), cycle_length=4))
    next(seq)
    assert sum(s is not None for s in seq._root.slots) == 1  # sequential: opened on visit


def test_opens_overlap():
    """Sub-datasets whose first element takes 0.2 s: with 4 slots opened ahead, the first
    four elements arrive together, not 0.2 s apart (event order, no timing bound)."""
    started: list[int] = []
    lock = threading.Lock()

    def slow_first(n):
        def f(x):
            with lock:
                started.append(int(n))
            time.sleep(0.2)
            return x

        return dp.range(1).map(f)

    ds = dp.range(4).interleave(slow_first, cycle_length=4, num_parallel_calls=4)
    it = iter(ds)
    assert int(next(it)) == 0
    assert sorted(started) == [0, 1, 2, 3]  # all four began before the first was delivered
    assert [int(x) for x in it] == [0, 0, 0]
    it.close()


@pytest.mark.parametrize("k", range(0, 14, 2))
def test_checkpoint_with_slots_opened_ahead_and_failed_opens(k):
    def make():
        return lengths_pipeline(3, {4, 8}, {6})

    expected = outcome(make())
    assert ("error", "open 4") in expected and ("error", "input 6") in expected
    it = iter(make())
    head = drain(it, k)
    state = it.state_dict()
    it.close()
    it2 = iter(make())
    it2.load_state_dict(state)  # open slots, and a failed open waiting to be raised
    assert head + drain(it2) == expected
    it2.close()


def test_close_with_blocked_slots_opened_ahead_returns_at_the_deadline(threads):
    release = threading.Event()

    def blocked(x):
        release.wait(10)
        return x

    ds = dp.range(3).interleave(lambda i: dp.range(50).map(blocked, 2), 3, num_parallel_calls=3)
    it = iter(ds)
    consumer = threading.Thread(target=lambda: next(it, None), daemon=True)
    consumer.start()
    time.sleep(0.3)  # three slots open, their workers inside the blocked function
    t0 = time.monotonic()
    it.close()
    took = time.monotonic() - t0
    release.set()
    consumer.join(2)
    assert took < 1.7, took
    assert not consumer.is_alive()
    assert threads.settle(2.0) == []
