"""RandomRotation: quarter turns (exact pixels, boxes, masks, points), and against Keras 3.

Keras 3 is the anchor: deterministic parameters (a factor pair with equal ends) make
Keras's draw exact, so the outputs must agree within 1e-4.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

import numpy as np
import pytest
import torch
from _layer_helpers import (
    FILL_MODES,
    FORMATS,
    INTERPOLATIONS,
    as_format,
    compare,
    extent,
    img,
    keras_batch,
    keras_documented,
)

import preprocessing as pp


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fill_mode", FILL_MODES)
@pytest.mark.parametrize("interpolation", INTERPOLATIONS)
def test_rotation_quarter_turn_non_square(ref, fmt, fill_mode, interpolation):
    # 6x8 image: the turned image leaves the input, so every fill mode is exercised.
    kw = dict(fill_mode=fill_mode, interpolation=interpolation, fill_value=0.5, data_format=fmt)
    ours = pp.RandomRotation((0.25, 0.25), **kw)
    if fill_mode == "wrap":
        # cos(pi/2) is -4e-8 in float32, so coordinates sit a hair below 0, inside the
        # band where TF's kernel clamps instead of wrapping: use the documented one.
        got, expected = keras_documented(ref, ours, torch.from_numpy(keras_batch(fmt=fmt)))
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)
        return
    compare(ref, ours, "RandomRotation", ((0.25, 0.25),), kw, keras_batch(fmt=fmt))


# ------------------------------------------------------------ affine layers
def test_rotation_quarter_turn_is_rot90():
    x = img(b=3, h=5, w=5)
    out = pp.RandomRotation((0.25, 0.25))(x)
    np.testing.assert_allclose(out.numpy(), np.rot90(x.numpy(), k=1, axes=(2, 3)), atol=1e-5)


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: pp.RandomRotation(0.1, fill_mode="mirror"), "RandomRotation: fill_mode"),
        (lambda: pp.RandomRotation(0.1, interpolation="cubic"), "RandomRotation: interpolation"),
        (lambda: pp.RandomRotation(2.0), "RandomRotation: factor must lie in"),
    ],
)
def test_bad_arguments_name_layer_and_argument(build, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("/", "/")):
        build()


@pytest.mark.parametrize("fmt", ["channels_first", "channels_last"])
def test_quarter_turn_moves_box_masks_and_points_with_no_pixel_lost(fmt):
    # Keras 3's boxes are a pixel off after a 90-degree turn; here they match exactly.
    size = 12
    layer = pp.RandomRotation((0.25, 0.25), data_format=fmt, bounding_box_format="xyxy")
    mask = torch.zeros(1, 1, size, size, dtype=torch.uint8)
    mask[0, 0, 2:5, 1:8] = 1  # rows 2-4, columns 1-7: box [1, 2, 8, 5]
    out = layer(
        {
            "images": as_format(torch.rand(1, 3, size, size), fmt),
            "segmentation_masks": as_format(mask, fmt),
            "bounding_boxes": {
                "boxes": torch.tensor([[[1.0, 2.0, 8.0, 5.0]]]),
                "labels": torch.tensor([[1]]),
            },
            "keypoints": torch.tensor([[[1.5, 2.5]]]),
        }
    )
    turned = (
        out["segmentation_masks"]
        if fmt == "channels_first"
        else out["segmentation_masks"].movedim(-1, 1)
    )
    assert torch.equal(turned[0, 0], torch.rot90(mask[0, 0], 1))  # counter-clockwise
    box = out["bounding_boxes"]["boxes"][0, 0]
    assert extent(turned[0, 0]) == [2, 4, 5, 11]
    torch.testing.assert_close(box, torch.tensor([2.0, 4.0, 5.0, 11.0]), atol=1e-4, rtol=0)
    # Pixel (row 2, col 1) goes to (row 10, col 2) under rot90.
    torch.testing.assert_close(out["keypoints"][0, 0], torch.tensor([2.5, 10.5]), atol=1e-4, rtol=0)
