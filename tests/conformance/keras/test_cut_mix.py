"""Keras 3's ``image_preprocessing/cut_mix_test.py``, translated. CutMix's parameters
here name each pasted window by its float corners ``[x0, x1, y0, y1]`` where Keras gives
a per-pixel boolean mask (the same pixels: those with integer coordinates inside)."""

import numpy as np
import torch

import datapipe as dp
import preprocessing as pp

from ._util import as_numpy, assert_unchanged, assert_values, layer_basics


def test_layer():
    """cut_mix_test.py::test_layer."""
    layer_basics(pp.CutMix, {"factor": 1.0, "seed": 1}, (8, 3, 4, 3), (8, 3, 4, 3))


def test_cut_mix_inference():
    """cut_mix_test.py::test_cut_mix_inference: identity in eval()."""
    assert_unchanged(pp.CutMix(data_format="channels_last").eval())


def test_cut_mix_basic():
    """cut_mix_test.py::test_cut_mix_basic: a ones and a zeros image, each its own partner
    (permutation [0, 1]), one pixel window each (upstream's masks): unchanged."""
    inputs = np.stack([np.ones((1, 2, 2)), np.zeros((1, 2, 2))])
    layer = pp.CutMix(data_format="channels_first")
    params = {
        "corners": torch.tensor([[1.0, 2.0, 0.0, 1.0], [0.0, 1.0, 1.0, 2.0]]),
        "permutation_order": torch.tensor([0, 1]),
    }
    assert_values(layer.transform_images(torch.from_numpy(inputs), params), inputs)
    swapped = layer.transform_images(
        torch.from_numpy(inputs), {**params, "permutation_order": torch.tensor([1, 0])}
    )
    assert_values(swapped, [[[[1.0, 0.0], [1.0, 1.0]]], [[[0.0, 0.0], [1.0, 0.0]]]])


def test_tf_data_compatibility():
    """cut_mix_test.py::test_tf_data_compatibility."""
    data = np.random.default_rng(0).random((2, 3, 8, 8))
    layer = pp.CutMix(data_format="channels_first")
    assert tuple(next(iter(dp.from_tensor_slices(data).batch(2).map(layer))).shape) == (2, 3, 8, 8)


def test_segmentation_mask_preserves_dtype_and_classes():
    """cut_mix_test.py::test_segmentation_mask_preserves_dtype_and_classes."""
    images = np.random.default_rng(1).random((2, 8, 8, 3)).astype("float32")
    masks = np.zeros((2, 8, 8, 1), dtype="uint8")
    masks[0] = 4
    out = pp.CutMix(seed=1, data_format="channels_last")(
        {"images": images, "segmentation_masks": masks}
    )
    result = as_numpy(out["segmentation_masks"])
    assert result.dtype == np.uint8
    assert set(np.unique(result).tolist()) <= {0, 4}
