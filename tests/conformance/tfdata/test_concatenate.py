"""tf.data's ``concatenate`` kernel tests (``kernel_tests/concatenate_test.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp

from ._support import VERIFY_FNS, assert_produces, verify_checkpoint


def _tile(rows, n):
    return np.tile(np.array([[r] for r in rows]), n)


def _check(concatenated, input_components, to_concatenate_components):
    expected = [tuple(c[i] for c in input_components) for i in range(4)]
    expected += [tuple(c[i] for c in to_concatenate_components) for i in range(5)]
    assert_produces(concatenated, expected)


def test_concatenate_dataset():
    """kernel_tests/concatenate_test.py::ConcatenateTest.testConcatenateDataset."""
    input_components = (
        _tile([1, 2, 3, 4], 20),
        _tile([12, 13, 14, 15], 15),
        np.array([37.0, 38.0, 39.0, 40.0]),
    )
    to_concatenate_components = (
        _tile([1, 2, 3, 4, 5], 20),
        _tile([12, 13, 14, 15, 16], 15),
        np.array([37.0, 38.0, 39.0, 40.0, 41.0]),
    )
    concatenated = dp.from_tensor_slices(input_components).concatenate(
        dp.from_tensor_slices(to_concatenate_components)
    )
    assert [s.shape for s in concatenated.element_spec] == [(20,), (15,), ()]
    assert concatenated.cardinality() == 9
    _check(concatenated, input_components, to_concatenate_components)


def test_concatenate_dataset_different_shape():
    """kernel_tests/concatenate_test.py::ConcatenateTest.testConcatenateDatasetDifferentShape."""
    input_components = (_tile([1, 2, 3, 4], 20), _tile([12, 13, 14, 15], 4))
    to_concatenate_components = (_tile([1, 2, 3, 4, 5], 20), _tile([12, 13, 14, 15, 16], 15))
    concatenated = dp.from_tensor_slices(input_components).concatenate(
        dp.from_tensor_slices(to_concatenate_components)
    )
    assert [s.shape for s in concatenated.element_spec] == [(20,), (None,)]
    _check(concatenated, input_components, to_concatenate_components)


@pytest.mark.parametrize(
    "input_components,to_concatenate_components",
    [
        (
            (_tile([1, 2, 3, 4], 5), _tile([12, 13, 14, 15], 4)),
            (
                _tile([1, 2, 3, 4, 5], 20),
                _tile([12, 13, 14, 15, 16], 15),
                np.array([37.0, 38.0, 39.0, 40.0, 41.0]),
            ),
        ),
        (
            {"foo": np.array([[1], [2], [3], [4]]), "bar": np.array([[12], [13], [14], [15]])},
            {"foo": np.array([[1], [2], [3], [4]]), "baz": np.array([[5], [6], [7], [8]])},
        ),
        (
            (_tile([1, 2, 3, 4], 5), _tile([12, 13, 14, 15], 4)),
            (np.tile(np.array([[1.0], [2.0], [3.0], [4.0]]), 5), _tile([12, 13, 14, 15], 15)),
        ),
    ],
    ids=[
        "testConcatenateDatasetDifferentStructure",
        "testConcatenateDatasetDifferentKeys",
        "testConcatenateDatasetDifferentType",
    ],
)
def test_concatenate_dataset_incompatible(input_components, to_concatenate_components):
    """kernel_tests/concatenate_test.py::ConcatenateTest.testConcatenateDatasetDifferentStructure,
    testConcatenateDatasetDifferentKeys, testConcatenateDatasetDifferentType (one case
    each): refused when built, with a TypeError showing both specs."""
    a = dp.from_tensor_slices(input_components)
    b = dp.from_tensor_slices(to_concatenate_components)
    with pytest.raises(TypeError, match="concatenate: incompatible dataset elements"):
        a.concatenate(b)


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
def test_concatenate_core(verify_fn):
    """kernel_tests/concatenate_test.py::ConcatenateCheckpointTest.testConcatenateCore."""
    var_array = _tile([16, 17, 18, 19, 20], 15)

    def build():
        input_components = (_tile([1, 2, 3, 4], 20), _tile([12, 13, 14, 15], 4))
        to_concatenate = (_tile([5, 6, 7, 8, 9], 20), var_array)
        return dp.from_tensor_slices(input_components).concatenate(
            dp.from_tensor_slices(to_concatenate)
        )

    verify_checkpoint(build, 9, verify_fn)
