"""Keras 3's ``image_preprocessing/random_flip_test.py``, translated. Flip parameters
are ``flip_h`` / ``flip_v`` per image here (Keras: one ``flips`` tensor)."""

import numpy as np
import pytest
import torch

import datapipe as dp
import preprocessing as pp

from ._util import assert_values, image_with_boxes, layer_basics, mask_classes_kept, moved_boxes


class _MockedRandomFlip(pp.RandomFlip):
    """upstream's MockedRandomFlip: every uniform draw is 0.1 (< 0.5: flip)."""

    def _uniform(self, n, low, high, device, generator):
        return torch.full((n,), 0.1, device=device)


@pytest.mark.parametrize("mode", ["horizontal", "vertical", "horizontal_and_vertical"])
def test_random_flip(mode):
    """random_flip_test.py::test_random_flip: (2, 3, 4) keeps its shape."""
    layer_basics(pp.RandomFlip, {"mode": mode, "seed": 0}, (2, 3, 4), (2, 3, 4))


HORIZONTAL = [
    ([[[2, 3, 4], [5, 6, 7]]], [[[5, 6, 7], [2, 3, 4]]]),
    (
        [[[[2, 3, 4], [5, 6, 7]]], [[[2, 3, 4], [5, 6, 7]]]],
        [[[[5, 6, 7], [2, 3, 4]]], [[[5, 6, 7], [2, 3, 4]]]],
    ),
]
VERTICAL = [
    ([[[2, 3, 4]], [[5, 6, 7]]], [[[5, 6, 7]], [[2, 3, 4]]]),
    (
        [[[[2, 3, 4]], [[5, 6, 7]]], [[[2, 3, 4]], [[5, 6, 7]]]],
        [[[[5, 6, 7]], [[2, 3, 4]]], [[[5, 6, 7]], [[2, 3, 4]]]],
    ),
]


@pytest.mark.parametrize("data,expected", HORIZONTAL, ids=["3d", "4d"])
def test_random_flip_horizontal(data, expected):
    """random_flip_test.py::test_random_flip_horizontal (every draw mocked to 0.1)."""
    layer = _MockedRandomFlip(mode="horizontal", data_format="channels_last", seed=42)
    assert_values(layer(np.asarray(data)), np.asarray(expected, dtype="float32"))


@pytest.mark.parametrize("data,expected", VERTICAL, ids=["3d", "4d"])
def test_random_flip_vertical(data, expected):
    """random_flip_test.py::test_random_flip_vertical (every draw mocked to 0.1)."""
    layer = _MockedRandomFlip(mode="vertical", data_format="channels_last", seed=42)
    assert_values(layer(np.asarray(data)), np.asarray(expected, dtype="float32"))


@pytest.mark.parametrize("data,expected", VERTICAL, ids=["3d", "4d"])
def test_tf_data_compatibility(data, expected):
    """random_flip_test.py::test_tf_data_compatibility: in a pipeline's map; upstream's
    seed 42 happens to flip in Keras's stream, here the draw is the mocked one (a seed
    gives this package's stream, not Keras's: D-K-5)."""
    layer = _MockedRandomFlip("vertical", data_format="channels_last", seed=42)
    ds = dp.from_tensor_slices(np.asarray(data)).batch(2).map(layer)
    assert_values(next(iter(ds)), np.asarray(expected, dtype="float32"))


BOX_CASES = [
    ("horizontal", [[4, 1, 6, 3], [0, 4, 2, 6]]),
    ("vertical", [[2, 7, 4, 9], [6, 4, 8, 6]]),
    ("horizontal_and_vertical", [[4, 7, 6, 9], [0, 4, 2, 6]]),
]
BOXES = [[2, 1, 4, 3], [6, 4, 8, 6]]


@pytest.mark.parametrize("mode,expected", BOX_CASES)
def test_random_flip_bounding_boxes(mode, expected):
    """random_flip_test.py::test_random_flip_bounding_boxes: a (3, 10, 8) image."""
    layer = pp.RandomFlip(mode, data_format="channels_first", seed=42, bounding_box_format="xyxy")
    params = {
        "flip_h": torch.tensor([mode != "vertical"]),
        "flip_v": torch.tensor([mode != "horizontal"]),
    }
    assert_values(moved_boxes(layer, BOXES, params, (3, 10, 8)), expected)


@pytest.mark.parametrize("mode,expected", BOX_CASES)
def test_random_flip_tf_data_bounding_boxes(mode, expected):
    """random_flip_test.py::test_random_flip_tf_data_bounding_boxes: elements of a
    pipeline through the (mocked: always flipping) layer."""
    layer = _MockedRandomFlip(
        mode, data_format="channels_first", seed=42, bounding_box_format="xyxy"
    )
    data = image_with_boxes((1, 3, 10, 8), BOXES, batched=False)
    data["bounding_boxes"] = {k: v[None] for k, v in data["bounding_boxes"].items()}
    out = next(iter(dp.from_tensor_slices(data).map(layer)))
    assert_values(out["bounding_boxes"]["boxes"], expected)


def test_segmentation_mask_preserves_dtype_and_classes():
    """random_flip_test.py::test_segmentation_mask_preserves_dtype_and_classes."""
    mask_classes_kept(pp.RandomFlip("horizontal_and_vertical", seed=0, data_format="channels_last"))
