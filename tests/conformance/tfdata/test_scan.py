"""tf.data's ``scan`` kernel tests (``kernel_tests/scan_test.py``)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import datapipe as dp
from datapipe._spec import static_dim
from datapipe.errors import PipelineError

from ._support import VERIFY_FNS, assert_produces, verify_checkpoint


@pytest.mark.parametrize(
    "start,step,take", [(0, 1, 10), (0, 1, 0), (10, 1, 10), (10, 2, 10), (10, -1, 10), (10, -2, 10)]
)
def test_count(start, step, take):
    """kernel_tests/scan_test.py::ScanTest.testCount."""
    ds = dp.from_tensors(0).repeat().scan(start, lambda state, _: (state + step, state)).take(take)
    expected = [e for e, _ in zip(itertools.count(start, step), range(take))]
    assert [int(x) for x in ds] == expected


def test_fibonacci():
    """kernel_tests/scan_test.py::ScanTest.testFibonacci (the state a list, the function
    returning a list pair: tf.data's structure rule makes it a tuple)."""
    ds = dp.from_tensors(1).repeat(None).scan([0, 1], lambda a, _: ([a[1], a[0] + a[1]], a[1]))
    it = iter(ds)
    assert [int(next(it)) for _ in range(6)] == [1, 1, 2, 3, 5, 8]


def test_tensor_array_simple():
    """kernel_tests/scan_test.py::ScanTest.testTensorArraySimple (a growing array state in
    place of a TensorArray)."""
    ds = dp.range(5).scan(np.array([-1]), lambda ta, x: (np.append(ta, x), ta))
    expected = [[-1], [-1, 0], [-1, 0, 1], [-1, 0, 1, 2], [-1, 0, 1, 2, 3]]
    assert_produces(ds, [np.array(e) for e in expected], iterations=2)


def test_tensor_array_with_cond_reset():
    """kernel_tests/scan_test.py::ScanTest.testTensorArrayWithCondReset."""

    def scan_fn(ta, x):
        updated = np.append(ta, x)
        return (np.zeros([0], np.int64) if x % 3 == 0 else updated), updated

    ds = dp.range(6).scan(np.array([-1]), scan_fn)
    expected = [[-1, 0], [1], [1, 2], [1, 2, 3], [4], [4, 5]]
    assert_produces(ds, [np.array(e) for e in expected], iterations=2)


def test_changing_state_shape():
    """kernel_tests/scan_test.py::ScanTest.testChangingStateShape: a state that grows in
    length and in rank. The spec is the first output's, its sizes only seen (D-TF-13)."""

    def scan_fn(state, input_value):
        return (np.concatenate([state[0], state[0]]), np.expand_dims(state[1], 0)), (
            state,
            input_value,
        )

    ds = dp.from_tensors(0).repeat(5).scan(([0], 1), scan_fn)
    (vector_spec, _), value_spec = ds.element_spec
    assert static_dim(vector_spec.shape[0]) is None  # D-TF-13: seen, not known
    assert value_spec.shape == ()
    out = list(ds)
    assert len(out) == 5
    for i, ((longer_vector, larger_rank), _) in enumerate(out):
        assert longer_vector.tolist() == [0] * (2**i)
        assert np.array_equal(larger_rank, np.array(1, ndmin=i)) and larger_rank.ndim == i


def test_incorrect_state_type():
    """kernel_tests/scan_test.py::ScanTest.testIncorrectStateType (found at the first
    element, not when built: the function is not traced, D-TF-13)."""
    ds = dp.range(10).scan(np.int32(1), lambda state, _: (np.int64(1), state))
    with pytest.raises(
        PipelineError, match="element types do not match the initial state: int64 .* int32"
    ):
        next(iter(ds))


def test_incorrect_return_type():
    """kernel_tests/scan_test.py::ScanTest.testIncorrectReturnType (at the first element:
    D-TF-13)."""
    ds = dp.range(10).scan(np.int32(1), lambda unused_state, unused_input: np.int64(1))
    with pytest.raises(PipelineError, match=r"scan_func must return a pair \(new_state, output"):
        next(iter(ds))


def test_preserve_cardinality():
    """kernel_tests/scan_test.py::ScanTest.testPreserveCardinality."""

    def scan_fn(state, val):
        raise StopIteration()

    with pytest.raises(PipelineError, match="scan at element 0: StopIteration"):
        next(iter(dp.from_tensors(0).scan(np.int32(1), scan_fn)))


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
def test_checkpoint(verify_fn):
    """kernel_tests/scan_test.py::ScanCheckpointTest.test."""

    def build():
        ds = dp.from_tensors(1).repeat(10)
        return ds.scan([0, 1], lambda a, _: ([a[1], a[0] + a[1]], a[1]))

    verify_checkpoint(build, 10, verify_fn)
    assert [int(x) for x in build()] == [1, 1, 2, 3, 5, 8, 13, 21, 34, 55]
