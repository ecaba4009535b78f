"""Image decoding: pixels equal Pillow's own decode; EXIF orientation ignored as in tf.io;
every bad file names its path (as a plain ``str``)."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest
from _io_helpers import BAD_FILES, encode, pixels, write
from PIL import Image

import datapipe as dp
from datapipe.io import ImageDecodeError, decode_image, decode_jpeg, decode_png, load_image


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "BMP", "GIF", "WEBP", "TIFF"])
@pytest.mark.parametrize("c", [1, 3])
def test_decode_equals_pillow(fmt, c):
    data = encode(pixels(13, 17, c), fmt)
    for channels, mode in [(0, None), (1, "L"), (3, "RGB"), (4, "RGBA")]:
        ref = Image.open(io.BytesIO(data))
        if mode is None:
            mode = {"P": "RGB", "1": "L"}.get(ref.mode, ref.mode)
        want = np.asarray(ref.convert(mode))
        want = want[..., None] if want.ndim == 2 else want
        got = decode_image(data, channels=channels)
        assert got.dtype == np.uint8 and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_decode_rgba_and_palette_transparency():
    rgba = pixels(5, 6, 4)
    got = decode_image(encode(rgba, "PNG"))
    np.testing.assert_array_equal(got, rgba)
    pal = Image.fromarray(pixels(5, 6, 1)).convert("P")
    pal.info["transparency"] = 0
    buf = io.BytesIO()
    pal.save(buf, "PNG", transparency=0)
    got = decode_image(buf.getvalue())
    assert got.shape == (5, 6, 4)
    np.testing.assert_array_equal(got, np.asarray(Image.open(buf).convert("RGBA")))


def test_dtypes_scale_like_convert_image_dtype():
    arr = pixels(4, 4, 3)
    data = encode(arr, "PNG")
    f = decode_image(data, dtype=np.float32)
    assert f.dtype == np.float32
    np.testing.assert_allclose(f, arr / 255.0, rtol=1e-6)
    u16 = decode_png(data, dtype=np.uint16)
    np.testing.assert_array_equal(u16, arr.astype(np.uint16) * 257)


def test_sixteen_bit_png():
    arr = (np.arange(12, dtype=np.uint16) * 5000).reshape(3, 4)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "PNG")
    got = decode_png(buf.getvalue(), dtype=np.uint16)
    assert got.shape == (3, 4, 1) and got.dtype == np.uint16
    np.testing.assert_array_equal(got[..., 0], arr)
    np.testing.assert_array_equal(decode_png(buf.getvalue())[..., 0], (arr >> 8).astype(np.uint8))


def test_animation_frames():
    frames = [Image.fromarray(np.full((4, 5, 3), v, np.uint8)) for v in (0, 120, 250)]
    buf = io.BytesIO()
    frames[0].save(buf, "GIF", save_all=True, append_images=frames[1:])
    first = decode_image(buf.getvalue())
    assert first.shape == (4, 5, 3)
    allf = decode_image(buf.getvalue(), expand_animations=True)
    assert allf.shape == (3, 4, 5, 3)
    assert [int(f.mean()) for f in allf] == [0, 120, 250]


def test_decode_jpeg_ratio_and_format_check():
    data = encode(pixels(40, 24, 3), "JPEG")
    assert decode_jpeg(data).shape == (40, 24, 3)
    assert decode_jpeg(data, ratio=2).shape == (20, 12, 3)
    assert decode_jpeg(data, ratio=8).shape == (5, 3, 3)
    assert decode_jpeg(data, channels=1).shape == (40, 24, 1)
    with pytest.raises(ImageDecodeError, match="expected a JPEG image, got PNG"):
        decode_jpeg(encode(pixels(4, 4, 3), "PNG"))
    with pytest.raises(ImageDecodeError, match="expected a PNG image, got JPEG"):
        decode_png(data)
    with pytest.raises(ValueError, match="ratio must be 1, 2, 4 or 8"):
        decode_jpeg(data, ratio=3)


def test_load_image_draft_downscales_jpeg(tmp_path):
    p = write(str(tmp_path / "big.jpg"), encode(pixels(400, 320, 3), "JPEG"))
    assert load_image(p).shape == (400, 320, 3)
    # the largest power-of-two reduction that still covers 90 x 70 is 1/4 (100 x 80)
    assert load_image(p, draft_size=(90, 70)).shape == (100, 80, 3)
    png = write(str(tmp_path / "big.png"), encode(pixels(40, 32, 3), "PNG"))
    assert load_image(png, draft_size=(5, 4)).shape == (40, 32, 3)  # not a JPEG: full size


def test_bad_arguments():
    data = encode(pixels(4, 4, 3), "PNG")
    with pytest.raises(ValueError, match="channels must be 0, 1, 3 or 4, got 2"):
        decode_image(data, channels=2)
    with pytest.raises(ValueError, match="dtype must be uint8, uint16 or a float dtype"):
        decode_image(data, dtype=np.int32)
    with pytest.raises(TypeError, match="expected the image file's bytes, got str"):
        decode_image("x.png")


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_bad_file_raises_with_path_and_reason(tmp_path, name):
    make, reason = BAD_FILES[name]
    p = write(str(tmp_path / name), make())
    with pytest.raises(ImageDecodeError) as info:
        load_image(p)
    assert info.value.path == p
    assert str(info.value).startswith(p + ": ")
    assert reason in str(info.value)
    with pytest.raises(ImageDecodeError, match=reason):
        decode_image(make())  # bytes only: the reason, no path


def test_decompression_bomb(tmp_path, small_bomb_limit):
    p = write(str(tmp_path / "bomb.png"), encode(pixels(64, 64, 3), "PNG"))
    with pytest.raises(ImageDecodeError, match="decompression-bomb limit") as info:
        load_image(p)
    assert info.value.path == p


def _good_and_bad(tmp_path, bad_name):
    paths = []
    for i in range(3):
        paths.append(write(str(tmp_path / f"{i}_ok.png"), encode(pixels(6, 6, 3, i), "PNG")))
    make, _ = BAD_FILES[bad_name]
    paths.insert(2, write(str(tmp_path / bad_name), make()))
    return paths


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_bad_file_in_pipeline_delivers_earlier_elements(tmp_path, name):
    paths = _good_and_bad(tmp_path, name)
    it = iter(dp.from_tensor_slices(np.array(paths, dtype=object)).map(load_image))
    got = [next(it), next(it)]
    assert [g.shape for g in got] == [(6, 6, 3), (6, 6, 3)]
    with pytest.raises(dp.PipelineError) as info:
        next(it)
    err = info.value
    assert err.path == paths[2] and err.index == 2 and err.op == "map"
    assert paths[2] in str(err) and BAD_FILES[name][1] in str(err)
    assert isinstance(err.cause, ImageDecodeError)


def test_missing_file_in_pipeline_names_path(tmp_path):
    p = str(tmp_path / "nope.png")
    with pytest.raises(dp.PipelineError) as info:
        list(dp.from_tensor_slices(np.array([p], dtype=object)).map(load_image))
    assert info.value.path == p and "FileNotFoundError" in str(info.value)


def test_mixed_sizes_reaching_batch(tmp_path):
    a = write(str(tmp_path / "a.png"), encode(pixels(6, 6, 3), "PNG"))
    b = write(str(tmp_path / "b.png"), encode(pixels(7, 5, 3), "PNG"))
    ds = dp.from_tensor_slices(np.array([a, a, b], dtype=object)).map(load_image).batch(3)
    with pytest.raises(dp.DatapipeError) as info:  # BatchShapeError, located by batch itself
        list(ds)
    assert isinstance(info.value, ValueError)
    msg = str(info.value)
    assert "element 2 of shape (7, 5, 3)" in msg and "element 0 of shape (6, 6, 3)" in msg
    assert "Resizing" in msg and "image_size" in msg and "padded_batch" in msg


def test_ignore_errors_skips_counts_and_logs_each_path_once(tmp_path, caplog):
    pytest.importorskip("datapipe.ops.ignore_errors")
    paths = _good_and_bad(tmp_path, "truncated.jpg")
    bad = paths[2]
    ds = dp.from_tensor_slices(np.array(paths, dtype=object)).map(load_image)
    with caplog.at_level("WARNING"):
        out = list(ds.ignore_errors(log_warning=True).repeat(2))
    assert len(out) == 6
    assert all(o.shape == (6, 6, 3) for o in out)
    logged = [r.getMessage() for r in caplog.records if bad in r.getMessage()]
    assert len(logged) == 1
    assert os.path.basename(bad) in logged[0]


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
