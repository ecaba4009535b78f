"""Keras 3's ``image_preprocessing/random_zoom_test.py``, translated."""

import numpy as np
import pytest
import torch

import datapipe as dp
import preprocessing as pp

from ._util import as_numpy, assert_values, image_with_boxes, layer_basics, moved_boxes

ARANGE = np.arange(25).reshape(1, 1, 5, 5)


@pytest.mark.parametrize(
    "height,width",
    [
        (-0.4, -0.6),
        (-0.2, -0.3),
        ((-0.4, -0.5), (-0.2, -0.3)),
        (0.4, 0.6),
        (0.2, 0.3),
        ((0.4, 0.5), (0.2, 0.3)),
    ],
    ids=["in_4_by_6", "in_2_by_3", "in_tuple", "out_4_by_6", "out_2_by_3", "out_tuple"],
)
def test_random_zoom(height, width):
    """random_zoom_test.py::test_random_zoom. Upstream's (-0.4, -0.5) has lower > upper,
    which Keras sorts and this package refuses (D-K-4); the sorted pair is the same zoom."""
    if isinstance(height, tuple) and height[0] > height[1]:
        with pytest.raises(ValueError, match="lower <= upper"):
            pp.RandomZoom(height_factor=height, width_factor=width)
        height, width = tuple(sorted(height)), tuple(sorted(width))
    layer_basics(
        pp.RandomZoom,
        {"height_factor": height, "width_factor": width, "seed": 0},
        (2, 3, 4),
        (2, 3, 4),
    )


def test_random_zoom_out_correctness():
    """random_zoom_test.py::test_random_zoom_out_correctness."""
    layer = pp.RandomZoom((0.5, 0.5), (0.8, 0.8), interpolation="bilinear", fill_mode="constant")
    expected = [
        [0, 0, 0, 0, 0],
        [0, 2.7, 4.5, 6.3, 0],
        [0, 10.2, 12.0, 13.8, 0],
        [0, 17.7, 19.5, 21.3, 0],
        [0, 0, 0, 0, 0],
    ]
    assert_values(layer(ARANGE), np.reshape(expected, (1, 1, 5, 5)), atol=1e-5)


def test_random_zoom_in_correctness():
    """random_zoom_test.py::test_random_zoom_in_correctness."""
    layer = pp.RandomZoom(
        (-0.5, -0.5), (-0.5, -0.5), interpolation="bilinear", fill_mode="constant"
    )
    expected = [
        [6.0, 6.5, 7.0, 7.5, 8.0],
        [8.5, 9.0, 9.5, 10.0, 10.5],
        [11.0, 11.5, 12.0, 12.5, 13.0],
        [13.5, 14.0, 14.5, 15.0, 15.5],
        [16.0, 16.5, 17.0, 17.5, 18.0],
    ]
    assert_values(layer(ARANGE), np.reshape(expected, (1, 1, 5, 5)), atol=1e-5)


def test_tf_data_compatibility():
    """random_zoom_test.py::test_tf_data_compatibility: nearest sampling in a pipeline.
    Output row 1 samples input row 0.5 exactly: Keras's TensorFlow kernel (what runs in
    tf.data) rounds that tie up, to row 1 ([0, 5, 7, 9, 0]); here ties round to even, as
    Keras's torch backend's ``torch.round`` (D-K-23), to row 0; every other pixel is
    upstream's."""
    layer = pp.RandomZoom((0.5, 0.5), (0.8, 0.8), interpolation="nearest", fill_mode="constant")
    out = as_numpy(next(iter(dp.from_tensor_slices(ARANGE).batch(1).map(layer))))[0, 0]
    expected = np.array(
        [[0, 0, 0, 0, 0], [0, 5, 7, 9, 0], [0, 10, 12, 14, 0], [0, 20, 22, 24, 0], [0, 0, 0, 0, 0]]
    )
    rows = [0, 2, 3, 4]
    assert_values(out[rows], expected[rows])
    assert_values(out[1], [0, 0, 2, 4, 0])  # input row 0: the tie rounded to even


def test_dynamic_shape():
    """random_zoom_test.py::test_dynamic_shape: any image size."""
    layer = pp.RandomZoom(
        (0.5, 0.5),
        (0.8, 0.8),
        interpolation="nearest",
        fill_mode="constant",
        data_format="channels_last",
    )
    for shape in ((1, 6, 6, 3), (2, 9, 7, 3)):
        assert tuple(layer(torch.rand(shape)).shape) == shape


def test_connect_with_flatten():
    """random_zoom_test.py::test_connect_with_flatten: in a torch model that trains (one
    SGD step through the zoom)."""
    model = torch.nn.Sequential(
        pp.RandomZoom((-0.5, 0.0), (-0.5, 0.0), seed=0),
        torch.nn.Flatten(),
        torch.nn.Linear(4, 1),
        torch.nn.ReLU(),
    )
    x, y = torch.rand(2, 1, 2, 2), torch.rand(2, 1)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    assert model[2].weight.grad is not None and torch.isfinite(model[2].weight.grad).all()


BOX_CASES = [
    (0.1, [[0.0, 0.0, 8.0, 0.0], [8.0, 0.0, 8.0, 10.0]]),
    (1.9, [[2.710526, 2.657895, 3.763158, 3.710526], [4.815789, 4.236842, 5.868421, 5.289474]]),
]


def _continuous_zoom(boxes, zoom, height=10, width=8):
    """Where the pixels go: x' = W/2 + (x - W/2) / zoom in continuous coordinates."""
    b = np.asarray(boxes, dtype=float)
    cx, cy = width / 2, height / 2
    out = np.stack(
        [
            cx + (b[:, 0] - cx) / zoom,
            cy + (b[:, 1] - cy) / zoom,
            cx + (b[:, 2] - cx) / zoom,
            cy + (b[:, 3] - cy) / zoom,
        ],
        1,
    )
    return np.clip(out, 0, [width, height, width, height])


@pytest.mark.parametrize("zoom,keras_boxes", BOX_CASES, ids=["with_zoom_in", "with_zoom_out"])
def test_random_flip_bounding_boxes(zoom, keras_boxes):
    """random_zoom_test.py::test_random_flip_bounding_boxes (sic: zoomed boxes). Keras
    moves box corners with its pixel-index matrix (centre (W - 1) / 2), half a pixel
    times the zoom away from where the box's pixels go; here boxes follow the pixels
    (centre W / 2 in continuous coordinates: D-K-22). Zoom-in x10 leaves both boxes
    without area in both (Keras's literal boxes have zero width or height; here they are
    dropped, label -1)."""
    layer = pp.RandomZoom(
        height_factor=(0.5, 0.5), data_format="channels_first", seed=42, bounding_box_format="xyxy"
    )
    params = {"height_zoom": torch.tensor([zoom]), "width_zoom": torch.tensor([zoom])}
    boxes = [[2, 1, 4, 3], [6, 4, 8, 6]]
    out = moved_boxes(layer, boxes, params, (3, 10, 8))
    keras = np.asarray(keras_boxes)
    if zoom < 1:
        assert ((keras[:, 2] - keras[:, 0]) * (keras[:, 3] - keras[:, 1]) == 0).all()
        assert_values(out, np.zeros((2, 4)))
    else:
        assert_values(out, _continuous_zoom(boxes, zoom), atol=1e-5)
        assert np.abs(out - keras).max() <= 0.5 / zoom * 1.0 + 1e-5


@pytest.mark.parametrize("zoom,keras_boxes", BOX_CASES, ids=["with_zoom_in", "with_zoom_out"])
def test_random_flip_tf_data_bounding_boxes(zoom, keras_boxes):
    """random_zoom_test.py::test_random_flip_tf_data_bounding_boxes: the same through a
    pipeline (the zoom drawn by a layer whose factor range is the zoom)."""
    layer = pp.RandomZoom(height_factor=(zoom - 1, zoom - 1), seed=42, bounding_box_format="xyxy")
    data = image_with_boxes((1, 3, 10, 8), [[2, 1, 4, 3], [6, 4, 8, 6]])
    data["bounding_boxes"] = {k: v[None] for k, v in data["bounding_boxes"].items()}
    out = next(iter(dp.from_tensor_slices(data).map(layer)))
    if zoom < 1:
        assert as_numpy(out["bounding_boxes"]["labels"]).tolist() == [-1, -1]
    else:
        assert_values(
            out["bounding_boxes"]["boxes"],
            _continuous_zoom([[2, 1, 4, 3], [6, 4, 8, 6]], zoom),
            atol=1e-5,
        )
