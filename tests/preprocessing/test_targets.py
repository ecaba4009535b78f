"""One draw, many targets: boxes, masks and keypoints move exactly where the pixels go.

Boxes are checked against a mask of the box (the pixels whose centres lie inside it)
pushed through the same layer with the same draw: the mask's extent must equal the box
within one pixel (the mask is sampled at pixel centres, the box is exact). Keypoints are
checked against the centroid of a 3x3 blob around them.
"""

import numpy as np
import pytest
import torch
from differential import keras

import preprocessing as pp
from preprocessing.bounding_boxes import FORMATS, clip_to_image_size, convert_format

H, W = 36, 44

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


def random_boxes(n_img, n_box, seed=0):
    """Boxes with whole-pixel edges: then a nearest-resampled mask pixel is in the box
    exactly when its centre maps inside the box, and the mask's extent is within one
    output pixel of the moved box."""
    rng = np.random.default_rng(seed)
    x1 = rng.integers(0, W - 8, (n_img, n_box))
    y1 = rng.integers(0, H - 8, (n_img, n_box))
    x2 = x1 + rng.integers(4, 20, (n_img, n_box))
    y2 = y1 + rng.integers(4, 16, (n_img, n_box))
    boxes = np.stack([x1, y1, np.minimum(x2, W), np.minimum(y2, H)], -1)
    return torch.tensor(boxes, dtype=torch.float32)


def box_masks(boxes):
    """(B, N, H, W) uint8: pixel (i, j) is in box b when its centre lies inside b."""
    cy = torch.arange(H).view(1, 1, H, 1) + 0.5
    cx = torch.arange(W).view(1, 1, 1, W) + 0.5
    x1, y1, x2, y2 = (boxes[..., k, None, None] for k in range(4))
    return ((cx >= x1) & (cx < x2) & (cy >= y1) & (cy < y2)).to(torch.uint8)


def extent(mask):
    """xyxy extent of the nonzero pixels of a (H, W) mask, None when empty."""
    rows, cols = torch.nonzero(mask, as_tuple=True)
    if rows.numel() == 0:
        return None
    return [cols.min().item(), rows.min().item(), cols.max().item() + 1, rows.max().item() + 1]


def as_format(t, fmt):
    """(B, C, H, W) -> the layout of ``fmt``."""
    return t if fmt == "channels_first" else t.movedim(1, -1)


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


@pytest.mark.parametrize("name", sorted(set(GEOMETRIC) - {"elastic"}))  # test_new_layers
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


def test_random_crop_shifts_boxes_by_its_offset():
    # Keras 3 ignores the crop's offset; here a box moves by exactly (-left, -top).
    layer = pp.RandomCrop(6, 8, bounding_box_format="xyxy")
    params = {"top": torch.tensor([2]), "left": torch.tensor([3]), "input_shape": (1, 1, 10, 12)}
    out = layer.transform_bounding_boxes(
        {
            "boxes": torch.tensor([[[4.0, 3.0, 7.0, 5.0], [0.0, 0.0, 2.0, 1.0]]]),
            "labels": torch.tensor([[1, 2]]),
        },
        params,
    )
    assert out["boxes"].tolist() == [[[1.0, 1.0, 4.0, 3.0], [0.0, 0.0, 0.0, 0.0]]]
    assert out["labels"].tolist() == [[1, -1]]  # the second box left the crop


@pytest.mark.parametrize("fmt", ["channels_first", "channels_last"])
def test_quarter_turn_moves_box_masks_and_points_with_no_pixel_lost(fmt):
    # Keras 3's boxes are a pixel off after a 90-degree turn; here they match exactly.
    size = 12
    layer = pp.RandomRotation((0.25, 0.25), data_format=fmt, bounding_box_format="xyxy")
    mask = torch.zeros(1, 1, size, size, dtype=torch.uint8)
    mask[0, 0, 2:5, 1:8] = 1  # rows 2-4, columns 1-7: box [1, 2, 8, 5]
    out = layer(
        {
            "images": as_format(torch.rand(1, 3, size, size), fmt),
            "segmentation_masks": as_format(mask, fmt),
            "bounding_boxes": {
                "boxes": torch.tensor([[[1.0, 2.0, 8.0, 5.0]]]),
                "labels": torch.tensor([[1]]),
            },
            "keypoints": torch.tensor([[[1.5, 2.5]]]),
        }
    )
    turned = (
        out["segmentation_masks"]
        if fmt == "channels_first"
        else out["segmentation_masks"].movedim(-1, 1)
    )
    assert torch.equal(turned[0, 0], torch.rot90(mask[0, 0], 1))  # counter-clockwise
    box = out["bounding_boxes"]["boxes"][0, 0]
    assert extent(turned[0, 0]) == [2, 4, 5, 11]
    torch.testing.assert_close(box, torch.tensor([2.0, 4.0, 5.0, 11.0]), atol=1e-4, rtol=0)
    # Pixel (row 2, col 1) goes to (row 10, col 2) under rot90.
    torch.testing.assert_close(out["keypoints"][0, 0], torch.tensor([2.5, 10.5]), atol=1e-4, rtol=0)


def test_resizing_scales_relative_and_absolute_boxes():
    layer = pp.Resizing(5, 10, bounding_box_format="rel_xyxy")
    boxes = {"boxes": torch.tensor([[0.1, 0.2, 0.5, 0.6]]), "labels": torch.tensor([0])}
    out = layer({"images": torch.rand(3, 10, 20), "bounding_boxes": boxes})
    torch.testing.assert_close(
        out["bounding_boxes"]["boxes"], boxes["boxes"]
    )  # relative: unchanged
    absolute = pp.Resizing(5, 10, bounding_box_format="xywh")(
        {
            "images": torch.rand(3, 10, 20),
            "bounding_boxes": {
                "boxes": torch.tensor([[2.0, 2.0, 8.0, 4.0]]),
                "labels": torch.tensor([0]),
            },
        }
    )
    assert absolute["bounding_boxes"]["boxes"].tolist() == [[1.0, 1.0, 4.0, 2.0]]


# ------------------------------------------------------------ dict mechanics
def test_single_image_dict_equals_batch_of_one():
    layer_a = pp.RandomRotation(0.2, seed=4, bounding_box_format="center_xywh")
    layer_b = pp.RandomRotation(0.2, seed=4, bounding_box_format="center_xywh")
    image = torch.rand(3, 16, 16)
    boxes = torch.tensor([[8.0, 8.0, 4.0, 6.0]])
    single = layer_a(
        {
            "images": image,
            "bounding_boxes": {"boxes": boxes, "labels": torch.tensor([1])},
            "segmentation_masks": torch.ones(16, 16, dtype=torch.int64),
            "keypoints": torch.tensor([[3.0, 4.0]]),
            "labels": 7,
        }
    )
    batch = layer_b(
        {
            "images": image[None],
            "bounding_boxes": {"boxes": boxes[None], "labels": torch.tensor([[1]])},
            "segmentation_masks": torch.ones(1, 16, 16, dtype=torch.int64),
            "keypoints": torch.tensor([[[3.0, 4.0]]]),
            "labels": torch.tensor([7]),
        }
    )
    assert torch.equal(single["images"], batch["images"][0])
    assert torch.equal(single["bounding_boxes"]["boxes"], batch["bounding_boxes"]["boxes"][0])
    assert single["segmentation_masks"].shape == (16, 16)
    assert torch.equal(single["segmentation_masks"], batch["segmentation_masks"][0])
    assert torch.equal(single["keypoints"], batch["keypoints"][0])
    assert single["labels"] == 7


def test_photometric_layer_passes_other_targets_untouched():
    boxes = {"boxes": np.array([[1.0, 2.0, 3.0, 4.0]]), "labels": np.array([5])}
    masks, points, extra = np.zeros((8, 8)), np.zeros((2, 2)), object()
    data = {
        "images": torch.rand(3, 8, 8),
        "bounding_boxes": boxes,
        "segmentation_masks": masks,
        "keypoints": points,
        "labels": 3,
        "image_id": extra,
    }
    out = pp.RandomBrightness(0.3, value_range=(0, 1), seed=0)(data)
    assert out is not data and data["images"] is not out["images"]
    for key in ("bounding_boxes", "segmentation_masks", "keypoints", "labels", "image_id"):
        assert out[key] is data[key]  # not even converted: no format needed
    assert not torch.equal(out["images"], data["images"])


def test_eval_mode_leaves_targets_and_random_crop_centres_them():
    boxes = {"boxes": torch.tensor([[[2.0, 2.0, 6.0, 6.0]]]), "labels": torch.tensor([[1]])}
    data = {"images": torch.rand(1, 3, 8, 8), "bounding_boxes": boxes}
    rot = pp.RandomRotation(0.3, bounding_box_format="xyxy").eval()
    out = rot(data)
    assert out["bounding_boxes"] is boxes and torch.equal(out["images"], data["images"])
    crop = pp.RandomCrop(4, 4, bounding_box_format="xyxy").eval()
    out = crop(data)
    assert torch.equal(out["images"], data["images"][:, :, 2:6, 2:6])
    assert out["bounding_boxes"]["boxes"].tolist() == [[[0.0, 0.0, 4.0, 4.0]]]


def test_pipeline_fuses_and_moves_targets_like_the_layers_in_turn():
    flip = pp.RandomFlip("horizontal_and_vertical", seed=1, bounding_box_format="xyxy")
    turn = pp.RandomRotation((0.25, 0.25), seed=2, bounding_box_format="xyxy")
    boxes = {
        "boxes": random_boxes(4, 3, seed=4)[:, :, :].clamp(max=H),
        "labels": torch.ones(4, 3, dtype=torch.long),
    }
    images = torch.rand(4, 3, H, H)
    boxes["boxes"] = boxes["boxes"].clamp(max=H)
    data = {
        "images": images,
        "bounding_boxes": boxes,
        "keypoints": torch.tensor([[[3.5, 7.5]]] * 4),
    }
    fused = pp.Pipeline([pp.layer_from_config(pp.serialize_layer(x)) for x in (flip, turn)])(data)
    seq = turn(flip(data))
    torch.testing.assert_close(fused["images"], seq["images"], atol=1e-5, rtol=0)
    torch.testing.assert_close(
        fused["bounding_boxes"]["boxes"], seq["bounding_boxes"]["boxes"], atol=1e-4, rtol=0
    )
    torch.testing.assert_close(fused["keypoints"], seq["keypoints"], atol=1e-4, rtol=0)


def test_pipeline_refuses_fused_layers_with_different_box_formats():
    pipe = pp.Pipeline(
        [
            pp.RandomFlip(bounding_box_format="xyxy"),
            pp.RandomRotation(0.1, bounding_box_format="xywh"),
        ]
    )
    data = {
        "images": torch.rand(1, 3, 8, 8),
        "bounding_boxes": {"boxes": torch.zeros(1, 1, 4), "labels": torch.zeros(1, 1)},
    }
    with pytest.raises(ValueError, match="agree on bounding_box_format"):
        pipe(data)


@pytest.mark.parametrize(
    "data, message",
    [
        ({"image": torch.zeros(3, 4, 4)}, "a dict input needs an 'images' key"),
        (
            {"images": torch.zeros(3, 4, 4), "keypoint": torch.zeros(1, 2)},
            "did you mean 'keypoints'",
        ),
        (
            {"images": torch.zeros(3, 4, 4), "bounding_boxes": torch.zeros(1, 4)},
            "must be a dict with keys 'boxes' and 'labels'",
        ),
        (
            {
                "images": torch.zeros(3, 4, 4),
                "bounding_boxes": {"boxes": torch.zeros(1, 1, 4), "labels": torch.zeros(1)},
            },
            r"must have shape \(N, 4\) for one image",
        ),
        (
            {
                "images": torch.zeros(2, 3, 4, 4),
                "bounding_boxes": {"boxes": torch.zeros(2, 1, 4), "labels": torch.zeros(2)},
            },
            r"'labels'\] must have shape \(2, 1\)",
        ),
        (
            {"images": torch.zeros(2, 3, 4, 4), "segmentation_masks": torch.zeros(3, 4, 4)},
            "hold 3 masks for 2 images",
        ),
        (
            {"images": torch.zeros(2, 3, 4, 4), "keypoints": torch.zeros(2, 3)},
            r"keypoints must have shape \(2, K, 2\+\)",
        ),
    ],
)
def test_malformed_dicts_name_the_layer_and_key(data, message):
    with pytest.raises(ValueError, match=message):
        pp.RandomFlip(seed=0, bounding_box_format="xyxy")(data)


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


# ------------------------------------------------------------------ formats
@pytest.mark.parametrize("fmt", FORMATS)
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


# ------------------------------------------------------------- MaxNumBoundingBoxes
def test_max_num_bounding_boxes_pads_and_truncates_batches():
    layer = pp.MaxNumBoundingBoxes(2, fill_value=-7)
    boxes = torch.arange(24.0).view(2, 3, 4)
    labels = torch.tensor([[1, 2, 3], [4, 5, 6]])
    images = torch.zeros(2, 3, 4, 4, dtype=torch.uint8)
    out = layer({"images": images, "bounding_boxes": {"boxes": boxes, "labels": labels}})
    assert torch.equal(out["bounding_boxes"]["boxes"], boxes[:, :2]) and out["bounding_boxes"][
        "labels"
    ].tolist() == [[1, 2], [4, 5]]
    assert out["images"] is images or torch.equal(out["images"], images)
    assert out["images"].dtype == torch.uint8
    wide = pp.MaxNumBoundingBoxes(4)(
        {"images": images, "bounding_boxes": {"boxes": boxes, "labels": labels}}
    )
    assert wide["bounding_boxes"]["boxes"].shape == (2, 4, 4) and wide["bounding_boxes"]["labels"][
        :, 3
    ].tolist() == [-1, -1]
    empty = pp.MaxNumBoundingBoxes(2)(
        {
            "images": images[0],
            "bounding_boxes": {
                "boxes": torch.zeros(0, 4),
                "labels": torch.zeros(0, dtype=torch.long),
            },
        }
    )
    assert empty["bounding_boxes"]["boxes"].tolist() == [[-1.0] * 4] * 2
    with pytest.raises(ValueError, match=r"max_number must be an int >= 1 and <= 65536; got 0"):
        pp.MaxNumBoundingBoxes(0)


def keras_max_num_boxes(n, boxes, labels):
    # Keras's __call__ insists on a bounding_box_format it then loses; its transform is
    # the layer's semantics.
    theirs = (
        keras()
        .layers.MaxNumBoundingBoxes(n)
        .transform_bounding_boxes({"boxes": boxes, "labels": labels}, None)
    )
    return {k: np.asarray(theirs[k]) for k in ("boxes", "labels")}


def test_max_num_bounding_boxes_matches_keras(ref):
    boxes = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    labels = np.array([[1, 2, 3], [4, 5, 6]])
    for n in (2, 5):
        theirs = ref(keras_max_num_boxes, n, boxes, labels)
        ours = pp.MaxNumBoundingBoxes(n)(
            {
                "images": torch.zeros(2, 3, 4, 4),
                "bounding_boxes": {"boxes": boxes, "labels": labels},
            }
        )["bounding_boxes"]
        np.testing.assert_array_equal(ours["boxes"].numpy(), theirs["boxes"])
        np.testing.assert_array_equal(ours["labels"].numpy(), theirs["labels"])


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


@pytest.mark.parametrize("dtype", [torch.uint8, torch.bool])
def test_labels_that_cannot_hold_minus_one_become_int64(dtype):
    # A dropped box's label -1 wrapped to 255 in uint8: a real class id, silently.
    layer = pp.RandomCrop(4, 4, seed=0, bounding_box_format="xyxy")
    data = {
        "images": torch.rand(2, 3, 8, 8),
        "bounding_boxes": {
            "boxes": torch.tensor([[[0.0, 0.0, 8.0, 8.0], [20.0, 20.0, 30.0, 30.0]]] * 2),
            "labels": torch.ones(2, 2, dtype=dtype),
        },
    }
    out = layer(data)["bounding_boxes"]["labels"]
    assert out.dtype == torch.int64 and out.tolist() == [[1, -1], [1, -1]]
    padded = pp.MaxNumBoundingBoxes(3)(data)["bounding_boxes"]["labels"]
    assert padded.dtype == torch.int64 and padded.tolist() == [[1, 1, -1], [1, 1, -1]]


def test_dict_inputs_compile_with_fullgraph():
    # The label dtype check once called a tensor method Dynamo cannot trace.
    def make():
        box = {"bounding_box_format": "xyxy"}
        return pp.Pipeline(
            [pp.RandomFlip(seed=0, **box), pp.RandomRotation(0.1, seed=1, **box)]
            + [pp.RandomResizedCrop(8, 8, seed=2, **box), pp.MaxNumBoundingBoxes(2)]
        )

    data = {
        "images": torch.rand(2, 3, 16, 16),
        "bounding_boxes": {
            "boxes": torch.tensor([[[1.0, 1.0, 9.0, 9.0]]] * 2),
            "labels": torch.ones(2, 1, dtype=torch.uint8),
        },
        "keypoints": torch.rand(2, 3, 2) * 16,
    }
    compiled, eager = torch.compile(make(), fullgraph=True, backend="eager"), make()
    for _ in range(2):
        got, want = compiled(data), eager(data)
        torch.testing.assert_close(got["images"], want["images"])
        torch.testing.assert_close(got["bounding_boxes"], want["bounding_boxes"])
        torch.testing.assert_close(got["keypoints"], want["keypoints"])


@pytest.mark.parametrize(
    "layer",
    [
        pp.RandomRotation(0.2, seed=0),
        pp.RandomCrop(6, 6, seed=0),
        pp.Resizing(4, 4),
        pp.Pipeline([pp.RandomFlip(seed=0), pp.RandomShear(0.2, seed=1)]),
    ],
)
def test_masks_of_another_size_than_the_images_raise(layer):
    # An 8x8 mask beside 16x16 images was warped on its own grid (silently misaligned) or
    # failed deep inside torch.
    data = {"images": torch.rand(2, 3, 16, 16), "segmentation_masks": torch.zeros(2, 8, 8)}
    with pytest.raises(
        ValueError, match=r"segmentation_masks must have the images' size \(16, 16\)"
    ):
        layer(data)
    one = {"images": torch.rand(16, 16, 3), "segmentation_masks": torch.zeros(16, 15, 1)}
    with pytest.raises(ValueError, match=r"images' size \(16, 16\); got \(16, 15\)"):
        pp.RandomFlip(seed=0, data_format="channels_last")(one)


@pytest.mark.parametrize(
    "key, target",
    [
        ("boxes", "bounding_boxes"),
        ("bboxes", "bounding_boxes"),
        ("masks", "segmentation_masks"),
        ("mask", "segmentation_masks"),
    ],
)
def test_torchvision_style_keys_raise_instead_of_passing_through(key, target):
    # torchvision's names: boxes/masks given under them were passed through unmoved.
    with pytest.raises(ValueError, match=f"dict key '{key}'.*did you mean '{target}'"):
        pp.RandomFlip(seed=0)({"images": torch.rand(1, 3, 4, 4), key: torch.zeros(1, 1, 4)})


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
