"""Keras 3's ``image_preprocessing/random_shear_test.py``, translated."""

import numpy as np
import pytest
import torch

import datapipe as dp
import preprocessing as pp

from ._util import (
    as_numpy,
    assert_unchanged,
    assert_values,
    image_with_boxes,
    layer_basics,
    moved_boxes,
    quad_in_image_extent,
)


def test_layer():
    """random_shear_test.py::test_layer."""
    init = {
        "x_factor": (0.5, 1),
        "y_factor": (0.5, 1),
        "interpolation": "bilinear",
        "fill_mode": "reflect",
        "data_format": "channels_last",
        "seed": 1,
    }
    layer_basics(pp.RandomShear, init, (8, 3, 4, 3), (8, 3, 4, 3))


def test_random_posterization_inference():
    """random_shear_test.py::test_random_posterization_inference (sic): eval()."""
    assert_unchanged(pp.RandomShear(1, 1, data_format="channels_last").eval())


def test_shear_pixel_level():
    """random_shear_test.py::test_shear_pixel_level: the centre pixel changes."""
    image = np.zeros((1, 5, 5, 3), dtype="float32")
    image[0, 1:4, 1:4, :] = 1.0
    image[0, 2, 2, :] = [0.0, 1.0, 0.0]
    layer = pp.RandomShear(
        x_factor=(0.2, 0.3),
        y_factor=(0.2, 0.3),
        interpolation="bilinear",
        fill_mode="constant",
        fill_value=0.0,
        seed=42,
    )
    out = as_numpy(layer(image.transpose(0, 3, 1, 2))).transpose(0, 2, 3, 1)
    assert not np.allclose(out[0, 2, 2], image[0, 2, 2])


def test_tf_data_compatibility():
    """random_shear_test.py::test_tf_data_compatibility."""
    data = np.random.default_rng(0).random((2, 3, 8, 8))
    assert tuple(
        next(iter(dp.from_tensor_slices(data).batch(2).map(pp.RandomShear(1, 1)))).shape
    ) == (2, 3, 8, 8)


BOXES = [[2, 1, 4, 3], [6, 4, 8, 6]]
BOX_CASES = [
    ((1.0, 0.0), [[0.0, 1.0, 3.2, 3.0], [1.2, 4.0, 4.8, 6.0]]),
    ((0.0, 1.0), [[2.0, 0.0, 4.0, 0.5], [6.0, 0.0, 8.0, 0.0]]),
    ((1.0, 1.0), [[0.0, 0.0, 3.2, 3.5], [1.2, 0.0, 4.8, 4.5]]),
]
IDS = ["with_x_shift", "with_y_shift", "with_xy_shift"]


def _keras_relative_shear(boxes, sx, sy, height=10, width=8):
    """Keras's ``_shear_bboxes``: corners sheared in relative (rel_xyxy) coordinates."""
    b = np.asarray(boxes, dtype=float) / [width, height, width, height]
    x1, y1, x2, y2 = b.T
    if sx:
        x1, x2 = (x1 - sx * y2, x2 - sx * y1) if sx > 0 else (x1 - sx * y1, x2 - sx * y2)
    if sy:
        y1, y2 = (y1 - sy * x2, y2 - sy * x1) if sy > 0 else (y1 - sy * x1, y2 - sy * x2)
    return np.clip(np.stack([x1, y1, x2, y2], 1), 0, 1) * [width, height, width, height]


def _pixel_shear(boxes, sx, sy, height=10, width=8):
    """Where the pixels go (s_y = 0 or s_x = 0): an input point (x, y), continuous, lands
    at (x - s_x (y - 1/2), y - s_y (x - 1/2)); the extent of the moved box's part inside
    the image."""
    out = []
    for x1, y1, x2, y2 in boxes:
        corners = np.array([[x1, y1], [x2, y1], [x2, y2], [x1, y2]], dtype=float)
        moved = np.stack(
            [
                corners[:, 0] - sx * (corners[:, 1] - 0.5),
                corners[:, 1] - sy * (corners[:, 0] - 0.5),
            ],
            1,
        )
        out.append(quad_in_image_extent(moved, height, width))
    return np.array(out)


@pytest.mark.parametrize("shear,keras_boxes", BOX_CASES, ids=IDS)
def test_random_shear_bounding_boxes(shear, keras_boxes):
    """random_shear_test.py::test_random_shear_bounding_boxes. Keras shears box corners
    in relative coordinates (reproduced here: upstream's literal), which for this 8 x 10
    image moves them 0.8 times as far as its pixels move; here boxes follow the pixels
    (D-K-22). Shear (1, 1) has no inverse (every output pixel samples one input line):
    the boxes are dropped, label -1."""
    assert_values(_keras_relative_shear(BOXES, *shear), keras_boxes, atol=1e-6)
    layer = pp.RandomShear(
        x_factor=0.5,
        y_factor=0.5,
        data_format="channels_first",
        seed=42,
        bounding_box_format="xyxy",
    )
    params = {"shear_factor": torch.tensor([shear])}
    out = moved_boxes(layer, BOXES, params, (3, 10, 8))
    if shear == (1.0, 1.0):
        assert_values(out, np.zeros((2, 4)))
    else:
        assert_values(out, _pixel_shear(BOXES, *shear), atol=1e-5)


@pytest.mark.parametrize("shear,keras_boxes", BOX_CASES[:2], ids=IDS[:2])
def test_random_shear_tf_data_bounding_boxes(shear, keras_boxes):
    """random_shear_test.py::test_random_shear_tf_data_bounding_boxes: through a pipeline
    (the shear drawn from fixed ranges, its sign fixed by a mocked draw)."""

    class _Positive(pp.RandomShear):
        """Every draw is its range's low end: the sign draw 0 (no inversion), s = low."""

        def _uniform(self, n, low, high, device, generator):
            return torch.full((n,), float(low), device=device)

    sx, sy = shear
    layer = _Positive(x_factor=(sx, sx), y_factor=(sy, sy), seed=42, bounding_box_format="xyxy")
    data = image_with_boxes((1, 3, 10, 8), BOXES)
    data["bounding_boxes"] = {k: v[None] for k, v in data["bounding_boxes"].items()}
    out = next(iter(dp.from_tensor_slices(data).map(layer)))
    assert_values(as_numpy(out["bounding_boxes"]["boxes"]), _pixel_shear(BOXES, sx, sy), atol=1e-5)
