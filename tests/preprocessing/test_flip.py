"""RandomFlip: exact pixels per image, all four outcomes, its boxes and keypoints, errors."""

import pytest
import torch
from _layer_helpers import img

import preprocessing as pp


# --------------------------------------------------------------------- flips
def test_flip_horizontal_exact_pixels_per_image():
    flip = pp.RandomFlip("horizontal")
    x = img(b=2)
    params = {"flip_h": torch.tensor([True, False]), "flip_v": torch.tensor([False, False])}
    out = flip.transform_images(x, params)
    assert torch.equal(out[0], x[0].flip(-1))
    assert torch.equal(out[1], x[1])


def test_flip_both_axes_independent_all_four_outcomes():
    flip = pp.RandomFlip("horizontal_and_vertical", seed=3)
    x = torch.arange(4.0).reshape(1, 1, 2, 2).expand(64, 1, 2, 2).contiguous()
    out = flip(x)
    outcomes = {tuple(o.flatten().tolist()) for o in out}
    assert outcomes == {
        (0.0, 1.0, 2.0, 3.0),
        (1.0, 0.0, 3.0, 2.0),
        (2.0, 3.0, 0.0, 1.0),
        (3.0, 2.0, 1.0, 0.0),
    }


def test_flip_twice_identity_with_same_params():
    flip = pp.RandomFlip("horizontal_and_vertical", seed=1)
    x = img(b=8)
    p = flip.get_random_transformation(x)
    assert torch.equal(flip.transform_images(flip.transform_images(x, p), p), x)


def test_flip_vertical_mode_never_flips_columns():
    flip = pp.RandomFlip("vertical", seed=0)
    p = flip.get_random_transformation(img(b=32))
    assert not p["flip_h"].any() and p["flip_v"].any() and not p["flip_v"].all()


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: pp.RandomFlip("diagonal"), "RandomFlip: mode must be one of"),
    ],
)
def test_bad_arguments_name_layer_and_argument(build, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("/", "/")):
        build()


# ------------------------------------------------------------------ exact cases
def test_flip_moves_boxes_and_keypoints_exactly():
    layer = pp.RandomFlip("horizontal_and_vertical", bounding_box_format="xyxy")
    params = {
        "flip_h": torch.tensor([True, False]),
        "flip_v": torch.tensor([True, True]),
        "input_shape": (2, 1, 10, 20),
    }
    boxes = {
        "boxes": torch.tensor([[[2.0, 1.0, 5.0, 4.0]]] * 2),
        "labels": torch.tensor([[3], [4]]),
    }
    out = layer.transform_bounding_boxes(boxes, params)
    assert out["boxes"].tolist() == [[[15.0, 6.0, 18.0, 9.0]], [[2.0, 6.0, 5.0, 9.0]]]
    points = layer.transform_keypoints(torch.tensor([[[2.5, 1.5]], [[0.0, 10.0]]]), params)
    assert points.tolist() == [[[17.5, 8.5]], [[0.0, 0.0]]]
