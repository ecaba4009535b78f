"""tf.data's ``from_tensors`` kernel tests (``kernel_tests/from_tensors_test.py``)."""

from __future__ import annotations

import numpy as np

import datapipe as dp

from ._support import assert_produces, assert_same


def test_from_tensors():
    """kernel_tests/from_tensors_test.py::FromTensorsTest.testFromTensors."""
    components = (np.array(1), np.array([1, 2, 3]), np.array(37.0))
    ds = dp.from_tensors(components)
    assert [s.shape for s in ds.element_spec] == [c.shape for c in components]
    assert ds.cardinality() == 1
    assert_produces(ds, [components])


def _shapes_and_dtypes(spec):
    if isinstance(spec, tuple):
        return tuple(_shapes_and_dtypes(s) for s in spec)
    return spec.shape, spec.dtype


def test_nested_structure():
    """kernel_tests/from_tensors_test.py::FromTensorsTest.testNestedStructure: the spec
    through shuffle, repeat, filter, take, map, flat_map, batch and from_tensor_slices."""
    components = (
        np.array([1, 2, 3], dtype=np.int64),
        (np.array([4.0, 5.0]), np.array([6.0, 7.0])),
        np.array([8, 9, 10], dtype=np.int64),
    )
    i64, f64 = np.dtype(np.int64), np.dtype(np.float64)
    flat = (((3,), i64), (((2,), f64), ((2,), f64)), ((3,), i64))
    ds = dp.from_tensors(components)
    assert _shapes_and_dtypes(ds.element_spec) == flat
    ds = ds.shuffle(10, 10)
    assert _shapes_and_dtypes(ds.element_spec) == flat
    ds = ds.repeat(-1)
    assert _shapes_and_dtypes(ds.element_spec) == flat
    ds = ds.filter(lambda x, y, z: True)
    assert _shapes_and_dtypes(ds.element_spec) == flat
    ds = ds.take(5)
    assert _shapes_and_dtypes(ds.element_spec) == flat
    ds = ds.map(lambda x, y, z: ((x, z), (y[0], y[1])))
    mapped = ((((3,), i64), ((3,), i64)), (((2,), f64), ((2,), f64)))
    assert _shapes_and_dtypes(ds.element_spec) == mapped
    ds = ds.flat_map(lambda x, y: dp.from_tensors(((x[0], x[1]), (y[0], y[1]))))
    assert _shapes_and_dtypes(ds.element_spec) == mapped
    ds = ds.batch(32)
    batched = ((((None, 3), i64), ((None, 3), i64)), (((None, 2), f64), ((None, 2), f64)))
    assert _shapes_and_dtypes(ds.element_spec) == batched
    components_for_slices = (
        np.array([1, 2, 3], dtype=np.int64),
        (np.array([4.0, 5.0, 6.0]), np.array([7.0, 8.0, 9.0])),
        np.array([10, 11, 12], dtype=np.int64),
    )
    sliced = dp.from_tensor_slices(components_for_slices)
    assert _shapes_and_dtypes(sliced.element_spec) == (
        ((), i64),
        (((), f64), ((), f64)),
        ((), i64),
    )


def test_skip_eager_nested_structure():
    """kernel_tests/from_tensors_test.py::FromTensorsTest.testSkipEagerNestedStructure:
    the values' dtypes and shapes after map, flat_map and batch, on two iterations."""
    components = (
        np.array([1, 2, 3], dtype=np.int64),
        (np.array([4.0, 5.0]), np.array([6.0, 7.0])),
        np.array([8, 9, 10], dtype=np.int64),
    )
    ds = dp.from_tensors(components).map(lambda x, y, z: ((x, z), (y[0], y[1])))
    ds = ds.flat_map(lambda x, y: dp.from_tensors(((x[0], x[1]), (y[0], y[1])))).batch(32)
    for _ in range(2):
        (w, x), (y, z) = next(iter(ds))
        assert (w.dtype, x.dtype, y.dtype, z.dtype) == (np.int64, np.int64, np.float64, np.float64)
        assert (w.shape, x.shape, y.shape, z.shape) == ((1, 3), (1, 3), (1, 2), (1, 2))


def test_nested_dict():
    """kernel_tests/from_tensors_test.py::FromTensorsTest.testNestedDict (Python ints and
    floats are numpy's int64 and float64 here, not int32 and float32: D-TF-11)."""
    components = {"a": {"aa": 1, "ab": [2.0, 2.0]}, "b": [3, 3, 3]}
    spec = dp.from_tensors(components).element_spec
    assert spec["a"]["aa"] == dp.TensorSpec((), np.int64)  # D-TF-11
    assert spec["a"]["ab"] == dp.TensorSpec((2,), np.float64)  # D-TF-11
    assert spec["b"] == dp.TensorSpec((3,), np.int64)  # D-TF-11
    assert_produces(
        dp.from_tensors(components),
        [{"a": {"aa": np.int64(1), "ab": np.array([2.0, 2.0])}, "b": np.array([3, 3, 3])}],
    )


def test_non_sequence_nested_structure():
    """kernel_tests/from_tensors_test.py::FromTensorsTest.testNonSequenceNestedStructure."""
    components = np.array([1, 2, 3], dtype=np.int64)
    ds = dp.from_tensors(components)
    assert ds.element_spec == dp.TensorSpec((3,), np.int64)
    ds = ds.filter(lambda x: np.all(np.equal(x, components)))
    assert ds.element_spec == dp.TensorSpec((3,), np.int64)
    ds = ds.map(lambda x: np.stack([x, x]))
    assert ds.element_spec == dp.TensorSpec((2, 3), np.int64)
    ds = ds.flat_map(lambda x: dp.from_tensor_slices(x))
    assert ds.element_spec == dp.TensorSpec((3,), np.int64)
    first = next(iter(ds))
    assert first.dtype == np.int64 and first.shape == (3,)
    assert_same(first, components)
