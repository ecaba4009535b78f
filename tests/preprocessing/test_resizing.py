"""Resizing and CenterCrop: shapes and aspect modes, boxes, and against Keras 3.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

import pytest
import torch
from _layer_helpers import FORMATS, compare, img, keras_batch

import preprocessing as pp


@pytest.mark.parametrize("fmt", FORMATS)
def test_resizing_and_center_crop_match_keras(ref, fmt):
    x = keras_batch(h=10, w=7, fmt=fmt)
    for kwargs in [
        dict(interpolation="bilinear"),
        dict(crop_to_aspect_ratio=True),
        dict(pad_to_aspect_ratio=True, fill_value=0.5),
    ]:
        kw = dict(data_format=fmt, **kwargs)
        compare(ref, pp.Resizing(5, 5, **kw), "Resizing", (5, 5), kw, x)
    kw = dict(data_format=fmt)
    compare(ref, pp.Resizing(13, 17, **kw), "Resizing", (13, 17), kw, x)
    compare(ref, pp.CenterCrop(4, 3, **kw), "CenterCrop", (4, 3), kw, x)
    compare(ref, pp.CenterCrop(12, 5, **kw), "CenterCrop", (12, 5), kw, x)


def test_center_crop_smaller_input_resizes_like_keras():
    out = pp.CenterCrop(4, 4)(torch.ones(1, 2, 2))
    assert out.shape == (1, 4, 4) and torch.allclose(out, torch.ones(1, 4, 4))


# -------------------------------------------------------------- resize etc.
def test_resizing_shapes_and_aspect_modes():
    x = img(b=2, h=4, w=8)
    assert pp.Resizing(2, 2)(x).shape == (2, 3, 2, 2)
    cropped = pp.Resizing(4, 4, crop_to_aspect_ratio=True)(x)
    assert torch.equal(cropped, x[:, :, :, 2:6])
    padded = pp.Resizing(8, 8, pad_to_aspect_ratio=True, fill_value=-1.0)(x)
    assert torch.equal(padded[:, :, 2:6], x) and (padded[:, :, :2] == -1).all()


def test_resizing_nearest_uint8_becomes_float32():
    x = torch.tensor([[[0, 10], [20, 30]]], dtype=torch.uint8)
    out = pp.Resizing(4, 4, interpolation="nearest")(x)
    assert out.dtype == torch.float32
    assert out[0].tolist()[0] == [0.0, 0.0, 10.0, 10.0]


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "build, message",
    [
        (
            lambda: pp.Resizing(2, 2, crop_to_aspect_ratio=True, pad_to_aspect_ratio=True),
            "Resizing: crop_to_aspect_ratio/pad_to_aspect_ratio cannot both be True",
        ),
    ],
)
def test_bad_arguments_name_layer_and_argument(build, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("/", "/")):
        build()


def test_resizing_scales_relative_and_absolute_boxes():
    layer = pp.Resizing(5, 10, bounding_box_format="rel_xyxy")
    boxes = {"boxes": torch.tensor([[0.1, 0.2, 0.5, 0.6]]), "labels": torch.tensor([0])}
    out = layer({"images": torch.rand(3, 10, 20), "bounding_boxes": boxes})
    torch.testing.assert_close(
        out["bounding_boxes"]["boxes"], boxes["boxes"]
    )  # relative: unchanged
    absolute = pp.Resizing(5, 10, bounding_box_format="xywh")(
        {
            "images": torch.rand(3, 10, 20),
            "bounding_boxes": {
                "boxes": torch.tensor([[2.0, 2.0, 8.0, 4.0]]),
                "labels": torch.tensor([0]),
            },
        }
    )
    assert absolute["bounding_boxes"]["boxes"].tolist() == [[1.0, 1.0, 4.0, 2.0]]
