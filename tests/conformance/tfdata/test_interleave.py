"""tf.data's ``interleave`` kernel tests (``kernel_tests/interleave_test.py``)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import datapipe as dp
from datapipe.errors import PipelineError

from ._support import assert_produces


def interleave_order(lists, cycle_length, block_length):
    """tf.data's interleave order over ``lists`` (the role of upstream ``_interleave``):
    ``cycle_length`` slots, each refilled from the queue of lists when the cycle finds it
    empty, ``block_length`` elements from a slot per visit."""
    queue = [iter(x) for x in lists]
    slots = [queue.pop(0) if queue else None for _ in range(cycle_length)]
    out = []
    while any(s is not None for s in slots) or queue:
        for i in range(cycle_length):
            if slots[i] is None:
                if not queue:
                    continue
                slots[i] = queue.pop(0)
            for _ in range(block_length):
                try:
                    out.append(next(slots[i]))
                except StopIteration:
                    slots[i] = None
                    break
    return out


def repeat_lists(values, count):
    """``[x] * x`` for each ``x`` of ``values`` tiled ``count`` times (upstream ``_repeat``)."""
    return [[int(v)] * int(v) for v in np.tile(values, count)]


@pytest.mark.parametrize(
    "input_values,cycle_length,block_length,expected",
    [
        ([4, 5, 6], 1, 1, [4, 4, 4, 4, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6,
                           4, 4, 4, 4, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6]),
        ([4, 5, 6], 2, 1, [4, 5, 4, 5, 4, 5, 4, 5, 5, 6, 6, 4, 6, 4, 6,
                           4, 6, 4, 6, 5, 6, 5, 6, 5, 6, 5, 6, 5, 6, 6]),
        ([4, 5, 6], 2, 3, [4, 4, 4, 5, 5, 5, 4, 5, 5, 6, 6, 6, 4, 4, 4,
                           6, 6, 6, 4, 5, 5, 5, 6, 6, 6, 5, 5, 6, 6, 6]),
        ([4, 5, 6], 7, 2, [4, 4, 5, 5, 6, 6, 4, 4, 5, 5, 6, 6, 4, 4, 5,
                           5, 6, 6, 4, 4, 5, 5, 6, 6, 5, 6, 6, 5, 6, 6]),
        ([4, 0, 6], 2, 1, [4, 4, 6, 4, 6, 4, 6, 6, 4, 6, 4, 6, 4, 4, 6, 6, 6, 6, 6, 6]),
    ],
    ids=["1", "2", "3", "4", "5"],
)  # fmt: skip
def test_python_implementation(input_values, cycle_length, block_length, expected):
    """kernel_tests/interleave_test.py::InterleaveTest.testPythonImplementation: the
    reference order these tests compare with, against upstream's literals; and datapipe's
    interleave gives the same order."""
    lists = repeat_lists(input_values, 2)
    assert interleave_order(lists, cycle_length, block_length) == expected
    ds = (
        dp.from_tensor_slices(np.int64(input_values))
        .repeat(2)
        .interleave(lambda x: dp.from_tensors(x).repeat(x), cycle_length, block_length)
    )
    assert [int(x) for x in ds] == expected


INTERLEAVE_CASES = [
    ([4, 5, 6], 1, 3, None), ([4, 5, 6], 1, 3, 1), ([4, 5, 6], 2, 1, None),
    ([4, 5, 6], 2, 1, 1), ([4, 5, 6], 2, 1, 2), ([4, 5, 6], 2, 3, None),
    ([4, 5, 6], 2, 3, 1), ([4, 5, 6], 2, 3, 2), ([4, 5, 6], 7, 2, None),
    ([4, 5, 6], 7, 2, 1), ([4, 5, 6], 7, 2, 3), ([4, 5, 6], 7, 2, 5),
    ([4, 5, 6], 7, 2, 7), ([], 2, 3, None), ([0, 0, 0], 2, 3, None),
    ([4, 0, 6], 2, 3, None), ([4, 0, 6], 2, 3, 1), ([4, 0, 6], 2, 3, 2),
]  # fmt: skip


@pytest.mark.parametrize(
    "input_values,cycle_length,block_length,num_parallel_calls",
    INTERLEAVE_CASES,
    ids=[str(i + 1) for i in range(len(INTERLEAVE_CASES))],
)
def test_interleave_dataset(input_values, cycle_length, block_length, num_parallel_calls):
    """kernel_tests/interleave_test.py::InterleaveTest.testInterleaveDataset."""
    ds = (
        dp.from_tensor_slices(np.int64(input_values))
        .repeat(2)
        .interleave(
            lambda x: dp.from_tensors(x).repeat(x), cycle_length, block_length, num_parallel_calls
        )
    )
    expected = interleave_order(repeat_lists(input_values, 2), cycle_length, block_length)
    assert_produces(ds, [np.int64(v) for v in expected])


def check_numerics(x):
    if np.isnan(x):
        raise ValueError("message : Tensor had NaN values")
    return x


ERROR_CASES = [
    (1, 3, None), (1, 3, 1), (2, 1, None), (2, 1, 1), (2, 1, 2), (2, 3, None), (2, 3, 1),
    (2, 3, 2), (7, 2, None), (7, 2, 1), (7, 2, 3), (7, 2, 5), (7, 2, 7),
]  # fmt: skip


@pytest.mark.parametrize(
    "cycle_length,block_length,num_parallel_calls",
    ERROR_CASES,
    ids=[str(i + 1) for i in range(len(ERROR_CASES))],
)
def test_interleave_dataset_error(cycle_length, block_length, num_parallel_calls):
    """kernel_tests/interleave_test.py::InterleaveTest.testInterleaveDatasetError: each
    NaN input element fails at its place; the others come through in order."""
    input_values = np.float32([1.0, np.nan, 2.0, np.nan, 3.0])
    ds = (
        dp.from_tensor_slices(input_values)
        .map(check_numerics)
        .interleave(dp.from_tensors, cycle_length, block_length, num_parallel_calls)
    )
    it = iter(ds)
    for value in input_values:
        if np.isnan(value):
            with pytest.raises(PipelineError, match="message"):
                next(it)
        else:
            assert next(it) == value
    with pytest.raises(StopIteration):
        next(it)


def _coordinated_sloppy_dataset(
    input_values, cycle_length, block_length, num_parallel_calls, deterministic=False
):
    """Upstream ``_make_coordinated_sloppy_dataset``: elements wait for an event, so the
    test decides what can be produced. Upstream releases one element at a time, which
    needs a thread per open element; here workers compute chunks of one dataset and a
    waiting element holds its worker (D-TF-8), so events are per input element."""
    tiled = np.tile(input_values, 2).tolist()
    events = {k: threading.Event() for k in range(len(tiled))}

    def map_fn(k, x):
        if not events[int(k)].wait(10.0):
            raise TimeoutError(f"the dataset of input element {int(k)} was never released")
        return x * x

    def interleave_fn(k, x):
        return dp.from_tensors(x).repeat(x).map(lambda v: map_fn(k, v))

    ds = (
        dp.from_tensor_slices(np.int64(input_values))
        .repeat(2)
        .enumerate()
        .interleave(interleave_fn, cycle_length, block_length, num_parallel_calls)
    )
    opts = dp.Options(deterministic=deterministic)
    return iter(ds.with_options(opts)), events, tiled


IN_ORDER = [
    ([4, 5, 6], 2, 1, 1), ([4, 5, 6], 2, 1, 2), ([4, 5, 6], 2, 3, 1), ([4, 5, 6], 2, 3, 2),
    ([4, 5, 6], 3, 2, 1), ([4, 5, 6], 3, 2, 2), ([4, 5, 6], 3, 2, 3), ([4, 0, 6], 2, 3, 1),
    ([4, 0, 6], 2, 3, 2),
]  # fmt: skip


@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize(
    "input_values,cycle_length,block_length,num_parallel_calls",
    IN_ORDER,
    ids=[str(i + 1) for i in range(len(IN_ORDER))],
)
def test_sloppy_interleave_in_order(
    input_values, cycle_length, block_length, num_parallel_calls, deterministic
):
    """kernel_tests/interleave_test.py::InterleaveTest.testSkipEagerSloppyInterleaveInOrder:
    every element released (D-TF-8): deterministic, the exact interleave order; not,
    the same elements."""
    it, events, tiled = _coordinated_sloppy_dataset(
        input_values, cycle_length, block_length, num_parallel_calls, deterministic
    )
    for e in events.values():
        e.set()
    expected = [
        v * v for v in interleave_order(repeat_lists(input_values, 2), cycle_length, block_length)
    ]
    with it:
        out = [int(x) for x in it]
    assert out == expected if deterministic else sorted(out) == sorted(expected)


OUT_OF_ORDER = [
    ([4, 5, 6], 2, 1, 2),
    ([4, 5, 6], 2, 3, 2),
    ([4, 5, 6], 3, 2, 3),
    ([4, 0, 6], 2, 3, 2),
]


@pytest.mark.parametrize(
    "input_values,cycle_length,block_length,num_parallel_calls",
    OUT_OF_ORDER,
    ids=[str(i + 1) for i in range(len(OUT_OF_ORDER))],
)
def test_sloppy_interleave_out_of_order(
    input_values, cycle_length, block_length, num_parallel_calls
):
    """kernel_tests/interleave_test.py::InterleaveTest.testSkipEagerSloppyInterleaveOutOfOrder:
    with deterministic=False the elements that are ready come before an earlier one that
    is not: the first input element's dataset waits until every other element was read
    (released per input element: D-TF-8)."""
    it, events, tiled = _coordinated_sloppy_dataset(
        input_values, cycle_length, block_length, num_parallel_calls
    )
    for k in range(1, len(tiled)):
        events[k].set()
    rest = sorted(v * v for v in tiled[1:] for _ in range(v))
    with it:
        assert sorted(int(next(it)) for _ in range(len(rest))) == rest
        events[0].set()
        assert [int(x) for x in it] == [tiled[0] ** 2] * tiled[0]


def test_interleave_sparse_as_dense():
    """kernel_tests/interleave_test.py::InterleaveTest.testInterleaveSparse (the sparse
    value made dense, as its interleave function does first)."""

    def map_fn(i):
        dense = np.zeros((2, 2), np.int64)
        dense[0, 0], dense[1, 1] = i, -i
        return dense

    ds = dp.range(10).map(map_fn).interleave(dp.from_tensor_slices, cycle_length=1)
    expected = [np.array([i, 0] if j % 2 == 0 else [0, -i]) for i in range(10) for j in range(2)]
    assert_produces(ds, expected)
