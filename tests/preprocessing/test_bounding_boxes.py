"""preprocessing.bounding_boxes: every format round-trips through xyxy, and clipping to the
image drops boxes with no area left (relative formats included).
"""

import pytest
import torch

import preprocessing as pp
from preprocessing.bounding_boxes import FORMATS as BOX_FORMATS
from preprocessing.bounding_boxes import clip_to_image_size, convert_format


# ------------------------------------------------------------------ formats
@pytest.mark.parametrize("fmt", BOX_FORMATS)
def test_every_format_round_trips_and_flips_like_xyxy(fmt):
    xyxy = torch.tensor([[[2.0, 1.0, 5.0, 7.0]]])
    boxes = convert_format(xyxy, "xyxy", fmt, height=10, width=20)
    back = convert_format(boxes, fmt, "xyxy", height=10, width=20)
    torch.testing.assert_close(back, xyxy)
    params = {
        "flip_h": torch.tensor([True]),
        "flip_v": torch.tensor([False]),
        "input_shape": (1, 1, 10, 20),
    }
    out = pp.RandomFlip(bounding_box_format=fmt).transform_bounding_boxes(
        {"boxes": boxes, "labels": torch.tensor([[0]])}, params
    )
    flipped = convert_format(out["boxes"], fmt, "xyxy", height=10, width=20)
    torch.testing.assert_close(flipped, torch.tensor([[[15.0, 1.0, 18.0, 7.0]]]))


def test_clip_to_image_size_in_relative_format():
    out = clip_to_image_size(
        {
            "boxes": torch.tensor([[-0.5, 0.2, 0.5, 1.5], [1.2, 0.0, 1.5, 1.0]]),
            "labels": torch.tensor([1, 2]),
        },
        10,
        10,
        "rel_xyxy",
    )
    torch.testing.assert_close(
        out["boxes"], torch.tensor([[0.0, 0.2, 0.5, 1.0], [1.0, 0.0, 1.0, 1.0]])
    )
    assert out["labels"].tolist() == [1, -1]


def test_clip_to_image_size_drops_boxes_inverted_on_both_axes():
    out = clip_to_image_size(
        {
            "boxes": torch.tensor([[8.0, 8.0, 2.0, 2.0], [2.0, 2.0, 8.0, 8.0]]),
            "labels": torch.tensor([1, 2]),
        },
        16,
        16,
    )
    assert out["labels"].tolist() == [-1, 2]
