"""Keras 3's ``image_preprocessing/random_rotation_test.py``, translated."""

import numpy as np
import pytest

import datapipe as dp
import preprocessing as pp

from ._util import as_numpy, assert_values, layer_basics

HALF_TURN = np.asarray(
    [
        [24, 23, 22, 21, 20],
        [19, 18, 17, 16, 15],
        [14, 13, 12, 11, 10],
        [9, 8, 7, 6, 5],
        [4, 3, 2, 1, 0],
    ]
)


@pytest.mark.parametrize("factor", [-0.4, -0.2, 0.4, 0.2, (-0.2, 0.4)])
def test_random_rotation_shapes(factor):
    """random_rotation_test.py::test_random_rotation_shapes."""
    layer_basics(pp.RandomRotation, {"factor": factor, "seed": 0}, (2, 3, 4), (2, 3, 4))


def test_random_rotation_correctness():
    """random_rotation_test.py::test_random_rotation_correctness: half a turn of a 5x5
    arange (channels-first, upstream's branch)."""
    image = np.arange(25).reshape(1, 1, 5, 5)
    out = pp.RandomRotation(factor=(0.5, 0.5))(image)
    assert_values(out, HALF_TURN.reshape(1, 1, 5, 5), atol=1e-5)


def test_training_false():
    """random_rotation_test.py::test_training_false: identity in eval()."""
    image = np.arange(25).reshape(1, 5, 5, 1)
    out = pp.RandomRotation(factor=(0.5, 0.5), data_format="channels_last").eval()(image)
    np.testing.assert_array_equal(as_numpy(out), image)


def test_tf_data_compatibility():
    """random_rotation_test.py::test_tf_data_compatibility: unbatched (1, 5, 5) elements."""
    image = np.arange(25).reshape(1, 1, 5, 5)
    out = next(iter(dp.from_tensor_slices(image).map(pp.RandomRotation(factor=(0.5, 0.5)))))
    assert_values(out, HALF_TURN.reshape(1, 5, 5), atol=1e-5)
