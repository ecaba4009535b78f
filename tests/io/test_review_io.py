"""Review of datapipe.io: defects found by using it as a new user would."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest
from _io_helpers import encode, write
from PIL import Image

import datapipe as dp
from datapipe.io import image_dataset_from_directory, load_image

SEQ = dict(
    num_parallel_calls=None,
    verbose=False,
    shuffle=False,
    batch_size=None,
    data_format="channels_last",
)


def _one_image_tree(root: str, arr: np.ndarray) -> str:
    write(os.path.join(root, "a", "x.png"), encode(arr, "PNG"))
    return root


def test_bilinear_downscale_is_keras_resize_without_antialiasing(tmp_path):
    # tf.image.resize (Keras's loader) samples at half-pixel centres with no low-pass
    # filter: a 2x bilinear downscale is the mean of each 2x2 block, unrounded.
    arr = np.arange(16 * 3, dtype=np.uint8).reshape(4, 4, 3) * 5
    root = _one_image_tree(str(tmp_path), arr)
    img = next(iter(image_dataset_from_directory(root, image_size=(2, 2), label_mode=None, **SEQ)))
    want = arr.astype(np.float32).reshape(2, 2, 2, 2, 3).mean(axis=(1, 3))
    assert img.dtype == np.float32
    np.testing.assert_allclose(img, want, rtol=0, atol=1e-4)


def test_nearest_upscale_uses_half_pixel_centres(tmp_path):
    # tf.image.resize(method="nearest"): source index floor((i + 0.5) * in / out)
    arr = np.arange(3 * 5, dtype=np.uint8).reshape(3, 5, 1).repeat(3, axis=2) * 10
    root = _one_image_tree(str(tmp_path), arr)
    kw = dict(image_size=(4, 7), interpolation="nearest", label_mode=None, **SEQ)
    img = next(iter(image_dataset_from_directory(root, **kw)))
    rows = np.floor((np.arange(4) + 0.5) * 3 / 4).astype(int)
    cols = np.floor((np.arange(7) + 0.5) * 5 / 7).astype(int)
    np.testing.assert_array_equal(img, arr[rows][:, cols].astype(np.float32))


def test_label_mode_none_indexes_like_labels_none(tmp_path):
    # Keras: label_mode=None means labels=None, so images outside class folders count too
    root = str(tmp_path)
    for rel in ("a/0.png", "b/0.png", "top.png", ".hidden/h.png"):
        write(os.path.join(root, rel), encode(np.zeros((2, 2, 3), np.uint8), "PNG"))
    ds = image_dataset_from_directory(root, image_size=(2, 2), label_mode=None, **SEQ)
    assert ds.class_names is None
    rel = [os.path.relpath(p, root) for p in ds.file_paths]
    want = ["top.png", os.path.join(".hidden", "h.png")]  # os.walk order, roots sorted
    assert rel == want + [os.path.join("a", "0.png"), os.path.join("b", "0.png")]
    assert len(list(ds)) == 4


def test_error_names_path_as_plain_str(tmp_path):
    bad = write(os.path.join(str(tmp_path), "bad.png"), b"not an image")
    ds = dp.from_tensor_slices([bad]).map(load_image)  # elements are np.str_
    with pytest.raises(dp.PipelineError) as info:
        next(iter(ds))
    assert type(info.value.path) is str and info.value.path == bad
    assert "np.str_" not in str(info.value)
    assert f"{bad}: not an image Pillow can read" in str(info.value)


def test_exif_orientation_is_ignored_as_in_tf_io():
    arr = np.arange(8 * 12 * 3, dtype=np.uint8).reshape(8, 12, 3)
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 CW to display"
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "JPEG", exif=exif.tobytes(), quality=95)
    out = dp.decode_image(buf.getvalue())
    assert out.shape == (8, 12, 3)
    np.testing.assert_array_equal(out, np.asarray(Image.open(io.BytesIO(buf.getvalue()))))


def test_list_files_lists_a_file_matched_twice_once(tmp_path):
    a = write(os.path.join(str(tmp_path), "a.txt"), b"x")
    b = write(os.path.join(str(tmp_path), "b.txt"), b"x")
    ds = dp.list_files([os.path.join(str(tmp_path), "*.txt"), a], shuffle=False)
    assert list(ds) == [a, b]
    with pytest.raises(FileNotFoundError, match=r"'/nope/\*\.zzz', '/nope2/\*'"):
        dp.list_files(["/nope/*.zzz", "/nope2/*"])


@pytest.mark.slow
def test_pixels_match_keras_for_png_bilinear_and_nearest(tmp_path):
    keras = pytest.importorskip("keras")
    rng = np.random.default_rng(0)
    root = str(tmp_path)
    for c, (h, w) in enumerate([(10, 14), (13, 20), (7, 9)]):
        arr = rng.integers(0, 256, (h, w, 3), np.uint8)
        write(os.path.join(root, f"c{c}", "x.png"), encode(arr, "PNG"))
    for kw in (
        dict(image_size=(6, 7)),
        dict(image_size=(20, 30)),
        dict(image_size=(6, 7), interpolation="nearest"),
        dict(image_size=(20, 30), interpolation="nearest"),
        dict(image_size=(8, 8), crop_to_aspect_ratio=True),
    ):
        ours = image_dataset_from_directory(root, **SEQ, **kw)
        theirs = keras.utils.image_dataset_from_directory(
            root, verbose=False, shuffle=False, batch_size=None, **kw
        )
        for (a, la), (b, lb) in zip(ours, theirs):
            np.testing.assert_allclose(a, np.asarray(b, np.float32), rtol=0, atol=1e-3)
            assert int(la) == int(lb)
