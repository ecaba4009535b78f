"""Keras 3's ``image_preprocessing/random_translation_test.py``, translated."""

import numpy as np
import pytest
import torch

import datapipe as dp
import preprocessing as pp

from ._util import as_numpy, assert_values, image_with_boxes, layer_basics, moved_boxes


@pytest.mark.parametrize(
    "height,width",
    [(0.4, 0.6), (0.3, 0.2), ((-0.5, 0.4), (0.2, 0.3))],
    ids=["4_by_6", "3_by_2", "tuple"],
)
def test_random_translation(height, width):
    """random_translation_test.py::test_random_translation."""
    layer_basics(
        pp.RandomTranslation,
        {"height_factor": height, "width_factor": width, "seed": 0},
        (2, 3, 4),
        (2, 3, 4),
    )


@pytest.mark.parametrize(
    "height,width",
    [([0.1, 0.2, 0.3], 0.0), ({"dummy": 0.3}, 0.0), (-1.1, 0.0), ((-1.1, 0.0), 0.0)],
    ids=["bad_len", "bad_type", "exceed_range_single", "exceed_range_tuple"],
)
def test_random_translation_with_bad_factor(height, width):
    """random_translation_test.py::test_random_translation_with_bad_factor."""
    with pytest.raises(ValueError, match="height_factor must"):
        pp.RandomTranslation(height_factor=height, width_factor=width)


def test_random_translation_with_inference_mode():
    """random_translation_test.py::test_random_translation_with_inference_mode."""
    data = np.random.default_rng(0).random((1, 4, 4, 3))
    out = pp.RandomTranslation(0.2, 0.1, data_format="channels_last").eval()(data)
    assert_values(out, data.astype("float64"))


CASES = [  # (height_factor, width_factor, fill_mode, shape, expected)
    (
        (-0.2, -0.2),
        0.0,
        "reflect",
        (5, 5),
        [
            [5, 6, 7, 8, 9],
            [10, 11, 12, 13, 14],
            [15, 16, 17, 18, 19],
            [20, 21, 22, 23, 24],
            [20, 21, 22, 23, 24],
        ],
    ),
    (
        (-0.2, -0.2),
        0.0,
        "constant",
        (5, 5),
        [
            [5, 6, 7, 8, 9],
            [10, 11, 12, 13, 14],
            [15, 16, 17, 18, 19],
            [20, 21, 22, 23, 24],
            [0, 0, 0, 0, 0],
        ],
    ),
    (
        (0.2, 0.2),
        0.0,
        "reflect",
        (5, 5),
        [
            [0, 1, 2, 3, 4],
            [0, 1, 2, 3, 4],
            [5, 6, 7, 8, 9],
            [10, 11, 12, 13, 14],
            [15, 16, 17, 18, 19],
        ],
    ),
    (
        (0.5, 0.5),
        0.0,
        "reflect",
        (8, 2),
        [[6, 7], [4, 5], [2, 3], [0, 1], [0, 1], [2, 3], [4, 5], [6, 7]],
    ),
    (
        (0.2, 0.2),
        0.0,
        "constant",
        (5, 5),
        [
            [0, 0, 0, 0, 0],
            [0, 1, 2, 3, 4],
            [5, 6, 7, 8, 9],
            [10, 11, 12, 13, 14],
            [15, 16, 17, 18, 19],
        ],
    ),
    (
        0.0,
        (-0.2, -0.2),
        "reflect",
        (5, 5),
        [
            [1, 2, 3, 4, 4],
            [6, 7, 8, 9, 9],
            [11, 12, 13, 14, 14],
            [16, 17, 18, 19, 19],
            [21, 22, 23, 24, 24],
        ],
    ),
    (
        0.0,
        (-0.2, -0.2),
        "constant",
        (5, 5),
        [
            [1, 2, 3, 4, 0],
            [6, 7, 8, 9, 0],
            [11, 12, 13, 14, 0],
            [16, 17, 18, 19, 0],
            [21, 22, 23, 24, 0],
        ],
    ),
]
IDS = [
    "up_reflect",
    "up_constant",
    "down_reflect",
    "asymmetric_size_reflect",
    "down_constant",
    "left_reflect",
    "left_constant",
]


@pytest.mark.parametrize("data_format", ["channels_first", "channels_last"])
@pytest.mark.parametrize("height,width,fill_mode,shape,expected", CASES, ids=IDS)
def test_random_translation_up_numeric_reflect(
    height, width, fill_mode, shape, expected, data_format
):
    """random_translation_test.py::test_random_translation_up_numeric_reflect,
    ::test_random_translation_up_numeric_constant,
    ::test_random_translation_down_numeric_reflect,
    ::test_random_translation_asymmetric_size_numeric_reflect,
    ::test_random_translation_down_numeric_constant,
    ::test_random_translation_left_numeric_reflect and
    ::test_random_translation_left_numeric_constant (both layouts)."""
    image = np.arange(shape[0] * shape[1]).astype("float32").reshape(shape)
    want = np.asarray(expected, dtype="float32")
    if data_format == "channels_last":
        image, want = image[None, :, :, None], want[None, :, :, None]
    else:
        image, want = image[None, None], want[None, None]
    layer = pp.RandomTranslation(
        height, width, fill_mode=fill_mode, fill_value=0.0, data_format=data_format
    )
    assert_values(layer(image), want, atol=1e-5)


def test_tf_data_compatibility():
    """random_translation_test.py::test_tf_data_compatibility."""
    data = np.random.default_rng(1).random((1, 4, 4, 3))
    layer = pp.RandomTranslation(0.2, 0.1, data_format="channels_last")
    assert tuple(next(iter(dp.from_tensor_slices(data).batch(1).map(layer))).shape) == (1, 4, 4, 3)


BOX_CASES = [
    ((1.0, 2.0), [[3.0, 3.0, 5.0, 5.0], [7.0, 6.0, 8.0, 8.0]]),
    ((-1.0, -2.0), [[1.0, 0.0, 3.0, 1.0], [5.0, 2.0, 7.0, 4.0]]),
]


@pytest.mark.parametrize(
    "shift,expected", BOX_CASES, ids=["with_positive_shift", "with_negative_shift"]
)
def test_random_flip_bounding_boxes(shift, expected):
    """random_translation_test.py::test_random_flip_bounding_boxes (sic: translated
    boxes): Keras's translations [dx, dy] are ``dx`` / ``dy`` here."""
    layer = pp.RandomTranslation(
        0.5, 0.5, data_format="channels_first", seed=42, bounding_box_format="xyxy"
    )
    params = {"dx": torch.tensor([shift[0]]), "dy": torch.tensor([shift[1]])}
    assert_values(
        moved_boxes(layer, [[2, 1, 4, 3], [6, 4, 8, 6]], params, (3, 10, 8)), expected, atol=1e-5
    )


@pytest.mark.parametrize(
    "shift,expected", BOX_CASES, ids=["with_positive_shift", "with_negative_shift"]
)
def test_random_flip_tf_data_bounding_boxes(shift, expected):
    """random_translation_test.py::test_random_flip_tf_data_bounding_boxes: through a
    pipeline, the shift drawn from a fixed range (dx / 8, dy / 10 of the image)."""
    layer = pp.RandomTranslation(
        (shift[1] / 10, shift[1] / 10),
        (shift[0] / 8, shift[0] / 8),
        seed=42,
        bounding_box_format="xyxy",
    )
    data = image_with_boxes((1, 3, 10, 8), [[2, 1, 4, 3], [6, 4, 8, 6]])
    data["bounding_boxes"] = {k: v[None] for k, v in data["bounding_boxes"].items()}
    out = next(iter(dp.from_tensor_slices(data).map(layer)))
    assert_values(as_numpy(out["bounding_boxes"]["boxes"]), expected, atol=1e-5)
