"""tf.data's ``unbatch`` kernel tests (``kernel_tests/unbatch_test.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp
from datapipe.errors import PipelineError, RandomAccessError

from ._support import VERIFY_FNS, assert_produces, verify_checkpoint


def test_unbatch_with_unknown_rank_input():
    """kernel_tests/unbatch_test.py::UnbatchTest.testUnbatchWithUnknownRankInput."""
    assert_produces(dp.from_tensors([0, 1, 2, 3]).unbatch(), [np.int64(i) for i in range(4)])


def test_unbatch_scalar_dataset():
    """kernel_tests/unbatch_test.py::UnbatchTest.testUnbatchScalarDataset."""
    data = dp.from_tensor_slices(tuple(np.arange(10, dtype=np.int32) for _ in range(3))).batch(2)
    assert tuple(s.dtype for s in data.element_spec) == (np.int32,) * 3
    data = data.unbatch()
    assert tuple(s.dtype for s in data.element_spec) == (np.int32,) * 3
    assert_produces(data, [(np.int32(i),) * 3 for i in range(10)])


def test_unbatch_nested_dataset():
    """kernel_tests/unbatch_test.py::UnbatchTest.testUnbatchNestedDataset."""
    data = dp.from_tensors([dp.range(10) for _ in range(10)]).unbatch().flat_map(lambda x: x)
    assert_produces(data, [np.int64(i) for i in range(10)] * 10)


def test_unbatch_dataset_with_strings():
    """kernel_tests/unbatch_test.py::UnbatchTest.testUnbatchDatasetWithStrings."""
    data = dp.from_tensor_slices(tuple(np.arange(10, dtype=np.int32) for _ in range(3)))
    data = data.map(lambda x, y, z: (x, str(y), z)).batch(2)
    assert tuple(s.dtype for s in data.element_spec) == (np.int32, object, np.int32)
    data = data.unbatch()
    assert tuple(s.dtype for s in data.element_spec) == (np.int32, object, np.int32)
    assert_produces(data, [(np.int32(i), str(i).encode(), np.int32(i)) for i in range(10)])


def test_unbatch_single_element_tuple_dataset():
    """kernel_tests/unbatch_test.py::UnbatchTest.testUnbatchSingleElementTupleDataset."""
    data = dp.from_tensor_slices(tuple((np.arange(10, dtype=np.int32),) for _ in range(3)))
    data = data.batch(2)
    assert data.element_spec[0][0].dtype == np.int32
    data = data.unbatch()
    assert_produces(data, [((np.int32(i),),) * 3 for i in range(10)])


def test_unbatch_multi_element_tuple_dataset():
    """kernel_tests/unbatch_test.py::UnbatchTest.testUnbatchMultiElementTupleDataset."""
    data = dp.from_tensor_slices(
        tuple(
            (np.arange(10 * i, 10 * i + 10, dtype=np.int32), np.array(["hi"] * 10, dtype=object))
            for i in range(3)
        )
    )
    data = data.batch(2).unbatch()
    assert [s.dtype for pair in data.element_spec for s in pair] == [np.int32, object] * 3
    assert_produces(data, [((i, b"hi"), (10 + i, b"hi"), (20 + i, b"hi")) for i in range(10)])


def test_unbatch_empty():
    """kernel_tests/unbatch_test.py::UnbatchTest.testUnbatchEmpty."""
    data = dp.from_tensors(
        (np.zeros([0], np.float32), np.zeros([0, 4], np.float32), np.zeros([0, 4, 0], np.float32))
    )
    assert_produces(data.unbatch(), [])


def test_unbatch_static_shape_mismatch():
    """kernel_tests/unbatch_test.py::UnbatchTest.testUnbatchStaticShapeMismatch."""
    data = dp.from_tensors((np.arange(7), np.arange(8), np.arange(9)))
    with pytest.raises(ValueError, match="unbatch: the components' batch dimensions differ"):
        data.unbatch()


def test_unbatch_dynamic_shape_mismatch():
    """kernel_tests/unbatch_test.py::UnbatchTest.testUnbatchDynamicShapeMismatch (values of
    unknown shape, from a generator in place of placeholders)."""
    signature = (dp.TensorSpec([None], np.int32), dp.TensorSpec(None, np.int32))
    for second in (np.arange(8).astype(np.int32), np.int32(7)):
        data = dp.from_generator(
            lambda s=second: iter([(np.arange(7).astype(np.int32), s)]), signature
        ).unbatch()
        with pytest.raises(PipelineError, match="unbatch at element 0"):
            next(iter(data))


def test_unbatch_dataset_with_uint_dtypes():
    """kernel_tests/unbatch_test.py::UnbatchTest.testUnbatchDatasetWithUintDtypes."""
    components = (
        np.tile(np.array([[0], [1], [2], [3]], dtype=np.uint8), 2),
        np.tile(np.array([[1], [2], [3], [256]], dtype=np.uint16), 2),
        np.tile(np.array([[2], [3], [4], [65536]], dtype=np.uint32), 2),
        np.tile(np.array([[3], [4], [5], [4294967296]], dtype=np.uint64), 2),
    )
    data = dp.from_tensor_slices(components).batch(2)
    dtypes = (np.uint8, np.uint16, np.uint32, np.uint64)
    assert tuple(s.dtype for s in data.element_spec) == dtypes
    data = data.unbatch()
    assert tuple(s.dtype for s in data.element_spec) == dtypes
    assert_produces(data, [tuple(c[i] for c in components) for i in range(4)])


def test_none_component():
    """kernel_tests/unbatch_test.py::UnbatchTest.testNoneComponent: a None component has
    no batch dimension and stays None in every row."""
    ds = dp.from_tensors((list(range(10)), None)).unbatch()
    assert [y for _, y in ds] == [None] * 10
    assert_produces(ds.map(lambda x, y: x), [np.int64(i) for i in range(10)])


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
def test_checkpoint(verify_fn):
    """kernel_tests/unbatch_test.py::UnbatchCheckpointTest.test."""

    def build():
        components = (
            np.arange(8),
            np.array([[1, 2, 3]]) * np.arange(8)[:, np.newaxis],
            np.array(15.0) * np.arange(8),
        )
        return dp.from_tensor_slices(components).batch(2).unbatch()

    verify_checkpoint(build, 8, verify_fn)


def test_random_access():
    """kernel_tests/unbatch_test.py::UnbatchRandomAccessTest.test."""
    ds = dp.range(10).batch(4, drop_remainder=True).unbatch()
    assert [ds[i] for i in range(8)] == list(range(8))


def test_random_access_not_drop_remainder():
    """kernel_tests/unbatch_test.py::UnbatchRandomAccessTest.testNotDropRemainder."""
    ds = dp.range(10).batch(4, drop_remainder=False).unbatch()
    with pytest.raises(RandomAccessError, match="lost random access at op 'unbatch'"):
        ds[0]


@pytest.mark.parametrize("index", [100])
def test_random_access_invalid_index(index):
    """kernel_tests/unbatch_test.py::UnbatchRandomAccessTest.testInvalidIndex (index -1 is
    the last row here, D-TF-1)."""
    ds = dp.range(10).batch(4, drop_remainder=True).unbatch()
    with pytest.raises(IndexError):
        ds[index]
    assert ds[-1] == 7  # D-TF-1
