"""MaxNumBoundingBoxes: pads and truncates batches, and against Keras 3.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

import numpy as np
import pytest
import torch
from differential import keras
from harness import assert_within

import preprocessing as pp


def keras_max_num_boxes(n, boxes, labels):
    # Keras's __call__ insists on a bounding_box_format it then loses; its transform is
    # the layer's semantics.
    theirs = (
        keras()
        .layers.MaxNumBoundingBoxes(n)
        .transform_bounding_boxes({"boxes": boxes, "labels": labels}, None)
    )
    return {k: np.asarray(theirs[k]) for k in ("boxes", "labels")}


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
        assert_within(ours["boxes"].numpy(), theirs["boxes"], 0.0)  # kept or padded: copies
        np.testing.assert_array_equal(ours["labels"].numpy(), theirs["labels"])
