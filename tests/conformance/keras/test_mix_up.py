"""Keras 3's ``image_preprocessing/mix_up_test.py``, translated."""

import numpy as np
import torch

import datapipe as dp
import preprocessing as pp

from ._util import assert_unchanged, assert_values, layer_basics


def test_layer():
    """mix_up_test.py::test_layer."""
    layer_basics(pp.MixUp, {"alpha": 0.2}, (8, 3, 4, 3), (8, 3, 4, 3))


def test_mix_up_inference():
    """mix_up_test.py::test_mix_up_inference: identity in eval()."""
    assert_unchanged(pp.MixUp(alpha=0.2, data_format="channels_last").eval())


def _basic(data_format, one, batch):
    layer = pp.MixUp(alpha=1, data_format=data_format)
    image = np.random.default_rng(0).random(one)
    params = {"mix_weight": torch.tensor([1.0]), "permutation_order": torch.tensor([0])}
    assert_values(layer.transform_images(torch.from_numpy(image), params), image)
    images = torch.from_numpy(np.random.default_rng(1).random(batch))
    params = {
        "mix_weight": torch.full((4,), 0.2, dtype=torch.float64),
        "permutation_order": torch.tensor([1, 0, 2, 3]),
    }
    out = pp.MixUp(alpha=0.2, data_format=data_format).transform_images(images, params)
    assert out.shape == images.shape and not torch.allclose(out, images)
    assert_values(out[0], 0.2 * images[0] + 0.8 * images[1], atol=1e-12)
    assert_values(out[2:], images[2:])


def test_mix_up_basic_functionality():
    """mix_up_test.py::test_mix_up_basic_functionality (channels_last)."""
    _basic("channels_last", (64, 64, 3), (4, 64, 64, 3))


def test_mix_up_basic_functionality_channel_first():
    """mix_up_test.py::test_mix_up_basic_functionality_channel_first."""
    _basic("channels_first", (3, 64, 64), (4, 3, 64, 64))


def test_tf_data_compatibility():
    """mix_up_test.py::test_tf_data_compatibility."""
    data = np.random.default_rng(2).random((2, 8, 8, 3))
    layer = pp.MixUp(data_format="channels_last")
    assert tuple(next(iter(dp.from_tensor_slices(data).batch(2).map(layer))).shape) == (2, 8, 8, 3)


BOXES = {
    "boxes": torch.tensor([[[2.0, 1, 4, 3]], [[6.0, 4, 8, 6]]]),
    "labels": torch.tensor([[1], [2]]),
}
EXPECTED = [[2, 1, 4, 3, 6, 4, 8, 6], [6, 4, 8, 6, 2, 1, 4, 3]]
PARAMS = {"mix_weight": torch.tensor([0.5, 0.5]), "permutation_order": torch.tensor([1, 0])}


def test_mix_up_bounding_boxes():
    """mix_up_test.py::test_mix_up_bounding_boxes: each image gets its partner's boxes
    appended (upstream's two images of one box each, as (2, 1, 4) boxes)."""
    layer = pp.MixUp(data_format="channels_first", seed=42, bounding_box_format="xyxy")
    out = layer.transform_bounding_boxes(BOXES, PARAMS)
    assert_values(out["boxes"].reshape(2, 8), EXPECTED)
    assert_values(out["labels"], [[1, 2], [2, 1]])


def test_mix_up_tf_data_bounding_boxes():
    """mix_up_test.py::test_mix_up_tf_data_bounding_boxes: the same in a pipeline's map."""
    layer = pp.MixUp(data_format="channels_first", seed=42, bounding_box_format="xyxy")
    ds = dp.from_tensor_slices({"boxes": BOXES["boxes"].numpy(), "labels": BOXES["labels"].numpy()})
    ds = ds.batch(2).map(
        lambda b: layer.transform_bounding_boxes(
            {k: torch.as_tensor(v) for k, v in b.items()}, PARAMS
        )
    )
    assert_values(next(iter(ds))["boxes"].reshape(2, 8), EXPECTED)
