"""resize_image against tf.image.resize, with OpenCV and with torch computing it.

Stated tolerance (datapipe/io/image_resize.py): float outputs within 5e-5 of the value
range of tf.image.resize's float32 result; integer outputs are that result rounded (so
within 0.5 + that tolerance, and equal to tf's rounded value except near .5 boundaries).
tf.image.resize's results come through ``ref`` (tests/differential.py): read from
tests/goldens/ in the default run, computed by TensorFlow under ``-m differential``.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from _io_helpers import encode, write
from differential import tf

import datapipe as dp
from datapipe.io import image_dataset_from_directory, image_resize
from datapipe.io.image_resize import resize_image

TOL = 5e-5  # of the value range


# (input height, width) -> (output height, width), channels
CASES = [
    ((64, 60), (56, 56), 3),  # W2's non-integer downscale (256x240 -> 224x224), scaled 1/4
    ((64, 64), (32, 32), 3),  # exactly 2x (OpenCV's area shortcut: the same average)
    ((100, 90), (23, 31), 1),  # over 2x: aliasing without antialias
    ((7, 9), (17, 31), 4),  # upscale
    ((40, 10), (20, 30), 2),  # one axis shrinks, the other grows
    ((5, 5), (5, 5), 3),  # same size
    ((30, 20), (13, 17), 7),  # more channels than colours
]


@pytest.fixture(params=["opencv", "torch"])
def backend(request, monkeypatch):
    """'opencv' (a spy counts cv2.resize calls) or 'torch' (OpenCV switched off)."""
    if request.param == "torch":
        monkeypatch.setattr(image_resize, "cv2", None)
        return None
    cv2 = pytest.importorskip("cv2", reason="opencv-python-headless (the images extra)")
    calls = []
    real = cv2.resize
    monkeypatch.setattr(cv2, "resize", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    return calls


def image(shape_hw, c, dtype=np.uint8, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (*shape_hw, c), dtype=np.uint8).astype(dtype)


def tf_image_resize(x, size, antialias):
    return tf().image.resize(x, size, method="bilinear", antialias=antialias).numpy()


def tf_resize(ref, x, size, antialias=False, key=None):
    """tf.image.resize(method="bilinear") of ``x``; ``key`` names the result in the golden
    file, shared by the backend fixture's two runs of a test (tf's side is the same)."""
    return ref(tf_image_resize, x, size, antialias, key=key)


def check_rounded(got, want, hi):
    """Integer output: tf's float value rounded, one level off only within TOL of .5."""
    want = want.astype(np.float64)
    assert np.abs(got - want).max() <= 0.5 + TOL * hi
    if hi == 255:  # (for 16-bit values float32's own error spans several levels)
        clear = np.abs(want - np.floor(want) - 0.5) > TOL * hi  # not near a .5 boundary
        assert clear.mean() > 0.7  # (scales of 1/4, 3/4 make many exact .5 values)
        np.testing.assert_array_equal(got[clear], np.rint(want[clear]).astype(got.dtype))


SEQ_KERAS = dict(
    num_parallel_calls=None,
    verbose=False,
    shuffle=False,
    batch_size=None,
    data_format="channels_last",
)


def _one_image_tree(root: str, arr: np.ndarray) -> str:
    write(os.path.join(root, "a", "x.png"), encode(arr, "PNG"))
    return root


@pytest.mark.parametrize("antialias", [False, True])
@pytest.mark.parametrize("src, dst, c", CASES)
def test_uint8_matches_tf_resize(ref, backend, src, dst, c, antialias):
    x = image(src, c)
    want = tf_resize(ref, x, dst, antialias, key=f"uint8 {src} -> {dst} x{c} antialias={antialias}")
    got = resize_image(x, dst, antialias=antialias)
    assert got.dtype == np.uint8 and got.shape == (*dst, c)
    check_rounded(got, want, 255)
    f = resize_image(x, dst, antialias=antialias, dtype=np.float32)
    assert f.dtype == np.float32 and f.shape == (*dst, c)
    np.testing.assert_allclose(f, want, rtol=0, atol=TOL * 255)
    if backend is not None:
        # OpenCV runs every case but a shrinking antialiased one (its kernel is torch's)
        shrinks = dst[0] < src[0] or dst[1] < src[1]
        assert len(backend) == (0 if antialias and shrinks else 2)


def test_antialias_differs_from_plain_when_shrinking_over_2x(backend):
    x = image((100, 90), 3)
    plain = resize_image(x, (23, 31), dtype=np.float32)
    smooth = resize_image(x, (23, 31), dtype=np.float32, antialias=True)
    # noise averaged over ~4x4 pixels has a much smaller spread than 2 taps per axis
    assert smooth.std() < 0.6 * plain.std()


@pytest.mark.parametrize("dtype, hi", [(np.float32, 1.0), (np.float64, 1.0), (np.uint16, 65535)])
def test_other_dtypes_keep_their_dtype(ref, backend, dtype, hi):
    rng = np.random.default_rng(1)
    x = (rng.random((48, 40, 3)) * hi).astype(dtype)
    got = resize_image(x, (30, 50))
    assert got.dtype == dtype and got.shape == (30, 50, 3)
    # float64: tf's reference at its best
    want = tf_resize(ref, x.astype(np.float64), (30, 50), key=f"{np.dtype(dtype).name} in float64")
    if np.dtype(dtype).kind == "f":
        np.testing.assert_allclose(got, want, rtol=0, atol=TOL * hi)
    else:
        check_rounded(got, want, hi)


def test_float_input_to_uint8_rounds_and_clips(ref, backend):
    x = np.array([[-20.0, 10.4], [260.0, 300.0]], np.float32)[..., None]
    got = resize_image(x, (4, 4), dtype=np.uint8)
    want = np.clip(np.rint(tf_resize(ref, x, (4, 4), key="float32 to uint8")), 0, 255)
    np.testing.assert_array_equal(got, want.astype(np.uint8))
    assert got.min() == 0 and got.max() == 255


def test_batch_and_channels_first_equal_single_channels_last(backend):
    batch = np.stack([image((37, 45), 3, seed=s) for s in range(3)])
    one_by_one = np.stack([resize_image(b, (20, 24)) for b in batch])
    np.testing.assert_array_equal(resize_image(batch, (20, 24)), one_by_one)
    # Exact: a batch is resized image by image, and channels_first is transposed to the
    # same contiguous HWC input first, so the same kernel computes every pixel.
    chw = batch.transpose(0, 3, 1, 2)
    got = resize_image(chw, (20, 24), data_format="channels_first")
    assert got.shape == (3, 3, 20, 24) and got.flags.c_contiguous
    np.testing.assert_array_equal(got, one_by_one.transpose(0, 3, 1, 2))
    got1 = resize_image(chw[1], (20, 24), data_format="channels_first")
    np.testing.assert_array_equal(got1, one_by_one[1].transpose(2, 0, 1))


def test_two_by_two_average_doctest_values(backend):
    img = np.array([[0, 100], [200, 255]], np.uint8)[..., None]
    assert resize_image(img, (1, 1), dtype=np.float32)[0, 0, 0] == pytest.approx(138.75)
    assert resize_image(img, (1, 1))[0, 0, 0] == 139


def test_top_level_export():
    assert dp.resize_image is resize_image and dp.io.resize_image is resize_image


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((np.zeros((4, 4), np.uint8), (2, 2)), {}, r"got shape \(4, 4\)"),
        ((np.zeros((4, 4, 3), bool), (2, 2)), {}, "integer or float, got dtype bool"),
        ((np.zeros((4, 4, 3), np.uint8), (0, 2)), {}, "size must be positive"),
        ((np.zeros((4, 4, 3), np.uint8), 2), {}, r"size must be \(height, width\), got 2"),
        ((np.zeros((4, 4, 3), np.uint8), (2, 2)), {"dtype": bool}, "dtype must be"),
        ((np.zeros((4, 4, 3), np.uint8), (2, 2)), {"data_format": "NHWC"}, "data_format"),
        ((np.zeros((0, 4, 3), np.uint8), (2, 2)), {}, "have no pixels"),
    ],
)
def test_bad_arguments(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        resize_image(*args, **kwargs)


def test_import_datapipe_does_not_import_opencv():
    # OpenCV is imported at the first resize_image call, not by ``import datapipe``
    code = "import sys, datapipe; print('cv2' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_bilinear_downscale_is_keras_resize_without_antialiasing(tmp_path):
    # tf.image.resize (Keras's loader) samples at half-pixel centres with no low-pass
    # filter: a 2x bilinear downscale is the mean of each 2x2 block, unrounded.
    arr = np.arange(16 * 3, dtype=np.uint8).reshape(4, 4, 3) * 5
    root = _one_image_tree(str(tmp_path), arr)
    img = next(
        iter(image_dataset_from_directory(root, image_size=(2, 2), label_mode=None, **SEQ_KERAS))
    )
    want = arr.astype(np.float32).reshape(2, 2, 2, 2, 3).mean(axis=(1, 3))
    assert img.dtype == np.float32
    np.testing.assert_allclose(img, want, rtol=0, atol=1e-4)


def test_nearest_upscale_uses_half_pixel_centres(tmp_path):
    # tf.image.resize(method="nearest"): source index floor((i + 0.5) * in / out)
    arr = np.arange(3 * 5, dtype=np.uint8).reshape(3, 5, 1).repeat(3, axis=2) * 10
    root = _one_image_tree(str(tmp_path), arr)
    kw = dict(image_size=(4, 7), interpolation="nearest", label_mode=None, **SEQ_KERAS)
    img = next(iter(image_dataset_from_directory(root, **kw)))
    rows = np.floor((np.arange(4) + 0.5) * 3 / 4).astype(int)
    cols = np.floor((np.arange(7) + 0.5) * 5 / 7).astype(int)
    np.testing.assert_array_equal(img, arr[rows][:, cols].astype(np.float32))


@pytest.mark.parametrize(
    "shape, data_format, theirs",
    [
        ((3, 50, 40), "channels_last", "channels_first"),  # issue 33: became (8, 8, 40)
        ((4, 3, 50, 40), "channels_last", "channels_first"),  # became (4, 8, 8, 40)
        ((50, 40, 3), "channels_first", "channels_last"),
        ((2, 50, 40, 1), "channels_first", "channels_last"),
    ],
)
def test_an_input_in_the_other_layout_is_refused_naming_data_format(shape, data_format, theirs):
    with pytest.raises(ValueError) as info:
        resize_image(np.zeros(shape, np.uint8), (8, 8), data_format=data_format)
    assert str(info.value) == (
        f"resize: data_format is {data_format!r} but the input of shape {shape} looks "
        f"{theirs}; pass data_format={theirs!r} or permute the input"
    )
    # told the right layout, the same array resizes its height and width
    out = resize_image(np.zeros(shape, np.uint8), (8, 8), data_format=theirs)
    hw_axes = (-3, -2) if theirs == "channels_last" else (-2, -1)
    assert tuple(out.shape[a] for a in hw_axes) == (8, 8) and out.dtype == np.uint8


def test_an_ambiguous_layout_is_read_as_data_format_says():
    # 3 channels at both ends: nothing tells the layouts apart, data_format decides
    out = resize_image(np.zeros((3, 5, 3), np.uint8), (2, 2))
    assert out.shape == (2, 2, 3)
