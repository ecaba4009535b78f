"""tf.data's ``filter`` kernel tests (``kernel_tests/filter_test.py``), against datapipe."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp
from datapipe.errors import PipelineError, RandomAccessError

from ._support import VERIFY_FNS, assert_produces, verify_checkpoint

COMPONENTS = (
    np.arange(7, dtype=np.int64),
    np.array([[1, 2, 3]], dtype=np.int64) * np.arange(7, dtype=np.int64)[:, np.newaxis],
    np.array(37.0, dtype=np.float64) * np.arange(7),
)


@pytest.mark.parametrize("count,modulus", [(14, 2), (4, 18), (0, 1)])
def test_filter_dataset(count, modulus):
    """kernel_tests/filter_test.py::FilterTest.testFilterDataset."""
    ds = (
        dp.from_tensor_slices(COMPONENTS)
        .map(lambda x, y, z: (np.square(x), np.square(y), np.square(z)))
        .repeat(count)
        .filter(lambda x, _y, _z: np.equal(np.mod(x, modulus), 0))
    )
    assert [s.shape for s in ds.element_spec] == [c.shape[1:] for c in COMPONENTS]
    expected = [
        tuple(c[i] ** 2 for c in COMPONENTS)
        for _ in range(count)
        for i in [x for x in range(7) if x**2 % modulus == 0]
    ]
    assert_produces(ds, expected)


def test_filter_range():
    """kernel_tests/filter_test.py::FilterTest.testFilterRange."""
    ds = dp.range(4).filter(lambda x: np.not_equal(np.mod(x, 3), 2))
    assert_produces(ds, [np.int64(0), np.int64(1), np.int64(3)])


def test_filter_dict():
    """kernel_tests/filter_test.py::FilterTest.testFilterDict."""
    ds = (
        dp.range(10)
        .map(lambda x: {"foo": x * 2, "bar": x**2})
        .filter(lambda d: np.equal(d["bar"] % 2, 0))
        .map(lambda d: d["foo"] + d["bar"])
    )
    assert_produces(ds, [(i * 2 + i**2) for i in range(10) if not (i**2) % 2])


def test_use_step_container_in_filter():
    """kernel_tests/filter_test.py::FilterTest.testUseStepContainerInFilter (the
    predicate maps over its row, as ``tf.map_fn`` does)."""
    input_data = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int64)

    def predicate(xs):
        squared_xs = np.array([x * x for x in xs])
        return np.equal(np.sum(squared_xs), 1 + 4 + 9)

    ds = dp.from_tensor_slices([[1, 2, 3], [4, 5, 6]]).filter(predicate)
    assert_produces(ds, [input_data[0]])


def test_short_circuit():
    """kernel_tests/filter_test.py::FilterTest.testShortCircuit."""
    ds = dp.zip((dp.range(10), dp.from_tensors(True).repeat(None))).filter(lambda x, y: y)
    assert_produces(ds, [(i, True) for i in range(10)])


def test_parallel_filters():
    """kernel_tests/filter_test.py::FilterTest.testParallelFilters."""
    ds = dp.range(10).filter(lambda x: np.equal(x % 2, 0))
    iterators = [iter(ds) for _ in range(10)]
    assert [int(next(it)) for it in iterators] == [0] * 10


def test_predicate_fail_with_error_context():
    """kernel_tests/filter_test.py::FilterTest.testPredicateFailWithErrorContext (an
    integer division by zero in the predicate; the error names the transformation)."""
    ds = dp.from_tensors(42).filter(lambda x: (int(x) // 0) > 0)
    with pytest.raises(PipelineError, match=r"^filter at element 0: ZeroDivisionError"):
        next(iter(ds))


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
def test_checkpoint(verify_fn):
    """kernel_tests/filter_test.py::FilterCheckpointTest.test."""
    num_outputs = sum(x % 3 != 2 for x in range(100))
    verify_checkpoint(
        lambda: dp.range(100).filter(lambda x: np.not_equal(np.mod(x, 3), 2)),
        num_outputs,
        verify_fn,
    )


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
def test_checkpoint_dict(verify_fn):
    """kernel_tests/filter_test.py::FilterCheckpointTest.testDict."""

    def build():
        return (
            dp.range(10)
            .map(lambda x: {"foo": x * 2, "bar": x**2})
            .filter(lambda d: np.equal(d["bar"] % 2, 0))
            .map(lambda d: d["foo"] + d["bar"])
        )

    verify_checkpoint(build, sum((x**2) % 2 == 0 for x in range(10)), verify_fn)


def test_global_shuffle_then_filter():
    """kernel_tests/filter_test.py::FilterGlobalShuffleTest.testShuffleFilter."""
    ds = dp.range(100).global_shuffle().filter(lambda x: np.equal(x % 2, 0))
    assert_produces(ds, [np.int64(x) for x in range(0, 100, 2)], unordered=True)


def test_filter_then_global_shuffle():
    """kernel_tests/filter_test.py::FilterGlobalShuffleTest.testFilterShuffle (refused
    when the pipeline is built, naming the op that lost random access)."""
    ds = dp.range(100).filter(lambda x: np.equal(x % 2, 0))
    with pytest.raises(RandomAccessError, match="lost random access at op 'filter'"):
        ds.global_shuffle()


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
@pytest.mark.parametrize("reshuffle_each_iteration", [True, False])
def test_global_shuffle_checkpoint(verify_fn, reshuffle_each_iteration):
    """kernel_tests/filter_test.py::FilterGlobalShuffleCheckpointTest.testShuffleFilter."""

    def build():
        return (
            dp.range(10)
            .global_shuffle(seed=42, reshuffle_each_iteration=reshuffle_each_iteration)
            .filter(lambda x: np.equal(x % 2, 0))
        )

    verify_checkpoint(build, 5, verify_fn, unordered=reshuffle_each_iteration)
