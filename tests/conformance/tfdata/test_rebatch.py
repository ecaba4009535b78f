"""tf.data's ``rebatch`` kernel tests (``kernel_tests/rebatch_test.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp

from ._support import VERIFY_FNS, assert_produces, verify_checkpoint


def _flat_shapes(ds):
    from datapipe import _structure as nest

    return [list(s.shape) for s in nest.flatten(ds.element_spec)]


@pytest.mark.parametrize(
    "n,batch,drop_in,sizes,drop,expected",
    [
        (8, 4, True, [2, 1, 1], False, [[None]]),
        (8, 4, True, [2, 2], True, [[2]]),
        (8, 4, True, [2, 2], False, [[2]]),
        (8, 4, False, [2, 2], False, [[None]]),
        (8, 4, False, [2, 2], True, [[2]]),
        (10, 5, True, [2, 2], False, [[None]]),
        (10, 5, True, [2, 2], True, [[2]]),
    ],
    ids=[
        "testShapeInferenceNotAllBatchSizesEqual",
        "testShapeInferenceInputBatchDimDivisible-drop",
        "testShapeInferenceInputBatchDimDivisible-keep",
        "testShapeInferenceInputBatchDimUnknown",
        "testShapeInferenceInputBatchDimUnknownWithDropRemainder",
        "testShapeInferenceInputBatchDimIndivisible",
        "testShapeInferenceInputBatchDimIndivisibleWithDropRemainder",
    ],
)
def test_shape_inference(n, batch, drop_in, sizes, drop, expected):
    """kernel_tests/rebatch_test.py::RebatchTest.testShapeInferenceNotAllBatchSizesEqual,
    testShapeInferenceInputBatchDimDivisible, testShapeInferenceInputBatchDimUnknown,
    testShapeInferenceInputBatchDimUnknownWithDropRemainder,
    testShapeInferenceInputBatchDimIndivisible,
    testShapeInferenceInputBatchDimIndivisibleWithDropRemainder (one case each, both
    drop_remainder values for the divisible one)."""
    ds = (
        dp.range(n)
        .batch(batch, drop_remainder=drop_in)
        .rebatch(batch_size=sizes, drop_remainder=drop)
    )
    assert _flat_shapes(ds) == expected


def _values(ds):
    return [np.array(b) for b in ds]


@pytest.mark.parametrize("drop_remainder", [True, False])
def test_basic(drop_remainder):
    """kernel_tests/rebatch_test.py::RebatchTest.testBasic."""
    ds = dp.range(8).batch(4, drop_remainder=True).rebatch([2, 2], drop_remainder=drop_remainder)
    assert _flat_shapes(ds) == [[2]]
    assert_produces(ds, [np.array(v) for v in [[0, 1], [2, 3], [4, 5], [6, 7]]])


def test_partial_batch():
    """kernel_tests/rebatch_test.py::RebatchTest.testPartialBatch."""
    ds = dp.range(5).batch(4, drop_remainder=False).rebatch([2, 2], drop_remainder=False)
    assert _flat_shapes(ds) == [[None]]
    assert_produces(ds, [np.array(v) for v in [[0, 1], [2, 3], [4]]])


def test_partial_batch_with_drop_remainder():
    """kernel_tests/rebatch_test.py::RebatchTest.testPartialBatchWithDropRemainder."""
    ds = dp.range(5).batch(4, drop_remainder=False).rebatch([2, 2], drop_remainder=True)
    assert _flat_shapes(ds) == [[2]]
    assert_produces(ds, [np.array(v) for v in [[0, 1], [2, 3]]])


@pytest.mark.parametrize("drop_remainder", [True, False])
def test_batch_size_greater_than_original(drop_remainder):
    """kernel_tests/rebatch_test.py::RebatchTest.testBatchSizeGreaterThanOriginal."""
    ds = dp.range(12).batch(4, drop_remainder=False).rebatch([6], drop_remainder=drop_remainder)
    assert_produces(ds, [np.arange(6), np.arange(6, 12)])


@pytest.mark.parametrize("drop_remainder", [True, False])
@pytest.mark.parametrize("batch_size", [2, 3, 4])
def test_batch_size_equal_to_original(batch_size, drop_remainder):
    """kernel_tests/rebatch_test.py::RebatchTest.testBatchSizeEqualToOriginal."""
    ds = dp.range(11).batch(batch_size, drop_remainder=drop_remainder)
    assert_produces(ds.rebatch(batch_size=batch_size, drop_remainder=False), _values(ds))


@pytest.mark.parametrize(
    "sizes,expected",
    [
        ([1, 1, 1, 1, 0], [[0], [1], [2], [3], [], [4], [5], [6], [7], []]),
        ([0, 1], [[], [0], [], [1], [], [2], [], [3], [], [4], [], [5], [], [6], [], [7], []]),
        ([1, 0], [[0], [], [1], [], [2], [], [3], [], [4], [], [5], [], [6], [], [7], []]),
    ],
    ids=["testEmptySplits", "testEmptyFirstSplits", "testEmptyLastSplits"],
)
@pytest.mark.parametrize("drop_remainder", [True, False])
def test_empty_splits(drop_remainder, sizes, expected):
    """kernel_tests/rebatch_test.py::RebatchTest.testEmptySplits, testEmptyFirstSplits,
    testEmptyLastSplits (one case each per drop_remainder)."""
    ds = dp.range(8).batch(4, drop_remainder=True).rebatch(sizes, drop_remainder=drop_remainder)
    assert _flat_shapes(ds) == [[None]]
    assert_produces(ds, [np.array(v, np.int64) for v in expected])


@pytest.mark.parametrize("drop_remainder", [True, False])
def test_empty_tensors(drop_remainder):
    """kernel_tests/rebatch_test.py::RebatchTest.testEmptyTensors."""
    ds = dp.range(8).map(lambda x: np.zeros((5, 0), np.float32)).batch(2)
    ds = ds.rebatch(batch_size=4, drop_remainder=drop_remainder)
    assert_produces(ds, [np.zeros((4, 5, 0), np.float32)] * 2)


@pytest.mark.parametrize("drop_remainder", [True, False])
def test_scalar_batch_size_input(drop_remainder):
    """kernel_tests/rebatch_test.py::RebatchTest.testScalarBatchSizeInput."""
    ds = (
        dp.range(8)
        .batch(4, drop_remainder=True)
        .rebatch(batch_size=2, drop_remainder=drop_remainder)
    )
    assert _flat_shapes(ds) == [[2]]
    assert_produces(ds, [np.array(v) for v in [[0, 1], [2, 3], [4, 5], [6, 7]]])


def test_multiple_batches():
    """kernel_tests/rebatch_test.py::RebatchTest.testMultipleBatches."""
    ds = dp.range(16).batch(2, drop_remainder=True).batch(4, drop_remainder=True)
    assert _flat_shapes(ds) == [[4, 2]]
    ds = ds.rebatch([2, 2])
    assert _flat_shapes(ds) == [[2, 2]]
    assert_produces(ds, [np.arange(4 * i, 4 * i + 4).reshape(2, 2) for i in range(4)])


def test_nested_dictionary_output():
    """kernel_tests/rebatch_test.py::RebatchTest.testNestedDictionaryOutput."""
    ds = dp.range(8).map(lambda x: {"a": x, "b": {"c": x + 1}}).batch(4, drop_remainder=True)
    ds = ds.rebatch([2, 2])
    assert _flat_shapes(ds) == [[2], [2]]
    expected = [
        {"a": np.array([i, i + 1]), "b": {"c": np.array([i + 1, i + 2])}} for i in range(0, 8, 2)
    ]
    assert_produces(ds, expected)


@pytest.mark.parametrize("drop_remainder", [True, False])
def test_ragged_dataset(drop_remainder):
    """kernel_tests/rebatch_test.py::RebatchTest.testRaggedDataset (ragged rows as
    ragged_batch makes them)."""
    values, lengths = list(range(10)), [1, 2, 3, 4]
    offsets = np.cumsum([0, *lengths])
    rows = [np.array(values[a:b]) for a, b in zip(offsets[:-1], offsets[1:])]
    ds = dp.from_tensor_slices(np.arange(4)).map(lambda i: rows[int(i)])
    ds = ds.ragged_batch(4, drop_remainder=True).map(lambda x: x).rebatch(batch_size=[2, 2])
    out = [[r.tolist() for r in b] for b in ds]
    assert out == [[[0], [1, 2]], [[3, 4, 5], [6, 7, 8, 9]]]


def test_none_dataset():
    """kernel_tests/rebatch_test.py::RebatchTest.testNoneDataset: a None component does
    not break rebatch (and stays None)."""
    ds = dp.range(4).map(lambda x: (x, None)).batch(4, drop_remainder=True).rebatch([2, 2])
    assert [(b.tolist(), none) for b, none in ds] == [([0, 1], None), ([2, 3], None)]


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
def test_checkpoint(verify_fn):
    """kernel_tests/rebatch_test.py::RebatchDatasetCheckpointTest.test."""
    verify_checkpoint(
        lambda: dp.range(64).batch(2 * 8, drop_remainder=True).rebatch(batch_size=[8, 8]),
        8,
        verify_fn,
    )
