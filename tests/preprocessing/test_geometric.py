"""preprocessing.geometric: boxes, masks and keypoints move exactly where the pixels go,
for every layer that moves pixels.

Boxes are checked against a mask of the box (the pixels whose centres lie inside it)
pushed through the same layer with the same draw: the mask's extent must equal the box
within one pixel (the mask is sampled at pixel centres, the box is exact). Keypoints are
checked against the centroid of a 3x3 blob around them.
"""

import numpy as np
import pytest
import torch
from _layer_helpers import H, W, as_format, box_masks, extent, random_boxes

import preprocessing as pp

GEOMETRIC = {
    "flip": lambda **k: pp.RandomFlip("horizontal_and_vertical", **k),
    "rotation": lambda **k: pp.RandomRotation(0.15, fill_mode="constant", **k),
    "zoom": lambda **k: pp.RandomZoom((-0.4, 0.3), fill_mode="constant", **k),
    "translation": lambda **k: pp.RandomTranslation(0.2, 0.2, fill_mode="constant", **k),
    "shear": lambda **k: pp.RandomShear(0.3, 0.3, fill_mode="constant", **k),
    "perspective": lambda **k: pp.RandomPerspective(scale=0.6, **k),
    "elastic": lambda **k: pp.RandomElasticTransform(scale=0.5, fill_mode="constant", **k),
    "crop": lambda **k: pp.RandomCrop(24, 30, **k),
    "crop_upscale": lambda **k: pp.RandomCrop(48, 40, **k),
    "resized_crop": lambda **k: pp.RandomResizedCrop(30, 26, scale=(0.3, 1.0), **k),
    "resizing": lambda seed, **k: pp.Resizing(20, 50, **k),
    "resizing_crop": lambda seed, **k: pp.Resizing(20, 20, crop_to_aspect_ratio=True, **k),
    "resizing_pad": lambda seed, **k: pp.Resizing(20, 20, pad_to_aspect_ratio=True, **k),
    "center_crop": lambda seed, **k: pp.CenterCrop(20, 26, **k),
    "center_crop_upscale": lambda seed, **k: pp.CenterCrop(40, 30, **k),
}


def check_box_against_mask(box, ext, height, width):
    """The mask (pixel centres inside the moved box) never lies more than a pixel outside
    the box, and the box reaches at most a pixel past the mask; where the image border
    clips a turned box, the border and the box's edge make a wedge whose tip may hold no
    pixel centre, so a coordinate along a clipped border may reach one pixel further."""
    x1, y1, x2, y2 = box.tolist()
    clipped_y = y1 <= 0.0 or y2 >= height  # the top or bottom border cuts the box
    clipped_x = x1 <= 0.0 or x2 >= width
    slack = [1.0 if clipped_y else 0.0, 1.0 if clipped_x else 0.0] * 2
    for k, (b, e) in enumerate(zip((x1, y1, x2, y2), ext)):
        reach = (e - b) if k < 2 else (b - e)  # > 0: the box reaches past the mask
        assert -1.01 <= reach <= 1.01 + slack[k], (box.tolist(), ext)


# ------------------------------------------------------------------ review (issue 13)
@pytest.mark.parametrize(
    "layer, out_hw",
    [
        (pp.RandomElasticTransform(seed=0, bounding_box_format="xyxy"), (8, 8)),
        (pp.RandomResizedCrop(4, 6, seed=0, bounding_box_format="xyxy"), (4, 6)),
        (pp.RandomCrop(4, 6, seed=0, bounding_box_format="xyxy"), (4, 6)),
        (pp.RandomShear(0.2, seed=0, bounding_box_format="xyxy"), (8, 8)),
        (pp.RandomPerspective(seed=0, bounding_box_format="xyxy"), (8, 8)),
    ],
)
def test_empty_batch_gives_an_empty_batch(layer, out_hw):
    # A batch of 0 images (a filtered-out batch) failed inside torch's reshape/stack.
    out = layer(torch.rand(0, 3, 8, 8))
    assert out.shape == (0, 3, *out_hw) and out.dtype == torch.float32
    data = {
        "images": torch.rand(0, 3, 8, 8),
        "bounding_boxes": {"boxes": torch.zeros(0, 2, 4), "labels": torch.zeros(0, 2)},
        "segmentation_masks": torch.zeros(0, 8, 8, dtype=torch.int64),
        "keypoints": torch.zeros(0, 3, 2),
    }
    out = layer(data)
    assert out["images"].shape == (0, 3, *out_hw)
    assert out["bounding_boxes"]["boxes"].shape == (0, 2, 4)
    assert out["segmentation_masks"].shape == (0, *out_hw)
    assert out["keypoints"].shape == (0, 3, 2)


@pytest.mark.parametrize("fmt", ["channels_first", "channels_last"])
@pytest.mark.parametrize("name", sorted(GEOMETRIC))
def test_boxes_follow_a_mask_of_the_box(name, fmt):
    n_img, n_box = 6, 5
    boxes = random_boxes(n_img, n_box, seed=1)
    masks = box_masks(boxes)  # (B, N, H, W): one mask channel per box
    images = torch.rand(n_img, 3, H, W)
    layer = GEOMETRIC[name](seed=3, data_format=fmt, bounding_box_format="xyxy")
    labels = torch.arange(n_img * n_box).view(n_img, n_box)
    out = layer(
        {
            "images": as_format(images, fmt),
            "segmentation_masks": as_format(masks, fmt),
            "bounding_boxes": {"boxes": boxes, "labels": labels},
        }
    )
    got_masks = out["segmentation_masks"]
    if fmt == "channels_last":
        got_masks = got_masks.movedim(-1, 1)
    assert got_masks.dtype == torch.uint8
    assert (
        got_masks.shape[-2:] == out["images"].shape[(-2 if fmt == "channels_first" else -3) :][:2]
    )
    got_boxes, got_labels = out["bounding_boxes"]["boxes"], out["bounding_boxes"]["labels"]
    assert got_boxes.shape == boxes.shape and got_labels.shape == labels.shape
    checked = 0
    for i in range(n_img):
        for b in range(n_box):
            ext = extent(got_masks[i, b])
            if ext is None:
                # No pixel centre left inside: the box is (nearly) gone.
                box = got_boxes[i, b]
                assert got_labels[i, b] == -1 or min(box[2] - box[0], box[3] - box[1]) < 1.01
                continue
            assert got_labels[i, b] == labels[i, b]
            check_box_against_mask(got_boxes[i, b], ext, *got_masks.shape[-2:])
            checked += 1
    assert checked >= n_img * n_box // 2


@pytest.mark.parametrize("name", sorted(set(GEOMETRIC) - {"elastic"}))  # test_elastic.py
def test_keypoints_land_on_their_pixels(name):
    rng = np.random.default_rng(2)
    n_img, n_pts = 4, 6
    # Keypoints at pixel centres, away from the border, each marking a 3x3 blob.
    cols = rng.integers(6, W - 6, (n_img, n_pts))
    rows = rng.integers(6, H - 6, (n_img, n_pts))
    blobs = torch.zeros(n_img, n_pts, H, W)
    for i in range(n_img):
        for k in range(n_pts):
            blobs[i, k, rows[i, k] - 1 : rows[i, k] + 2, cols[i, k] - 1 : cols[i, k] + 2] = 1.0
    points = torch.tensor(np.stack([cols + 0.5, rows + 0.5, np.ones_like(cols)], -1)).float()
    layer = GEOMETRIC[name](seed=5)
    out = layer(
        {"images": torch.rand(n_img, 3, H, W), "segmentation_masks": blobs, "keypoints": points}
    )
    moved, warped = out["keypoints"], out["segmentation_masks"]
    assert moved.shape == points.shape and torch.equal(moved[..., 2], points[..., 2])
    oh, ow = warped.shape[-2:]
    checked = 0
    for i in range(n_img):
        for k in range(n_pts):
            ys, xs = torch.nonzero(warped[i, k], as_tuple=True)
            if (
                len(ys) < 2
                or ys.min() == 0
                or xs.min() == 0
                or ys.max() == oh - 1
                or xs.max() == ow - 1
            ):
                continue  # shrunk away, or cut by the border (its centroid moves)
            centroid = torch.stack([xs.float().mean() + 0.5, ys.float().mean() + 0.5])
            assert 0 <= moved[i, k, 0] <= ow and 0 <= moved[i, k, 1] <= oh
            assert torch.dist(centroid, moved[i, k, :2]) <= 1.0, (i, k, centroid, moved[i, k])
            checked += 1
    assert checked >= n_img * n_pts // 2


def test_boxes_without_a_format_raise_like_keras():
    data = {
        "images": torch.zeros(3, 4, 4),
        "bounding_boxes": {"boxes": torch.zeros(1, 4), "labels": torch.zeros(1)},
    }
    with pytest.raises(
        ValueError,
        match="RandomRotation: the input has 'bounding_boxes' but the layer has no bounding_box_fo",
    ):
        pp.RandomRotation(0.1)(data)
    with pytest.raises(ValueError, match="RandomFlip: bounding_box_format must be None or one of"):
        pp.RandomFlip(bounding_box_format="XYXY")


# ------------------------------------------------------------------ review (issue 13)
@pytest.mark.parametrize(
    "name", ["flip", "rotation", "perspective", "elastic", "crop", "resized_crop", "resizing"]
)
def test_boxes_with_no_area_stay_dropped(name):
    # An inverted box, a zero-width one and a NaN one hold no pixel: moving them must not
    # make them real boxes again (amin/amax of moved corners used to re-order an inverted
    # box and give a turned line segment an area); the valid box keeps its label.
    one = [[11.0, 5.0, 5.0, 11.0], [5.0, 5.0, 5.0, 11.0], [float("nan"), 5.0, 11.0, 11.0]]
    boxes = torch.tensor([one + [[5.0, 5.0, 11.0, 11.0]]]).repeat(4, 1, 1)
    labels = torch.tensor([[1, 2, 3, 4]]).repeat(4, 1)
    layer = GEOMETRIC[name](seed=0, bounding_box_format="xyxy")
    for _ in range(3):
        out = layer(
            {
                "images": torch.rand(4, 3, 16, 16),
                "bounding_boxes": {"boxes": boxes, "labels": labels},
            }
        )["bounding_boxes"]
        assert out["labels"][:, :3].tolist() == [[-1, -1, -1]] * 4, out
        assert out["labels"][:, 3].tolist() == [4] * 4


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_boxes_and_keypoints_are_moved_in_float32(dtype):
    # bfloat16 boxes on a 2000x3000 image came out of a perspective 9.6 px off, against
    # 2.6 px of bfloat16's own rounding: the corners were moved in bfloat16.
    images = torch.rand(2, 1, 2000, 3000)
    boxes = torch.tensor([[[1500.0, 900.0, 2600.0, 1900.0]], [[100.0, 100.0, 400.0, 300.0]]])
    points = torch.tensor([[[2999.0, 1999.0, 7.0]], [[1234.5, 876.5, 3.0]]])

    def run(b, p):
        layer = pp.RandomPerspective(seed=0, bounding_box_format="xyxy")
        out = layer(
            {
                "images": images,
                "bounding_boxes": {"boxes": b, "labels": torch.ones(2, 1)},
                "keypoints": p,
            }
        )
        return out["bounding_boxes"]["boxes"], out["keypoints"]

    boxes, points = boxes.to(dtype), points.to(dtype)  # 1500 is not exact in bfloat16
    want_boxes, want_points = run(boxes.float(), points.float())
    got_boxes, got_points = run(boxes, points)
    assert got_boxes.dtype == dtype and got_points.dtype == dtype
    assert torch.equal(got_boxes, want_boxes.to(dtype))
    assert torch.equal(got_points, want_points.to(dtype))
