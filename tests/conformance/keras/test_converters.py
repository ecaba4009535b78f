"""Keras 3's ``image_preprocessing/bounding_boxes/converters_test.py``, translated
(``preprocessing.bounding_boxes`` holds Keras's ``convert_format`` and
``clip_to_image_size``)."""

import itertools

import numpy as np
import pytest
import torch

import preprocessing as pp
from preprocessing.bounding_boxes import clip_to_image_size, convert_format

from ._util import assert_values, moved_boxes

BOXES = {
    "xyxy": [[[10, 20, 110, 120], [20, 30, 120, 130]]],
    "yxyx": [[[20, 10, 120, 110], [30, 20, 130, 120]]],
    "rel_xyxy": [[[0.01, 0.02, 0.11, 0.12], [0.02, 0.03, 0.12, 0.13]]],
    "rel_yxyx": [[[0.02, 0.01, 0.12, 0.11], [0.03, 0.02, 0.13, 0.12]]],
    "center_xywh": [[[60, 70, 100, 100], [70, 80, 100, 100]]],
    "center_yxhw": [[[70, 60, 100, 100], [80, 70, 100, 100]]],
    "xywh": [[[10, 20, 100, 100], [20, 30, 100, 100]]],
    "rel_xywh": [[[0.01, 0.02, 0.1, 0.1], [0.02, 0.03, 0.1, 0.1]]],
}
FORMATS = ["xyxy", "yxyx", "xywh", "rel_xyxy", "rel_yxyx", "center_xywh", "center_yxhw"]
PAIRS = list(itertools.permutations(FORMATS, 2)) + [("xyxy", "xyxy")]


@pytest.mark.parametrize("source,target", PAIRS, ids=[f"{s}_{t}" for s, t in PAIRS])
def test_convert_all_formats(source, target):
    """converters_test.py::test_convert_all_formats (every ordered pair, 1000 x 1000)."""
    out = convert_format(
        torch.tensor(BOXES[source]), source=source, target=target, height=1000, width=1000
    )
    assert_values(out, np.array(BOXES[target], dtype="float32"), atol=1e-5, rtol=1e-5)


def test_convert_format_invalid_source():
    """converters_test.py::test_convert_format_invalid_source."""
    with pytest.raises(ValueError, match="source must be one of"):
        convert_format(torch.tensor(BOXES["xywh"]), source="invalid", target="xywh")


def test_convert_format_invalid_target():
    """converters_test.py::test_convert_format_invalid_target."""
    with pytest.raises(ValueError, match="target must be one of"):
        convert_format(torch.tensor(BOXES["xyxy"]), source="xyxy", target="invalid")


def test_convert_format_missing_dimensions():
    """converters_test.py::test_convert_format_missing_dimensions."""
    with pytest.raises(ValueError, match="needs the image's height and width"):
        convert_format(torch.tensor(BOXES["xyxy"]), source="xyxy", target="rel_xyxy")


def test_clip_to_image_size():
    """converters_test.py::test_clip_to_image_size: rel_xyxy boxes clipped to [0, 1] (the
    image size is an argument here; relative boxes do not depend on it)."""
    boxes = {
        "boxes": torch.tensor([[0.0, 0.0, 1.5, 1.6], [0.5, 0.4, 0.7, 0.8]]),
        "labels": torch.tensor([0, 1]),
    }
    for size in ((1, 1), (480, 640)):
        out = clip_to_image_size(boxes, *size, bounding_box_format="rel_xyxy")
        assert_values(out["boxes"], [[0.0, 0.0, 1.0, 1.0], [0.5, 0.4, 0.7, 0.8]], atol=1e-6)
        assert_values(out["labels"], [0, 1])


def test_affine_identity():
    """converters_test.py::test_affine_identity: an identity transform leaves boxes as
    they are (Keras's box ``affine_transform`` with zero angle, translation and shear and
    scale 1; here the geometric layers move boxes, each given identity parameters)."""
    boxes = BOXES["xyxy"][0]
    cases = [
        (pp.RandomRotation(0.1, bounding_box_format="xyxy"), {"angle": torch.zeros(1)}),
        (
            pp.RandomTranslation(0.1, 0.1, bounding_box_format="xyxy"),
            {"dx": torch.zeros(1), "dy": torch.zeros(1)},
        ),
        (
            pp.RandomZoom(0.1, bounding_box_format="xyxy"),
            {"height_zoom": torch.ones(1), "width_zoom": torch.ones(1)},
        ),
        (pp.RandomShear(0.1, 0.1, bounding_box_format="xyxy"), {"shear_factor": torch.zeros(1, 2)}),
    ]
    for layer, params in cases:
        assert_values(moved_boxes(layer, boxes, params, (3, 1000, 1000)), boxes, atol=1e-3)
