"""Keras 3's ``image_preprocessing/max_num_bounding_box_test.py``, translated."""

import numpy as np
import torch

import datapipe as dp
import preprocessing as pp

from ._util import assert_values, image_with_boxes


def test_max_num_bounding_boxes_basics():
    """max_num_bounding_box_test.py::test_max_num_bounding_boxes_basics: an image alone
    passes through, no weights, the config round-trips."""
    layer = pp.MaxNumBoundingBoxes(max_number=40, fill_value=-1)
    x = torch.rand(3, 12, 12)
    assert layer(x) is x or torch.equal(layer(x), x)
    assert list(layer.parameters()) == []
    assert pp.MaxNumBoundingBoxes.from_config(layer.get_config()).get_config() == layer.get_config()


def test_output_shapes():
    """max_num_bounding_box_test.py::test_output_shapes: two boxes padded to 40."""
    layer = pp.MaxNumBoundingBoxes(max_number=40, bounding_box_format="xyxy")
    out = layer(image_with_boxes((3, 10, 8), [[2, 1, 4, 3], [6, 4, 8, 6]]))
    assert tuple(out["bounding_boxes"]["boxes"].shape) == (40, 4)
    assert tuple(out["bounding_boxes"]["labels"].shape) == (40,)
    assert_values(out["bounding_boxes"]["boxes"][:2], [[2, 1, 4, 3], [6, 4, 8, 6]])
    assert_values(out["bounding_boxes"]["labels"][:3], [1, 2, -1])
    assert_values(out["bounding_boxes"]["boxes"][2:], np.full((38, 4), -1.0))


def test_output_shapes_with_tf_data():
    """max_num_bounding_box_test.py::test_output_shapes_with_tf_data: mapped over
    elements, then batched by 1."""
    layer = pp.MaxNumBoundingBoxes(max_number=40, bounding_box_format="xyxy")
    data = image_with_boxes((1, 3, 10, 8), [[2, 1, 4, 3], [6, 4, 8, 6]])
    data["bounding_boxes"] = {k: v[None] for k, v in data["bounding_boxes"].items()}
    out = next(iter(dp.from_tensor_slices(data).map(layer).batch(1)))
    assert tuple(out["bounding_boxes"]["boxes"].shape) == (1, 40, 4)
    assert tuple(out["bounding_boxes"]["labels"].shape) == (1, 40)
