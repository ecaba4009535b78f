"""Keras 3's ``image_preprocessing/center_crop_test.py``, translated."""

import numpy as np
import pytest

import datapipe as dp
import preprocessing as pp

from ._util import as_numpy, assert_values, image_with_boxes, layer_basics, mask_classes_kept


def _np_center_crop(img, h_new, w_new):
    """upstream's np_center_crop (channels_last)."""
    h, w = img.shape[-3:-1]
    top, left = (h - h_new) // 2, (w - w_new) // 2
    return img[..., top : top + h_new, left : left + w_new, :]


@pytest.mark.parametrize(
    "size,data_format,shape,expected",
    [
        ((6, 6), "channels_last", (2, 12, 12, 3), (2, 6, 6, 3)),
        ((7, 7), "channels_first", (2, 3, 13, 13), (2, 3, 7, 7)),
    ],
)
def test_center_crop_basics(size, data_format, shape, expected):
    """center_crop_test.py::test_center_crop_basics."""
    layer_basics(
        pp.CenterCrop,
        {"height": size[0], "width": size[1], "data_format": data_format},
        shape,
        expected,
    )


@pytest.mark.parametrize(
    "size,data_format",
    [
        ((5, 7), "channels_first"),
        ((5, 7), "channels_last"),
        ((4, 9), "channels_first"),
        ((9, 4), "channels_last"),
    ],
)
@pytest.mark.parametrize("batched", [True, False])
def test_center_crop_correctness(size, data_format, batched):
    """center_crop_test.py::test_center_crop_correctness (batched and unbatched)."""
    shape = (9, 11, 3) if data_format == "channels_last" else (3, 9, 11)
    img = np.random.default_rng(0).random(((2,) if batched else ()) + shape)
    out = as_numpy(pp.CenterCrop(size[0], size[1], data_format=data_format)(img))
    if data_format == "channels_first":
        ref = np.moveaxis(_np_center_crop(np.moveaxis(img, -3, -1), *size), -1, -3)
    else:
        ref = _np_center_crop(img, *size)
    assert_values(out, ref, atol=1e-6)


@pytest.mark.parametrize(
    "size,data_format", [((15, 10), "channels_first"), ((10, 17), "channels_last")]
)
@pytest.mark.parametrize("batched", [True, False])
def test_input_smaller_than_crop_box(size, data_format, batched):
    """center_crop_test.py::test_input_smaller_than_crop_box: equals Resizing with
    crop_to_aspect_ratio."""
    shape = (3, 9, 11) if data_format == "channels_first" else (9, 11, 3)
    img = np.random.default_rng(1).random(((2,) if batched else ()) + shape)
    out = pp.CenterCrop(size[0], size[1], data_format=data_format)(img)
    ref = pp.Resizing(size[0], size[1], data_format=data_format, crop_to_aspect_ratio=True)(img)
    assert_values(out, as_numpy(ref), atol=1e-6)


def test_tf_data_compatibility():
    """center_crop_test.py::test_tf_data_compatibility."""
    data = np.random.default_rng(2).random((2, 3, 10, 12))
    assert tuple(
        next(iter(dp.from_tensor_slices(data).batch(2).map(pp.CenterCrop(8, 9)))).shape
    ) == (2, 3, 8, 9)


@pytest.mark.parametrize("size", [(5, 17), (5, 100)])
def test_image_stretch(size):
    """center_crop_test.py::test_image_stretch: (2, 11, 3, 9) channels_last images."""
    img = np.random.default_rng(3).random((2, 11, 3, 9))
    out = pp.CenterCrop(size[0], size[1], data_format="channels_last")(img)
    ref = pp.Resizing(size[0], size[1], data_format="channels_last", crop_to_aspect_ratio=True)(img)
    assert tuple(out.shape) == (2, *size, 9)
    assert_values(out, as_numpy(ref), atol=1e-6)


BOX_CASES = [
    (5, 5, [[1.0, 0.0, 3.0, 1.0], [5.0, 2.0, 5.0, 4.0]]),
    (20, 20, [[5.0, 0.0, 10.0, 5.0], [15.0, 7.5, 20.0, 12.5]]),
]


@pytest.mark.parametrize("height,width,expected", BOX_CASES, ids=["normal", "with_stretch"])
def test_center_crop_bounding_boxes(height, width, expected):
    """center_crop_test.py::test_center_crop_bounding_boxes: a (3, 10, 8) image. The
    second box of the 5x5 crop keeps no pixel (x 5 to 5): Keras leaves it so; here it is
    also marked with label -1 (Keras's marker, as its clip_to_image_size does)."""
    layer = pp.CenterCrop(height=height, width=width, bounding_box_format="xyxy")
    out = layer(image_with_boxes((3, 10, 8), [[2, 1, 4, 3], [6, 4, 8, 6]]))
    assert_values(out["bounding_boxes"]["boxes"], expected, atol=1e-5)
    labels = as_numpy(out["bounding_boxes"]["labels"]).tolist()
    assert labels == ([1, -1] if height == 5 else [1, 2])


@pytest.mark.parametrize("height,width,expected", BOX_CASES, ids=["normal", "with_stretch"])
def test_center_crop_tf_data_bounding_boxes(height, width, expected):
    """center_crop_test.py::test_center_crop_tf_data_bounding_boxes: pipeline elements."""
    layer = pp.CenterCrop(height=height, width=width, bounding_box_format="xyxy")
    data = image_with_boxes((1, 3, 10, 8), [[2, 1, 4, 3], [6, 4, 8, 6]])
    data["bounding_boxes"] = {k: v[None] for k, v in data["bounding_boxes"].items()}
    out = next(iter(dp.from_tensor_slices(data).map(layer)))
    assert_values(out["bounding_boxes"]["boxes"], expected, atol=1e-5)


def test_dynamic_spatial_dims():
    """center_crop_test.py::test_dynamic_spatial_dims: one layer, a large then a small
    image size."""
    layer = pp.CenterCrop(10, 12)
    assert tuple(layer(np.random.default_rng(4).random((2, 3, 25, 30))).shape) == (2, 3, 10, 12)
    assert tuple(layer(np.random.default_rng(5).random((2, 3, 6, 7))).shape) == (2, 3, 10, 12)


def test_segmentation_mask_preserves_dtype_and_classes():
    """center_crop_test.py::test_segmentation_mask_preserves_dtype_and_classes."""
    mask_classes_kept(pp.CenterCrop(16, 16, data_format="channels_last"))
