"""preprocessing._targets: dict inputs: one draw for every target, a single image's dict
equals a batch of one, eval leaves targets alone, malformed dicts and mismatched targets
raise naming the layer and key, torchvision-style keys are refused, and dict inputs
compile.
"""

import numpy as np
import pytest
import torch

import preprocessing as pp


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
