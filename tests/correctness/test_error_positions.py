"""Issue 11: a failing element keeps its position. With ``ignore_errors`` the output must be
the error-free output with the failing elements (and the tuples holding them) left out:
no op with several inputs may misalign them or lose an element read before or after a
failure, and ops that count elements (take/skip/shard/enumerate) count it, as their
random-access paths do.

Each case runs twice: once with inputs whose bad elements raise, once with inputs whose
bad elements are only marked (BAD); dropping the marked positions from the second run
must give the first."""

from __future__ import annotations

import os

import numpy as np
import pytest

import datapipe as dp
from datapipe.distribute.state_io import load_state, save_state

BAD = -1


def _raise(x):
    if x == BAD:
        raise ValueError("bad element")
    return x


def _values(n, bad, offset=0):
    return np.array([BAD if i in bad else offset + i for i in range(n)], dtype=np.int64)


def _source(values, failing, stream, parallel):
    ds = dp.from_tensor_slices(values)
    if stream:  # no random access below: the streaming iterators run
        ds = ds.filter(lambda x: True)
    f = _raise if failing else (lambda x: x)
    return ds.map(f, num_parallel_calls=2 if parallel else None)


def _has_bad(x):
    if isinstance(x, dict):
        return any(_has_bad(v) for v in x.values())
    if isinstance(x, tuple):
        return any(_has_bad(v) for v in x)
    return int(x) == BAD


def _plain(x):
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(_plain(v) for v in x)
    return int(x)


INPUTS = [  # (length, failing positions, offset)
    (12, {1, 5, 6}, 0),
    (10, {1, 2, 9}, 100),
    (14, {0, 7}, 200),
]

OPS = {
    "zip": lambda ins: dp.zip(ins[0], ins[1]),
    "zip3_dict": lambda ins: dp.zip({"a": ins[0], "b": (ins[1], ins[2])}),
    "sample": lambda ins: dp.sample_from_datasets(list(ins), seed=3),
    "sample_weighted": lambda ins: dp.sample_from_datasets(
        list(ins), weights=[0.6, 0.1, 0.3], seed=4
    ),
    "sample_stop": lambda ins: dp.sample_from_datasets(
        list(ins), seed=5, stop_on_empty_dataset=True
    ),
    "choose": lambda ins: dp.choose_from_datasets(
        list(ins), dp.from_tensor_slices(np.array([0, 1, 2, 1, 0, 0, 2, 2, 1, 0] * 3))
    ),
    "concatenate": lambda ins: ins[0].concatenate(ins[1]).concatenate(ins[2]),
    "enumerate": lambda ins: ins[0].enumerate(),
    "take": lambda ins: ins[0].take(7),
    "skip": lambda ins: ins[0].skip(5),
    "shard0": lambda ins: ins[0].shard(3, 0),
    "shard1": lambda ins: ins[0].shard(3, 1),
    "shard2": lambda ins: ins[0].shard(3, 2),
    "prefetch": lambda ins: ins[0].prefetch(3),
    "zip_enumerate_take": lambda ins: dp.zip(ins[0].enumerate(), ins[1]).take(8),
}


def _run(op, failing, stream, parallel):
    ins = [_source(_values(n, bad, off), failing, stream, parallel) for n, bad, off in INPUTS]
    return OPS[op](ins)


@pytest.mark.parametrize("parallel", [False, True], ids=["seq", "parallel"])
@pytest.mark.parametrize("stream", [False, True], ids=["random_access", "stream"])
@pytest.mark.parametrize("op", sorted(OPS))
def test_failures_keep_their_position(op, stream, parallel):
    expected = [_plain(x) for x in _run(op, False, stream, parallel) if not _has_bad(x)]
    it = iter(_run(op, True, stream, parallel).ignore_errors())
    got = [_plain(x) for x in it]
    assert got == expected
    n_bad = sum(_has_bad(x) for x in _run(op, False, stream, parallel))
    assert dp.ignored_count(it) == n_bad


def test_the_issue_example_zip_stays_aligned():
    def f(x):
        if x == 0:
            raise ZeroDivisionError("division by zero")
        return 1 / x

    d = dp.from_tensor_slices([1.0, 0.0, 2.0, 1.0]).map(f)
    assert [(float(a), float(b)) for a, b in dp.zip(d, d).ignore_errors()] == [
        (1.0, 1.0),
        (0.5, 0.5),
        (1.0, 1.0),
    ]


def test_zip_with_inputs_failing_at_different_positions():
    a = dp.from_tensor_slices(_values(6, {1})).map(_raise)
    b = dp.from_tensor_slices(_values(6, {3}, 10)).map(_raise)
    assert [_plain(x) for x in dp.zip(a, b).ignore_errors()] == [(0, 10), (2, 12), (4, 14), (5, 15)]


def test_zip_without_ignore_errors_raises_at_the_failing_position():
    a = dp.from_tensor_slices(_values(6, {2})).map(_raise)
    it = iter(dp.zip(a, dp.range(6)))
    assert [_plain(next(it)) for _ in range(2)] == [(0, 0), (1, 1)]
    with pytest.raises(dp.PipelineError, match="bad element"):
        next(it)
    assert [_plain(x) for x in it] == [(3, 3), (4, 4), (5, 5)]


def test_take_and_skip_split_a_dataset_without_overlap():
    # With a failing element, take(n) counted only good elements while skip(n) (read by
    # index) counted positions: element 3 went to both halves of a train/val split.
    for stream in (False, True):
        ds = _source(_values(8, {1}), True, stream, False)
        head = [_plain(x) for x in ds.take(3).ignore_errors()]
        tail = [_plain(x) for x in ds.skip(3).ignore_errors()]
        assert head == [0, 2]
        assert tail == [3, 4, 5, 6, 7]


def test_shards_partition_the_positions_whatever_fails():
    for stream in (False, True):
        ds = _source(_values(9, {1, 4}), True, stream, False)
        shares = [[_plain(x) for x in ds.shard(2, i).ignore_errors()] for i in range(2)]
        assert shares == [[0, 2, 6, 8], [3, 5, 7]]


def test_a_failing_choice_element_uses_up_its_position():
    choices = dp.from_tensor_slices(np.array([0, 1, BAD, 1, 0, 1], dtype=np.int64)).map(_raise)
    ds = dp.choose_from_datasets([dp.range(10), dp.range(100, 110)], choices)
    assert [_plain(x) for x in ds.ignore_errors()] == [0, 100, 101, 1, 102]


def test_a_failing_weights_element_keeps_the_rows_after_it():
    w = np.array([[1.0, 0.0], [0.0, 1.0], [BAD, BAD], [1.0, 0.0], [0.0, 1.0]])

    def check(row):
        if row[0] == BAD:
            raise ValueError("bad weights")
        return row

    weights = dp.from_tensor_slices(w).map(check)
    ds = dp.sample_from_datasets([dp.range(10), dp.range(100, 110)], weights=weights, seed=0)
    assert [_plain(x) for x in ds.ignore_errors()] == [0, 100, 1, 101]


@pytest.mark.parametrize("parallel", [False, True], ids=["seq", "parallel"])
@pytest.mark.parametrize("op", ["zip", "sample", "choose", "zip3_dict", "enumerate", "shard1"])
def test_checkpoints_taken_between_failures_resume_exactly(op, parallel, tmp_path):
    expected = [_plain(x) for x in _run(op, True, True, parallel).ignore_errors()]
    for k in range(1, len(expected)):
        it = iter(_run(op, True, True, parallel).ignore_errors())
        head = [_plain(next(it)) for _ in range(k)]
        path = os.path.join(tmp_path, f"s{k}")
        save_state(it.get_state(), path)  # buffered failures must be writable too
        fresh = iter(_run(op, True, True, parallel).ignore_errors())
        fresh.set_state(load_state(path))
        assert head + [_plain(x) for x in fresh] == expected, k


def _long(offset):
    values = np.arange(offset, offset + 20_000)
    values[1::3] = BAD  # a failure every third element: some wait in the buffers
    return dp.from_tensor_slices(values).map(_raise, num_parallel_calls=2)


LONG = {
    "zip": lambda: dp.zip(_long(0), _long(100_000)),
    "sample": lambda: dp.sample_from_datasets([_long(0), _long(100_000)], seed=1),
    "choose": lambda: dp.choose_from_datasets(
        [_long(0), _long(100_000)], dp.range(30_000).map(lambda x: x % 2)
    ),
}


@pytest.mark.parametrize("op", sorted(LONG))
def test_a_dropped_pipeline_holding_failures_stops_its_threads_without_gc(op, threads):
    # Buffered failures used to keep their traceback frames, whose links to the calling
    # frames made a cycle through the buffer: the pipeline and its worker threads stayed
    # alive after the consumer dropped it, until a gc run.
    import gc

    gc.collect()
    gc.disable()
    try:
        it = iter(LONG[op]().ignore_errors())
        for _ in range(50):
            next(it)
        assert threads.names()  # the parallel maps' workers run (20,000 elements each)
        del it
        assert threads.settle(2.0) == []
    finally:
        gc.enable()


def test_a_failure_that_waited_keeps_its_traceback_as_text():
    def f(x):
        if x == 2:
            raise ValueError("two")
        return x

    it = iter(dp.zip(dp.range(5).map(f), dp.range(5)))
    assert [_plain(next(it)) for _ in range(2)] == [(0, 0), (1, 1)]
    with pytest.raises(dp.PipelineError, match="two") as e:
        next(it)
    notes = "\n".join(getattr(e.value, "__notes__", []))
    assert "in f" in notes and 'raise ValueError("two")' in notes
