"""tf.data's ``as_numpy_iterator`` kernel tests (``kernel_tests/as_numpy_iterator_test.py``)."""

from __future__ import annotations

import collections

import numpy as np

import datapipe as dp


def test_basic():
    """kernel_tests/as_numpy_iterator_test.py::AsNumpyIteratorTest.testBasic."""
    assert list(dp.range(3).as_numpy_iterator()) == [0, 1, 2]


def test_nested_structure():
    """kernel_tests/as_numpy_iterator_test.py::AsNumpyIteratorTest.testNestedStructure."""
    point = collections.namedtuple("Point", ["x", "y"])
    ds = dp.from_tensor_slices({"a": ([1, 2], [3, 4]), "b": [5, 6], "c": point([7, 8], [9, 10])})
    out = list(ds.as_numpy_iterator())
    assert out == [
        {"a": (1, 3), "b": 5, "c": point(7, 9)},
        {"a": (2, 4), "b": 6, "c": point(8, 10)},
    ]
    assert isinstance(out[0]["c"], point) and isinstance(out[0]["b"], np.integer)


def test_dataset_element():
    """kernel_tests/as_numpy_iterator_test.py::AsNumpyIteratorTest.testDatasetElement:
    tf.data refuses a dataset of datasets; here elements already are numpy values, so
    as_numpy_iterator is iter() and a Dataset element comes out as itself (D-TF-19)."""
    inner = dp.range(3)
    (element,) = list(dp.from_tensors(inner).as_numpy_iterator())
    assert element is inner


def test_nested_non_tensor_element():
    """kernel_tests/as_numpy_iterator_test.py::AsNumpyIteratorTest.testNestedNonTensorElement
    (D-TF-19)."""
    values, inner = next(dp.from_tensors((np.array([1, 2, 3]), dp.range(3))).as_numpy_iterator())
    assert values.tolist() == [1, 2, 3] and [int(x) for x in inner] == [0, 1, 2]
