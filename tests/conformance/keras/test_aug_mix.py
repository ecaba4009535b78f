"""Keras 3's ``image_preprocessing/aug_mix_test.py``, translated."""

import numpy as np

import datapipe as dp
import preprocessing as pp

from ._util import as_numpy, assert_unchanged, layer_basics


def test_layer():
    """aug_mix_test.py::test_layer."""
    init = {
        "value_range": (0, 255),
        "num_chains": 2,
        "chain_depth": 2,
        "factor": 1,
        "alpha": 1.0,
        "all_ops": True,
        "interpolation": "nearest",
        "seed": 43,
        "data_format": "channels_last",
    }
    out = layer_basics(pp.AugMix, init, (8, 3, 4, 3), (8, 3, 4, 3), scale=255)
    assert out.min() >= 0 and out.max() <= 255


def test_aug_mix_inference():
    """aug_mix_test.py::test_aug_mix_inference: identity in eval()."""
    assert_unchanged(pp.AugMix(data_format="channels_last").eval())


def test_random_augment_randomness():
    """aug_mix_test.py::test_random_augment_randomness: 11 chains change the images."""
    data = np.random.default_rng(0).random((2, 3, 8, 8))
    out = as_numpy(
        pp.AugMix(num_chains=11, all_ops=True, data_format="channels_first", seed=1)(data)
    )
    assert not np.allclose(out, data)


def test_tf_data_compatibility():
    """aug_mix_test.py::test_tf_data_compatibility."""
    data = np.random.default_rng(1).random((2, 3, 8, 8))
    layer = pp.AugMix(data_format="channels_first")
    assert tuple(next(iter(dp.from_tensor_slices(data).batch(2).map(layer))).shape) == (2, 3, 8, 8)
