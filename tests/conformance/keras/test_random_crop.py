"""Keras 3's ``image_preprocessing/random_crop_test.py``, translated."""

import numpy as np
import pytest

import datapipe as dp
import preprocessing as pp

from ._util import as_numpy, assert_values, keras_dict_input, layer_basics, mask_classes_kept


@pytest.mark.parametrize(
    "data_format,shape,expected",
    [
        ("channels_last", (1, 3, 4, 3), (1, 2, 2, 3)),
        ("channels_last", (3, 4, 3), (2, 2, 3)),
        ("channels_first", (1, 3, 3, 4), (1, 3, 2, 2)),
        ("channels_first", (3, 3, 4), (3, 2, 2)),
    ],
)
def test_random_crop(data_format, shape, expected):
    """random_crop_test.py::test_random_crop (batched and unbatched, both layouts)."""
    layer_basics(
        pp.RandomCrop,
        {"height": 2, "width": 2, "data_format": data_format, "seed": 0},
        shape,
        expected,
    )


def test_random_crop_full():
    """random_crop_test.py::test_random_crop_full: crop size = image size, eval()."""
    inp = np.random.RandomState(1337).random((12, 3, 8, 16))
    assert_values(pp.RandomCrop(8, 16).eval()(inp), inp, atol=1e-6)
    assert_values(pp.RandomCrop(8, 16)(inp), inp, atol=1e-6)


@pytest.mark.parametrize(
    "size,expected",
    [((8, 8), (12, 3, 8, 8)), ((10, 8), (12, 3, 10, 8)), ((8, 18), (12, 3, 8, 18))],
    ids=["partial", "longer_height", "longer_width"],
)
def test_random_crop_partial(size, expected):
    """random_crop_test.py::test_random_crop_partial, ::test_predicting_with_longer_height
    and ::test_predicting_with_longer_width (the latter two fall back to crop to aspect
    and resize)."""
    layer_basics(
        pp.RandomCrop, {"height": size[0], "width": size[1], "seed": 1}, (12, 3, 8, 16), expected
    )


def test_tf_data_compatibility():
    """random_crop_test.py::test_tf_data_compatibility."""
    data = np.random.default_rng(0).random((2, 3, 10, 12))
    out = next(iter(dp.from_tensor_slices(data).batch(2).map(pp.RandomCrop(8, 9))))
    assert tuple(out.shape) == (2, 3, 8, 9)


def test_dict_input():
    """random_crop_test.py::test_dict_input: images and masks cropped alike, labels
    unchanged, the box kept (one box, its label 0; here it moves with the crop). Upstream
    gives one (1, 4) box for a batch of 2 images, which this layer (it moves boxes) refuses
    as ambiguous: boxes are per image, (B, N, 4) (D-K-21)."""
    data = keras_dict_input()
    with pytest.raises(ValueError, match=r"must have shape \(2, N, 4\) for a batch of 2"):
        pp.RandomCrop(3, 3, data_format="channels_last", bounding_box_format="xyxy")(data)
    data["bounding_boxes"] = {
        "boxes": np.array([[[1, 2, 2, 3]], [[1, 2, 2, 3]]]),
        "labels": np.array([[0], [0]]),
    }
    out = pp.RandomCrop(3, 3, data_format="channels_last", bounding_box_format="xyxy", seed=0)(data)
    assert (
        tuple(out["images"].shape[:-1]) == tuple(out["segmentation_masks"].shape[:-1]) == (2, 3, 3)
    )
    np.testing.assert_array_equal(as_numpy(out["labels"]), data["labels"])
    assert tuple(out["bounding_boxes"]["boxes"].shape) == (2, 1, 4)
    assert set(as_numpy(out["bounding_boxes"]["labels"]).ravel().tolist()) <= {0, -1}


def test_segmentation_mask_preserves_dtype_and_classes():
    """random_crop_test.py::test_segmentation_mask_preserves_dtype_and_classes: a 16x16
    target on 8x8 images (the resize path): classes and dtype kept. In eval() Keras 3's
    code returns the input unchanged; here, as Keras documents, the centre crop (at the
    target size, so train and eval shapes agree: D-K-19)."""
    layer = pp.RandomCrop(16, 16, seed=0, data_format="channels_last")
    mask_classes_kept(layer)
    mask_classes_kept(layer.eval())
    images = np.random.default_rng(1).random((2, 8, 8, 3)).astype("float32")
    assert tuple(layer.eval()(images).shape) == (2, 16, 16, 3)
