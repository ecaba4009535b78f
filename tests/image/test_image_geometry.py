"""datapipe.image's flips, rotations, crops, pads and resize against tf.image (issue 33
item 1).

tf.image's results come through ``ref`` (tests/differential.py): the goldens in the
default run, tensorflow-cpu live under ``-m differential``. These functions copy pixels
without arithmetic, so the inputs are integers and the comparison is exact (integers are
exact on every machine); ``resize`` computes, and is compared within a stated bound.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from differential import tf

import datapipe as dp
from datapipe import image

RNG = np.random.default_rng(33)
IMAGE = RNG.integers(0, 256, (7, 9, 3), dtype=np.uint8)  # odd sizes: the centre rounding
BATCH = RNG.integers(-1000, 1000, (2, 6, 5, 3), dtype=np.int32)

# (our name, args after the image): tf.image's function of the same name and arguments
CASES = [
    ("flip_left_right", ()),
    ("flip_up_down", ()),
    ("rot90", (1,)),
    ("rot90", (2,)),
    ("rot90", (3,)),
    ("rot90", (-1,)),
    ("transpose", ()),
    ("central_crop", (0.5,)),
    ("central_crop", (0.33,)),
    ("central_crop", (1.0,)),
    ("crop_to_bounding_box", (1, 2, 3, 2)),
    ("pad_to_bounding_box", (2, 1, 10, 12)),
    ("resize_with_crop_or_pad", (4, 4)),  # crops both axes
    ("resize_with_crop_or_pad", (10, 11)),  # pads both axes
    ("resize_with_crop_or_pad", (3, 12)),  # crops one, pads the other
]


def tf_image(name, x, *args):
    return tf().image.__dict__[name](x, *args).numpy()


@pytest.mark.parametrize("name, args", CASES, ids=[f"{n}{a}" for n, a in CASES])
@pytest.mark.parametrize("which", ["image", "batch"])
def test_matches_tf_image(ref, name, args, which):
    x = IMAGE if which == "image" else BATCH
    want = ref(tf_image, name, x, *args)
    got = getattr(image, name)(x, *args)
    assert isinstance(got, np.ndarray) and got.dtype == x.dtype
    np.testing.assert_array_equal(got, want)  # integers: exact


@pytest.mark.parametrize("name, args", CASES, ids=[f"{n}{a}" for n, a in CASES])
def test_a_tensor_comes_back_as_the_same_tensor_values(name, args):
    got = getattr(image, name)(torch.from_numpy(BATCH), *args)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.int32
    np.testing.assert_array_equal(got.numpy(), getattr(image, name)(BATCH, *args))


def test_rot90_and_transpose_exact_elements():
    x = np.arange(6).reshape(2, 3, 1)
    assert image.rot90(x)[..., 0].tolist() == [[2, 5], [1, 4], [0, 3]]
    assert image.rot90(x, k=-1)[..., 0].tolist() == [[3, 0], [4, 1], [5, 2]]
    assert image.transpose(x)[..., 0].tolist() == [[0, 3], [1, 4], [2, 5]]


def tf_resize(x, size, antialias):
    return tf().image.resize(x, size, antialias=antialias).numpy()


@pytest.mark.parametrize("antialias", [False, True])
def test_resize_matches_tf_image_resize_in_float32(ref, antialias):
    x = IMAGE.astype(np.float32)
    want = ref(tf_resize, x, (4, 13), antialias)
    got = image.resize(x, (4, 13), antialias=antialias)
    # datapipe.io.image_resize's stated tolerance: 5e-5 of the value range
    np.testing.assert_allclose(got, want, rtol=0, atol=5e-5 * 255)
    t = image.resize(torch.from_numpy(x), (4, 13), antialias=antialias)
    assert isinstance(t, torch.Tensor) and t.shape == (4, 13, 3)


def test_resize_keeps_the_input_dtype_and_resize_image_stays():
    assert image.resize(IMAGE, (3, 3)).dtype == np.uint8  # D-IMG-1: tf gives float32
    assert image.resize(IMAGE, (3, 3), dtype=np.float32).dtype == np.float32
    np.testing.assert_array_equal(dp.resize_image(IMAGE, (3, 3)), image.resize(IMAGE, (3, 3)))
    assert dp.image is image


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: image.resize(IMAGE, (2, 2), method="nearest"),
         "resize: method='nearest' is not supported; only 'bilinear' (tf's default)"),
        (lambda: image.central_crop(IMAGE, 0.0), "central_crop: central_fraction must be in (0, 1], got 0.0"),  # noqa: E501
        (lambda: image.central_crop(IMAGE, 1.5), "central_crop: central_fraction must be in (0, 1], got 1.5"),  # noqa: E501
        (lambda: image.crop_to_bounding_box(IMAGE, -1, 0, 2, 2),
         "crop_to_bounding_box: offsets must be >= 0, got (-1, 0)"),
        (lambda: image.crop_to_bounding_box(IMAGE, 0, 0, 0, 2),
         "crop_to_bounding_box: target_height and target_width must be > 0, got (0, 2)"),
        (lambda: image.crop_to_bounding_box(IMAGE, 5, 0, 3, 2),
         "crop_to_bounding_box: the box at (5, 0) of size (3, 2) does not fit an image of "
         "height 7 and width 9"),
        (lambda: image.pad_to_bounding_box(IMAGE, 1, 0, 7, 9),
         "pad_to_bounding_box: an image of height 7 and width 9 at (1, 0) does not fit a "
         "target of (7, 9)"),
        (lambda: image.resize_with_crop_or_pad(IMAGE, 0, 3),
         "resize_with_crop_or_pad: target_height and target_width must be > 0, got (0, 3)"),
        (lambda: image.rot90(IMAGE, 1.5), "rot90: k must be an int, got 1.5"),
        (lambda: image.flip_left_right(np.zeros((4, 4))),
         "flip_left_right: image must be (height, width, channels) or (batch, height, width, "
         "channels); got shape (4, 4)"),
    ],
)  # fmt: skip
def test_bad_arguments_are_refused_naming_the_function(call, message):
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value) == message


def test_resize_with_crop_or_pad_does_not_recheck_its_own_crop():
    # a (100, 100, 40) image cropped to 3 rows is (3, 100, 40): not an input that looks CHW
    out = image.resize_with_crop_or_pad(np.zeros((100, 100, 40), np.uint8), 3, 100)
    assert out.shape == (3, 100, 40)
