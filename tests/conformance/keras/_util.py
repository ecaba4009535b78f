"""Small helpers of the Keras conformance tests (no Keras needed: values are upstream's)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def as_numpy(x: Any) -> np.ndarray:
    """A tensor (dense or sparse, any device), array or nested list as a numpy array."""
    if isinstance(x, torch.Tensor):
        if x.is_sparse:
            x = x.to_dense()
        return x.detach().cpu().numpy()
    return np.asarray(x)


def assert_values(actual: Any, expected: Any, atol: float = 0.0, rtol: float = 0.0) -> None:
    """``actual`` has ``expected``'s shape and values: exactly by default, otherwise within
    ``atol + rtol * |expected|`` (Keras's ``assertAllClose`` uses 1e-6 for both)."""
    got, want = as_numpy(actual), np.asarray(expected)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    if atol == 0.0 and rtol == 0.0:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, atol=atol, rtol=rtol)


def layer_basics(
    layer_cls: type,
    init_kwargs: dict,
    input_shape: tuple,
    expected_shape: tuple,
    scale: float = 1.0,
) -> torch.Tensor:
    """What Keras's ``run_layer_test`` checks, in torch terms: the output shape, no
    trainable weights, the config round trip (``from_config(get_config())`` gives the
    same config and, for a seeded layer, the same output on the same input), and the
    output is finite. ``scale`` multiplies the U[0, 1) input (255 for 8-bit ranges)."""
    x = torch.rand(input_shape, generator=torch.Generator().manual_seed(0)) * scale
    layer = layer_cls(**init_kwargs)
    out = layer(x)
    assert tuple(out.shape) == tuple(expected_shape), (tuple(out.shape), expected_shape)
    assert list(layer.parameters()) == []
    assert torch.isfinite(out).all()
    config = layer.get_config()
    again = layer_cls.from_config(config)
    assert again.get_config() == config
    if init_kwargs.get("seed") is not None:
        assert torch.equal(layer_cls(**init_kwargs)(x), again(x))
    return out


def keras_dict_input(channels_last: bool = True) -> dict:
    """The dict of upstream's ``test_dict_input`` cases: images (2, 4, 5, 3) channels-last,
    labels (2, 7), masks (2, 4, 5, 7), one box [1, 2, 2, 3] labelled 0."""
    rng = np.random.default_rng(0)
    images = rng.random((2, 4, 5, 3)).astype("float32")
    masks = rng.random((2, 4, 5, 7)).astype("float32")
    if not channels_last:
        images, masks = images.transpose(0, 3, 1, 2), masks.transpose(0, 3, 1, 2)
    return {
        "images": images,
        "labels": rng.random((2, 7)).astype("float32"),
        "segmentation_masks": masks,
        "bounding_boxes": {"boxes": np.array([[1, 2, 2, 3]]), "labels": np.array([0])},
    }


def assert_targets_untouched(layer: Any, data: dict) -> None:
    """upstream's photometric ``test_dict_input``: images change shape-for-shape, labels,
    masks and boxes come back unchanged."""
    out = layer(data)
    assert tuple(out["images"].shape) == data["images"].shape
    assert as_numpy(out["segmentation_masks"]).shape == data["segmentation_masks"].shape
    np.testing.assert_array_equal(as_numpy(out["labels"]), data["labels"])
    np.testing.assert_array_equal(as_numpy(out["segmentation_masks"]), data["segmentation_masks"])
    np.testing.assert_array_equal(
        as_numpy(out["bounding_boxes"]["boxes"]), data["bounding_boxes"]["boxes"]
    )
    np.testing.assert_array_equal(
        as_numpy(out["bounding_boxes"]["labels"]), data["bounding_boxes"]["labels"]
    )


def moved_boxes(layer: Any, boxes: list, params: dict, image_shape: tuple) -> np.ndarray:
    """``layer.transform_bounding_boxes`` of one image's boxes (N, 4) under ``params``
    (``input_shape`` set to the batch of that one image); the moved boxes, (N, 4)."""
    params = {**params, "input_shape": (1, *image_shape)}
    data = {
        "boxes": torch.tensor([boxes], dtype=torch.float32),
        "labels": torch.zeros(1, len(boxes)),
    }
    return as_numpy(layer.transform_bounding_boxes(data, params)["boxes"][0])


def image_with_boxes(image_shape: tuple, boxes: list, batched: bool = False) -> dict:
    """upstream's ``{"images": random image, "bounding_boxes": {boxes, labels 1..N}}``."""
    n = len(boxes)
    data = {
        "images": np.random.default_rng(0).random(image_shape).astype("float32"),
        "bounding_boxes": {
            "boxes": np.array(boxes, dtype="float32"),
            "labels": np.arange(1, n + 1),
        },
    }
    if batched:
        data["images"] = data["images"][None]
        data["bounding_boxes"] = {k: v[None] for k, v in data["bounding_boxes"].items()}
    return data


def mask_classes_kept(layer: Any, channels_last: bool = True) -> None:
    """upstream's ``test_segmentation_mask_preserves_dtype_and_classes``: uint8 masks of
    classes {0, 4} come back uint8 with no other class."""
    images = np.random.default_rng(0).random((2, 8, 8, 3)).astype("float32")
    masks = np.zeros((2, 8, 8, 1), dtype="uint8")
    masks[:, :4] = 4
    if not channels_last:
        images, masks = images.transpose(0, 3, 1, 2), masks.transpose(0, 3, 1, 2)
    result = as_numpy(layer({"images": images, "segmentation_masks": masks})["segmentation_masks"])
    assert result.dtype == np.uint8
    assert set(np.unique(result).tolist()) <= {0, 4}


def quad_in_image_extent(corners: np.ndarray, height: float, width: float) -> list:
    """The xyxy extent of the polygon ``corners`` (K, 2) cut to the image [0, W] x [0, H]
    (Sutherland-Hodgman clipping), or zeros when nothing is left: the reference for
    where a moved box's pixels are."""
    poly = [tuple(p) for p in np.asarray(corners, dtype=float)]
    edges = [(0, 0.0, 1), (0, float(width), -1), (1, 0.0, 1), (1, float(height), -1)]
    for axis, bound, sign in edges:
        out = []
        for i, cur in enumerate(poly):
            prev = poly[i - 1]
            cur_in, prev_in = sign * (cur[axis] - bound) >= 0, sign * (prev[axis] - bound) >= 0
            if cur_in != prev_in:
                t = (bound - prev[axis]) / (cur[axis] - prev[axis])
                out.append(tuple(p + t * (c - p) for p, c in zip(prev, cur)))
            if cur_in:
                out.append(cur)
        poly = out
        if not poly:
            return [0.0, 0.0, 0.0, 0.0]
    xs, ys = [p[0] for p in poly], [p[1] for p in poly]
    return [min(xs), min(ys), max(xs), max(ys)]


def assert_unchanged(layer: Any) -> None:
    """upstream's no-op checks: its (224, 224, 3) image of ints in [0, 255) (numpy seed
    3481) comes back with the same values (as float32, D-K-2)."""
    inputs = np.random.RandomState(3481).randint(0, 255, size=(224, 224, 3))
    np.testing.assert_array_equal(as_numpy(layer(inputs)), inputs)
