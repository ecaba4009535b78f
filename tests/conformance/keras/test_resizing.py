"""Keras 3's ``image_preprocessing/resizing_test.py``, translated. Interpolations are
Keras's torch backend's (``bilinear``, ``nearest``, ``bicubic``); ``lanczos5`` (skipped
upstream on torch too) is refused with a ValueError (D-K-20)."""

import numpy as np
import pytest
import torch

import datapipe as dp
import preprocessing as pp

from ._util import as_numpy, assert_values, image_with_boxes, layer_basics


@pytest.mark.parametrize("interpolation", ["nearest", "bilinear", "bicubic", "lanczos5"])
@pytest.mark.parametrize("crop_pad", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("antialias", [False, True])
@pytest.mark.parametrize("data_format", ["channels_last", "channels_first"])
def test_resizing_basics(interpolation, crop_pad, antialias, data_format):
    """resizing_test.py::test_resizing_basics (every combination)."""
    crop, pad = crop_pad
    kwargs = dict(
        height=6,
        width=6,
        interpolation=interpolation,
        crop_to_aspect_ratio=crop,
        pad_to_aspect_ratio=pad,
        antialias=antialias,
        data_format=data_format,
    )
    if interpolation == "lanczos5":
        with pytest.raises(ValueError, match="interpolation must be one of"):
            pp.Resizing(**kwargs)
        return
    shape, expected = (
        ((2, 12, 12, 3), (2, 6, 6, 3))
        if data_format == "channels_last"
        else ((2, 3, 12, 12), (2, 3, 6, 6))
    )
    layer_basics(pp.Resizing, kwargs, shape, expected)


def _arange(n, side, data_format):
    img = np.arange(n, dtype=np.float32).reshape(1, side, side, 1)
    return img if data_format == "channels_last" else img.transpose(0, 3, 1, 2)


def _as(ref, data_format):
    ref = np.asarray(ref, dtype=np.float32)[None, :, :, None]
    return ref if data_format == "channels_last" else ref.transpose(0, 3, 1, 2)


@pytest.mark.parametrize("data_format", ["channels_first", "channels_last"])
def test_down_sampling_numeric(data_format):
    """resizing_test.py::test_down_sampling_numeric."""
    out = pp.Resizing(2, 2, interpolation="nearest", data_format=data_format)(
        _arange(16, 4, data_format)
    )
    assert_values(out, _as([[5, 7], [13, 15]], data_format))


@pytest.mark.parametrize("data_format", ["channels_first", "channels_last"])
def test_up_sampling_numeric(data_format):
    """resizing_test.py::test_up_sampling_numeric."""
    out = pp.Resizing(4, 4, interpolation="nearest", data_format=data_format)(
        _arange(4, 2, data_format)
    )
    ref = [[0, 0, 1, 1], [0, 0, 1, 1], [2, 2, 3, 3], [2, 2, 3, 3]]
    assert_values(out, _as(ref, data_format))


@pytest.mark.parametrize("data_format", ["channels_first", "channels_last"])
def test_crop_to_aspect_ratio(data_format):
    """resizing_test.py::test_crop_to_aspect_ratio."""
    layer = pp.Resizing(
        4, 2, interpolation="nearest", data_format=data_format, crop_to_aspect_ratio=True
    )
    out = layer(_arange(16, 4, data_format))
    assert_values(out, _as([[1, 2], [5, 6], [9, 10], [13, 14]], data_format))


@pytest.mark.parametrize("data_format", ["channels_first", "channels_last"])
def test_unbatched_image(data_format):
    """resizing_test.py::test_unbatched_image."""
    img = _arange(16, 4, data_format)[0]
    out = pp.Resizing(2, 2, interpolation="nearest", data_format=data_format)(img)
    assert_values(out, _as([[5, 7], [13, 15]], data_format)[0])


@pytest.mark.parametrize("name", ["tf_data", "grain", "tf_data_sequential"])
def test_tf_data_compatibility(name):
    """resizing_test.py::test_tf_data_compatibility, ::test_grain_compatibility and
    ::test_tf_data_compatibility_sequential (the layer inside torch.nn.Sequential): in a
    pipeline's map, a CPU tensor out."""
    layer = pp.Resizing(8, 9)
    fn = torch.nn.Sequential(layer) if name == "tf_data_sequential" else layer
    data = np.random.default_rng(0).random((2, 3, 10, 12)).astype("float32")
    out = next(iter(dp.from_tensor_slices(data).batch(2).map(fn)))
    assert isinstance(out, torch.Tensor) and out.device.type == "cpu"
    assert tuple(out.shape) == (2, 3, 8, 9)


@pytest.mark.parametrize("size", [(15, 10), (15, 100)])
def test_data_stretch(size):
    """resizing_test.py::test_data_stretch: a (1, 1, 4, 4) channels_last image."""
    out = pp.Resizing(size[0], size[1], data_format="channels_last", crop_to_aspect_ratio=True)(
        np.random.default_rng(1).random((1, 1, 4, 4))
    )
    assert tuple(out.shape) == (1, *size, 4)


# Keras's crop_to_aspect_ratio boxes: upstream's literal [[5, 0.5, 10, 5.5], [15, 8, 20,
# 13]] floors the crop offset in output pixels ((25 - 20) // 2 = 2) where Keras crops the
# image by int((10 - 8) / 2) = 1 input pixel, 2.5 output pixels; here the boxes move with
# their pixels, 0.5 px above Keras's (D-K-22). The literal is checked against Keras's
# formula in test_keras_crop_to_aspect_ratio_box_formula.
BOX_CASES = [
    (True, False, [[6.0, 2.0, 10.0, 6.0], [14.0, 8.0, 18.0, 12.0]]),
    (False, True, [[5.0, 0.0, 10.0, 5.0], [15.0, 7.5, 20.0, 12.5]]),
    (False, False, [[5.0, 2.0, 10.0, 6.0], [15.0, 8.0, 20.0, 12.0]]),
]
IDS = ["with_pad_to_aspect_ratio", "with_crop_to_aspect_ratio", "boxes_stretch"]


@pytest.mark.parametrize("pad,crop,expected", BOX_CASES, ids=IDS)
def test_resize_bounding_boxes(pad, crop, expected):
    """resizing_test.py::test_resize_bounding_boxes: a (3, 10, 8) image to 20x20."""
    layer = pp.Resizing(
        20, 20, pad_to_aspect_ratio=pad, crop_to_aspect_ratio=crop, bounding_box_format="xyxy"
    )
    out = layer(image_with_boxes((3, 10, 8), [[2, 1, 4, 3], [6, 4, 8, 6]]))
    assert_values(out["bounding_boxes"]["boxes"], expected, atol=1e-5)


@pytest.mark.parametrize("pad,crop,expected", BOX_CASES, ids=IDS)
def test_resize_tf_data_bounding_boxes(pad, crop, expected):
    """resizing_test.py::test_resize_tf_data_bounding_boxes: pipeline elements."""
    layer = pp.Resizing(
        20, 20, pad_to_aspect_ratio=pad, crop_to_aspect_ratio=crop, bounding_box_format="xyxy"
    )
    data = image_with_boxes((1, 3, 10, 8), [[2, 1, 4, 3], [6, 4, 8, 6]])
    data["bounding_boxes"] = {k: v[None] for k, v in data["bounding_boxes"].items()}
    out = next(iter(dp.from_tensor_slices(data).map(layer)))
    assert_values(as_numpy(out["bounding_boxes"]["boxes"]), expected, atol=1e-5)


def test_keras_crop_to_aspect_ratio_box_formula():
    """resizing_test.py::test_resize_bounding_boxes (with_crop_to_aspect_ratio): Keras's
    ``_transform_boxes_crop_to_aspect_ratio`` in numpy gives upstream's literal, 0.5 px
    below where the cropped pixels land (the image is cut 1 input row from the top)."""
    boxes = np.array([[2.0, 1, 4, 3], [6, 4, 8, 6]])
    new_h, new_w = 20 / (8 / 10), 20.0  # source aspect 0.8 < target 1
    scale_y, scale_x = new_h / 10, new_w / 8
    top, left = (new_h - 20) // 2, (new_w - 20) // 2
    keras = np.stack(
        [
            boxes[:, 0] * scale_x - left,
            boxes[:, 1] * scale_y - top,
            boxes[:, 2] * scale_x - left,
            boxes[:, 3] * scale_y - top,
        ],
        -1,
    )
    assert_values(keras, [[5.0, 0.5, 10.0, 5.5], [15.0, 8.0, 20.0, 13.0]])
    pixels_top = int((10 - 8) / 2)  # the image crop: rows 1..8 of 10
    ours = (boxes - [0, pixels_top, 0, pixels_top]) * [scale_x, scale_y, scale_x, scale_y]
    assert_values(ours, BOX_CASES[1][2])
