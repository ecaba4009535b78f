"""Keras 3's ``image_preprocessing/random_perspective_test.py``, translated."""

import numpy as np
import pytest
import torch

import datapipe as dp
import preprocessing as pp

from ._util import (
    assert_unchanged,
    assert_values,
    layer_basics,
    moved_boxes,
    quad_in_image_extent,
)


def test_layer():
    """random_perspective_test.py::test_layer."""
    init = {"factor": 1.0, "scale": 0.5, "interpolation": "bilinear", "fill_value": 0, "seed": 1}
    layer_basics(pp.RandomPerspective, init, (8, 3, 4, 3), (8, 3, 4, 3))


def test_random_perspective_inference():
    """random_perspective_test.py::test_random_perspective_inference: eval()."""
    assert_unchanged(pp.RandomPerspective(data_format="channels_last").eval())


def test_random_perspective_no_op():
    """random_perspective_test.py::test_random_perspective_no_op: factor 0."""
    assert_unchanged(pp.RandomPerspective(factor=0, data_format="channels_last"))


def test_random_perspective_basic():
    """random_perspective_test.py::test_random_perspective_basic: corners (3, .) -> (1, .)
    shrink the ones image to its top-left 2x2 (channels-first branch)."""
    layer = pp.RandomPerspective(data_format="channels_first")
    params = {
        "apply_perspective": torch.tensor([True]),
        "start_points": torch.tensor([[[0.0, 0.0], [3.0, 0.0], [0.0, 3.0], [3.0, 3.0]]]),
        "end_points": torch.tensor([[[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]]),
    }
    expected = [
        [[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]
    ]
    assert_values(
        layer.transform_images(torch.ones(1, 4, 4), params), expected, atol=1e-4, rtol=1e-4
    )


def test_tf_data_compatibility():
    """random_perspective_test.py::test_tf_data_compatibility."""
    data = np.random.default_rng(0).random((2, 3, 8, 8))
    layer = pp.RandomPerspective(data_format="channels_first")
    assert tuple(next(iter(dp.from_tensor_slices(data).batch(2).map(layer))).shape) == (2, 3, 8, 8)


START = [[0.0, 0.0], [7.0, 0.0], [0.0, 9.0], [7.0, 9.0]]
BOXES = [[2, 1, 4, 3], [6, 4, 8, 6]]
CASES = [
    (
        [[0.0, 0.0], [8.151311, 0.0], [0.0, 12.695701], [9.2712054, 10.524198]],
        [[2.6490488, 1.1149256, 5.2026834, 3.6187303], [7.5547166, 4.2492595, 8.0, 6.869391]],
    ),
    (
        [[0.0, 0.0], [4.151311, 0.0], [0.0, 6.695701], [4.2712054, 7.524198]],
        [[1.095408, 0.7504317, 2.2761598, 2.3389952], [3.5416048, 3.2349987, 4.920989, 5.0568376]],
    ),
]


def _homography(src, dst):
    """The 3x3 H with H @ src_i ~ dst_i (bottom-right 1), solved in float64."""
    rows, rhs = [], []
    for (x, y), (u, v) in zip(src, dst):
        rows += [[x, y, 1, 0, 0, 0, -u * x, -u * y], [0, 0, 0, x, y, 1, -v * x, -v * y]]
        rhs += [u, v]
    return np.append(np.linalg.solve(np.array(rows), np.array(rhs)), 1.0).reshape(3, 3)


def _apply(h, points):
    p = np.c_[points, np.ones(len(points))] @ h.T
    return p[:, :2] / p[:, 2:]


def _corners(box):
    x1, y1, x2, y2 = box
    return np.array([[x1, y1], [x2, y1], [x2, y2], [x1, y2]], dtype=float)


def _keras_boxes(end):
    """Keras's transform_bounding_boxes: box corners through the start -> end homography
    of pixel indices, their extent clipped to the image."""
    h = _homography(START, end)
    out = []
    for box in BOXES:
        moved = _apply(h, _corners(box))
        out.append(np.clip([*moved.min(0), *moved.max(0)], 0, [8, 10, 8, 10]))
    return np.array(out)


def _pixel_boxes(end):
    """Where the pixels go: the same homography between pixel centres (index + 1/2 in
    continuous coordinates), the moved box's part inside the image."""
    h = _homography(START, end)
    half = np.array([[1, 0, 0.5], [0, 1, 0.5], [0, 0, 1]])
    h = half @ h @ np.linalg.inv(half)
    return np.array([quad_in_image_extent(_apply(h, _corners(box)), 10, 8) for box in BOXES])


@pytest.mark.parametrize("end,keras_boxes", CASES, ids=["with_large_scale", "with_small_scale"])
def test_random_perspective_bounding_boxes(end, keras_boxes):
    """random_perspective_test.py::test_random_perspective_bounding_boxes. Keras moves box
    corners with the homography of pixel indices (reproduced here: upstream's literal);
    here boxes follow their pixels (continuous coordinates, the moved box's part inside
    the image: D-K-22)."""
    assert_values(_keras_boxes(end), keras_boxes, atol=1e-3, rtol=1e-3)
    layer = pp.RandomPerspective(seed=42, bounding_box_format="xyxy")
    params = {
        "apply_perspective": torch.tensor([True]),
        "start_points": torch.tensor([START]),
        "end_points": torch.tensor([end]),
    }
    assert_values(moved_boxes(layer, BOXES, params, (3, 10, 8)), _pixel_boxes(end), atol=1e-3)


@pytest.mark.parametrize("end,keras_boxes", CASES, ids=["with_large_scale", "with_small_scale"])
def test_random_flip_tf_data_bounding_boxes(end, keras_boxes):
    """random_perspective_test.py::test_random_flip_tf_data_bounding_boxes (sic): the
    transformation mapped over a pipeline of (1, 2, 4) box elements."""
    layer = pp.RandomPerspective(seed=42, bounding_box_format="xyxy")
    params = {
        "apply_perspective": torch.tensor([True]),
        "start_points": torch.tensor([START]),
        "end_points": torch.tensor([end]),
        "input_shape": (1, 3, 10, 8),
    }
    boxes = {"boxes": np.array([BOXES], dtype="float32")[None], "labels": np.array([[1, 2]])[None]}
    ds = dp.from_tensor_slices(boxes).map(
        lambda b: layer.transform_bounding_boxes(
            {k: torch.as_tensor(v) for k, v in b.items()}, params
        )
    )
    assert_values(next(iter(ds))["boxes"][0], _pixel_boxes(end), atol=1e-3)
