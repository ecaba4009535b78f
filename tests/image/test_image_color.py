"""datapipe.image's dtype conversion, colour spaces and adjustments against tf.image
(issue 33 item 1).

tf.image's results come through ``ref`` (tests/differential.py): goldens in the default
run, tensorflow-cpu live under ``-m differential``. Both sides compute in float32 with
their own operation order, so floats are compared within ``FLOAT_ATOL`` (measured on
these inputs: <= 7.2e-7, per_image_standardization's unit-variance output included); an
integer output is the float result truncated (tf's cast), so it may be one level off where
the float lies within that bound of a level's edge: at most ``INT_OFF`` of the values,
never more than one level (measured: none off).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from differential import tf

from datapipe import image

FLOAT_ATOL = 2e-6
INT_OFF = 0.01

RNG = np.random.default_rng(1033)
U8 = RNG.integers(0, 256, (2, 6, 7, 3), dtype=np.uint8)
F32 = RNG.uniform(0, 1, (2, 6, 7, 3)).astype(np.float32)
F32[0, 0, 0] = (0.5, 0.5, 0.5)  # a grey pixel: hue 0
F32[0, 0, 1] = (0.0, 0.0, 0.0)  # black: saturation 0
F32[0, 0, 2] = (1.0, 0.2, 0.2)  # red at the hue wrap-around


def tf_call(name, x, *args):
    out = getattr(tf().image, name)(tf().constant(x), *args)
    return out.numpy()


def check(got, want):
    """Within the module's stated bounds; the dtype and shape exact."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=0, atol=FLOAT_ATOL)
        return
    diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
    assert diff.max() <= 1 and (diff > 0).mean() <= INT_OFF, (diff.max(), (diff > 0).mean())


CONVERT = [
    ("uint8", "float32", False), ("float32", "uint8", False), ("uint8", "int16", False),
    ("int16", "uint8", False), ("int32", "uint8", False), ("uint16", "uint8", False),
    ("uint8", "float64", False), ("float32", "int32", True), ("float32", "float16", False),
    ("wide float32", "uint8", True), ("int8", "uint8", False),
]  # fmt: skip


def convert_input(name):
    if name == "wide float32":  # outside [0, 1]: saturate=True clips
        return (F32 * 3 - 1).astype(np.float32)
    if name.startswith("float"):
        return F32.astype(name)
    info = np.iinfo(name)
    return (
        RNG.integers(max(info.min, -(2**20)), min(info.max, 2**20), U8.shape, dtype=name)
        if name == "int32"
        else RNG.integers(max(info.min, 0), info.max, U8.shape, endpoint=True, dtype=name)
    )  # noqa: E501


@pytest.mark.parametrize("src, dst, saturate", CONVERT, ids=[f"{a}-{b}-{c}" for a, b, c in CONVERT])
def test_convert_image_dtype_matches_tf(ref, src, dst, saturate):
    x = convert_input(src)
    want = ref(tf_convert, x, dst, saturate)
    got = image.convert_image_dtype(x, np.dtype(dst), saturate=saturate)
    if dst == "int32":  # D-IMG-2: 1.0 is int32's max here; tf's float32 clip gives 2**31 - 128
        top = x >= 1.0
        assert (
            top.sum() == 1
            and got[top].tolist() == [2**31 - 1]
            and want[top].tolist() == [2**31 - 128]
        )  # noqa: E501
        got, want = got[~top], want[~top]
    check(got, want)


def tf_convert(x, dst, saturate):
    return tf().image.convert_image_dtype(x, getattr(tf(), dst), saturate=saturate).numpy()


def test_convert_image_dtype_exact_elements_and_torch_dtypes():
    assert image.convert_image_dtype(np.array([255], np.uint8), np.int16).tolist() == [32640]
    assert image.convert_image_dtype(np.array([32767], np.int16), np.uint8).tolist() == [255]
    t = image.convert_image_dtype(torch.tensor([0, 255], dtype=torch.uint8), torch.float32)
    assert t.dtype == torch.float32 and t.tolist() == [0.0, 1.0]
    same = np.zeros(3, np.float32)
    assert image.convert_image_dtype(same, np.float32) is same


# (name, args after the image, inputs): tf.image's function of the same name and arguments
CASES = [
    ("rgb_to_grayscale", (), ("u8", "f32")), ("grayscale_to_rgb", (), ("u8 grey", "f32 grey")),
    ("rgb_to_hsv", (), ("f32",)), ("hsv_to_rgb", (), ("f32",)),
    ("adjust_brightness", (0.2,), ("u8", "f32")), ("adjust_brightness", (-0.3,), ("u8", "f32")),
    ("adjust_contrast", (1.7,), ("u8", "f32")), ("adjust_contrast", (0.4,), ("u8", "f32")),
    ("adjust_saturation", (0.3,), ("u8", "f32")), ("adjust_saturation", (2.5,), ("u8", "f32")),
    ("adjust_hue", (0.2,), ("u8", "f32")), ("adjust_hue", (-0.45,), ("u8", "f32")),
    ("adjust_gamma", (0.5,), ("u8", "f32")), ("adjust_gamma", (2.0, 0.8), ("u8", "f32")),
    ("per_image_standardization", (), ("u8", "f32")),
]  # fmt: skip
INPUTS = {"u8": U8, "f32": F32, "u8 grey": U8[..., :1], "f32 grey": F32[..., :1]}
PARAMS = [(n, a, i) for n, a, ins in CASES for i in ins]


@pytest.mark.parametrize("name, args, which", PARAMS, ids=[f"{n}{a}-{i}" for n, a, i in PARAMS])
@pytest.mark.parametrize("rank", [3, 4])
def test_matches_tf_image(ref, name, args, which, rank):
    x = INPUTS[which] if rank == 4 else INPUTS[which][1]
    want = ref(tf_call, name, x, *args)
    got = getattr(image, name)(x, *args)
    check(got, want)


def test_exact_elements():
    red = np.array([[[1.0, 0.0, 0.0]]], np.float32)
    assert image.rgb_to_hsv(red).tolist() == [[[0.0, 1.0, 1.0]]]
    grey = np.array([[[128, 128, 128]]], np.uint8)
    assert image.adjust_saturation(grey, 3.0).tolist() == [[[128, 128, 128]]]
    assert image.rgb_to_grayscale(grey).tolist() == [[[128]]]
    # uniform image: the 1/sqrt(N) floor keeps the result finite (zeros)
    assert (
        image.per_image_standardization(np.full((2, 2, 3), 9, np.uint8)).tolist()
        == [[[0.0] * 3] * 2] * 2
    )


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: image.adjust_hue(F32, 1.5), "adjust_hue: delta must be in the interval [-1, 1], got 1.5"),  # noqa: E501
        (lambda: image.adjust_gamma(F32, -1), "adjust_gamma: gamma must be >= 0, got -1"),
        (lambda: image.adjust_saturation(F32, -0.1), "adjust_saturation: saturation_factor must be >= 0, got -0.1"),  # noqa: E501
        (lambda: image.adjust_saturation(F32[..., :2], 0.5),
         "adjust_saturation: image must have 3 channels (the last axis); got shape (2, 6, 7, 2)"),
        (lambda: image.rgb_to_hsv(U8),
         "rgb_to_hsv: images must be a float array of shape (..., 3); got shape (2, 6, 7, 3) of dtype uint8"),  # noqa: E501
        (lambda: image.grayscale_to_rgb(U8),
         "grayscale_to_rgb: image must have 1 channels (the last axis); got shape (2, 6, 7, 3)"),
        (lambda: image.convert_image_dtype(U8, np.str_),
         "convert_image_dtype: dtype must be an integer or float dtype, got <U0"),
    ],
)  # fmt: skip
def test_bad_arguments_are_refused_naming_the_function(call, message):
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value) == message


@pytest.mark.parametrize(
    "name, args",
    [("adjust_brightness", (0.1,)), ("adjust_contrast", (2.0,)), ("adjust_saturation", (2.0,)),
     ("adjust_hue", (0.1,)), ("adjust_gamma", (2.0,))],
)  # fmt: skip
def test_a_bool_image_is_refused_by_the_adjustments(name, args):
    with pytest.raises(ValueError) as info:
        getattr(image, name)(np.zeros((2, 2, 3), bool), *args)
    assert str(info.value) == f"{name}: image must be integer or float, got dtype bool"
