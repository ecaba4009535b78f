"""``interleave``: tf.data's order (cycle_length, block_length), nondeterministic multisets,
defaults and validation, errors at the sub-dataset's position, the parallel interleave
opening every empty slot ahead of the cycle (a remote file's open overlaps the reads of the
others) without changing the order, errors, checkpoints or how fast ``close()`` returns,
and the worker processes of closed inputs stopped at once."""

from __future__ import annotations

import random
import threading
import time

import pytest
from harness import fail_at, worker_processes

import datapipe as dp
from datapipe.errors import PipelineError


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


pytestmark = pytest.mark.timeout(120)  # the worker-process test starts processes


def _sleepy(seed: int, scale: float = 0.0005):
    rng = random.Random(seed)
    delays = [rng.random() * scale for _ in range(4096)]

    def f(x):
        time.sleep(delays[int(x) % len(delays)])
        return int(x) * 3 + 1

    return f


def _sub(n):
    delay = _sleepy(int(n), 0.002)
    return dp.range(10 * n, 10 * n + n).map(lambda x: (delay(x), x)[1])


# Expected orders computed with tf.data 2.21 (tf.data.Dataset.range(1, k).interleave(...)).
TF_ORDER_2_2 = [10, 20, 21, 30, 31, 32, 40, 41, 50, 51, 42, 43, 52, 53, 54]


TF_ORDER_3_1 = [10, 20, 30, 21, 31, 40, 32, 41, 50, 42, 51, 60, 43, 52, 61, 53, 62, 70, 54, 63,
                71, 64, 72, 65, 73, 74, 75, 76]  # fmt: skip


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
    assert sum(s is not None for s in it.root.slots) == 4
    it.close()
    seq = iter(dp.range(8).interleave(lambda i: dp.range(3), cycle_length=4))
    next(seq)
    assert sum(s is not None for s in seq.root.slots) == 1  # sequential: opened on visit


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
    # close() gives blocked threads one shared deadline of 1 s; a close that waited for the
    # blocked functions would take their 60 s. The bound is 10x the deadline (load).
    release = threading.Event()

    def blocked(x):
        release.wait(60)
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
    assert took < 10, took
    assert not consumer.is_alive()
    assert threads.settle(2.0) == []


def test_error_in_interleave_sub_dataset_position():
    def sub(n):
        return dp.range(3).map(fail_at({1} if int(n) == 1 else set()))

    it = iter(dp.range(2).interleave(sub, cycle_length=2, num_parallel_calls=2))
    assert [int(next(it)) for _ in range(3)] == [0, 0, 1]
    with pytest.raises(PipelineError) as info:
        next(it)
    assert info.value.index == 1
    it.close()


@pytest.mark.parametrize("calls", [None, 2, 3, dp.AUTOTUNE])
def test_interleave_matches_tf_data_order(calls):
    ds = dp.range(1, 6).interleave(_sub, cycle_length=2, block_length=2, num_parallel_calls=calls)
    assert [int(x) for x in ds] == TF_ORDER_2_2
    ds = dp.range(1, 8).interleave(_sub, cycle_length=3, block_length=1, num_parallel_calls=calls)
    assert [int(x) for x in ds] == TF_ORDER_3_1


def test_interleave_nondeterministic_same_multiset():
    ds = dp.range(1, 8).interleave(
        _sub, cycle_length=3, block_length=2, num_parallel_calls=3, deterministic=False
    )
    assert sorted(int(x) for x in ds) == sorted(TF_ORDER_3_1)


def test_interleave_defaults_and_validation():
    from datapipe.parallel.autotune import cpu_count

    default = [int(x) for x in dp.range(5).interleave(lambda n: dp.range(n, n + 2))]
    explicit = dp.range(5).interleave(lambda n: dp.range(n, n + 2), cycle_length=cpu_count())
    assert default == [int(x) for x in explicit]
    one = dp.range(3).interleave(lambda n: dp.range(n, n + 2), cycle_length=1)
    assert [int(x) for x in one] == [0, 1, 1, 2, 2, 3]  # cycle_length=1 is flat_map
    with pytest.raises(ValueError, match="cycle_length must be >= 1"):
        dp.range(3).interleave(lambda n: dp.range(2), cycle_length=0)
    with pytest.raises(ValueError, match="block_length must be >= 1"):
        dp.range(3).interleave(lambda n: dp.range(2), block_length=0)


def test_processes_of_closed_interleave_inputs_stop_at_once(clean):
    # Each opened input is a new dataset: its stage's processes are not parked for later.
    seen = []

    def sub(i):
        return dp.range(10 * int(i), 10 * int(i) + 10).map(
            lambda x: int(x), 2, executor="process")  # fmt: skip

    it = iter(dp.range(6).interleave(sub, cycle_length=2, block_length=10))
    got = []
    for x in it:
        got.append(int(x))
        seen.append(len(worker_processes()))
    assert got == list(range(60))
    assert max(seen) <= 4  # two open inputs with two processes each, never more
    it.close()
