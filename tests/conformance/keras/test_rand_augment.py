"""Keras 3's ``image_preprocessing/rand_augment_test.py``, translated."""

import numpy as np
import torch

import datapipe as dp
import preprocessing as pp

from ._util import as_numpy, assert_unchanged, assert_values, layer_basics


def test_layer():
    """rand_augment_test.py::test_layer."""
    init = {
        "value_range": (0, 255),
        "num_ops": 2,
        "factor": 1,
        "interpolation": "nearest",
        "seed": 1,
        "data_format": "channels_last",
    }
    layer_basics(pp.RandAugment, init, (8, 3, 4, 3), (8, 3, 4, 3), scale=255)


def test_rand_augment_inference():
    """rand_augment_test.py::test_rand_augment_inference: identity in eval()."""
    assert_unchanged(pp.RandAugment(data_format="channels_last").eval())


def test_rand_augment_basic():
    """rand_augment_test.py::test_rand_augment_basic."""
    data = np.random.default_rng(0).random((2, 3, 8, 8))
    assert pp.RandAugment(data_format="channels_first")(data).shape == data.shape


def test_rand_augment_no_operations():
    """rand_augment_test.py::test_rand_augment_no_operations."""
    data = np.random.default_rng(1).random((2, 3, 8, 8))
    assert_values(pp.RandAugment(num_ops=0, data_format="channels_first")(data), data, atol=1e-6)


def test_random_augment_randomness():
    """rand_augment_test.py::test_random_augment_randomness: 11 ops change the images."""
    data = np.random.default_rng(2).random((2, 3, 8, 8))
    out = as_numpy(pp.RandAugment(num_ops=11, data_format="channels_first", seed=3)(data))
    assert not np.allclose(out, data)


def test_tf_data_compatibility():
    """rand_augment_test.py::test_tf_data_compatibility."""
    data = np.random.default_rng(4).random((2, 3, 8, 8))
    layer = pp.RandAugment(data_format="channels_first")
    assert tuple(next(iter(dp.from_tensor_slices(data).batch(2).map(layer))).shape) == (2, 3, 8, 8)


def test_rand_augment_tf_data_bounding_boxes():
    """rand_augment_test.py::test_rand_augment_tf_data_bounding_boxes: elements of a
    pipeline with images and xyxy boxes go through the layer; the boxes keep their count
    and stay inside the image (or are marked -1)."""
    data = {
        "images": np.random.default_rng(5).random((1, 3, 10, 8)),
        "bounding_boxes": {
            "boxes": np.array([[[2, 1, 4, 3], [6, 4, 8, 6]]], dtype="float32"),
            "labels": np.array([[1, 2]]),
        },
    }
    layer = pp.RandAugment(data_format="channels_first", seed=42, bounding_box_format="xyxy")
    out = next(iter(dp.from_tensor_slices(data).map(layer)))
    assert tuple(out["images"].shape) == (3, 10, 8)
    boxes, labels = out["bounding_boxes"]["boxes"], out["bounding_boxes"]["labels"]
    assert tuple(boxes.shape) == (2, 4) and tuple(labels.shape) == (2,)
    kept = labels >= 0
    assert (boxes[kept][:, [0, 2]] >= 0).all() and (boxes[kept][:, [0, 2]] <= 8).all()
    assert (boxes[kept][:, [1, 3]] >= 0).all() and (boxes[kept][:, [1, 3]] <= 10).all()


def test_graph_issue():
    """rand_augment_test.py::test_graph_issue: get_random_transformation mapped over a
    pipeline draws different ops for different batches."""
    data = np.random.default_rng(6).random((10, 8, 8, 3))
    layer = pp.RandAugment(data_format="channels_last")
    ds = (
        dp.from_tensor_slices(data)
        .batch(2)
        .map(lambda x: layer.get_random_transformation(torch.as_tensor(x)))
    )
    keys = [params["layer_idxes"] for params in ds]
    assert len(keys) == 5
    assert len(np.unique(torch.cat(keys).numpy())) != 1
