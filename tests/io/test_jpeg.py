"""JPEG decoding with and without simplejpeg: the same pixels as Pillow, the same errors.

Every test runs twice: with simplejpeg (the fast path, when installed) and with it
switched off (Pillow alone). Where the fast path must be the one that ran, a spy counts
simplejpeg's decode calls, so a silent fallback to Pillow fails the test.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
from _io_helpers import encode, write
from PIL import Image

from datapipe.io import ImageDecodeError, _jpeg, decode_image, decode_jpeg, load_image


def photo(h: int, w: int, c: int = 3, seed: int = 0) -> np.ndarray:
    """Smooth gradients plus noise: like a photo, JPEG keeps most of it."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = [(x * 255 // max(w - 1, 1)), (y * 255 // max(h - 1, 1)), ((x + y) * 3) % 256]
    arr = np.stack(base[:c], axis=-1) + rng.integers(-20, 21, (h, w, c))
    arr = np.clip(arr, 0, 255).astype(np.uint8)
    return arr[..., 0] if c == 1 else arr


class Spy:
    def __init__(self, monkeypatch):
        self.calls = 0
        real = _jpeg.simplejpeg.decode_jpeg

        def counting(*a, **kw):
            self.calls += 1
            return real(*a, **kw)

        monkeypatch.setattr(_jpeg.simplejpeg, "decode_jpeg", counting)


@pytest.fixture(params=["simplejpeg", "pillow"])
def backend(request, monkeypatch):
    """Yields a Spy on simplejpeg (fast path) or None (simplejpeg switched off)."""
    if request.param == "pillow":
        monkeypatch.setattr(_jpeg, "simplejpeg", None)
        return None
    pytest.importorskip("simplejpeg", reason="simplejpeg (the images/dev extra) not installed")
    assert _jpeg.available()
    return Spy(monkeypatch)


def pillow_decode(data: bytes, mode: str | None = None, draft=None) -> np.ndarray:
    img = Image.open(io.BytesIO(data))
    if draft is not None:
        img.draft(None, draft)
    img.load()
    mode = mode or ("L" if img.mode == "L" else "RGB")
    arr = np.asarray(img.convert(mode) if img.mode != mode else img)
    return arr[..., None] if arr.ndim == 2 else arr


JPEGS = {
    "rgb 4:2:0": lambda: encode(photo(37, 53), "JPEG", quality=90),
    "rgb 4:4:4": lambda: encode(photo(37, 53), "JPEG", quality=95, subsampling=0),
    "rgb 4:2:2": lambda: encode(photo(40, 31), "JPEG", quality=75, subsampling=1),
    "progressive": lambda: encode(photo(64, 48), "JPEG", quality=85, progressive=True),
    "gray": lambda: encode(photo(29, 41, 1), "JPEG", quality=90),
    "one pixel": lambda: encode(photo(1, 1), "JPEG"),
}


@pytest.mark.parametrize("kind", sorted(JPEGS))
def test_pixels_equal_pillow_for_every_channels(backend, kind):
    data = JPEGS[kind]()
    gray = kind == "gray"
    for channels, mode in [(0, None), (1, "L"), (3, "RGB"), (4, "RGBA")]:
        want = pillow_decode(data, mode)
        for got in (decode_jpeg(data, channels=channels), decode_image(data, channels=channels)):
            assert got.dtype == np.uint8 and got.shape == want.shape, (channels, got.shape)
            np.testing.assert_array_equal(got, want)
    if backend is not None:
        # channels 0, 3, 4 (and 1 of a gray JPEG) decode in simplejpeg, twice each
        assert backend.calls == 2 * (4 if gray else 3)


def test_float_dtype_scales_the_fast_decode(backend):
    data = JPEGS["rgb 4:2:0"]()
    got = decode_image(data, channels=3, dtype=np.float32)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, pillow_decode(data, "RGB") / np.float32(255))


def test_cmyk_jpeg_is_converted_as_pillow_does(backend):
    buf = io.BytesIO()
    Image.fromarray(photo(21, 30)).convert("CMYK").save(buf, "JPEG", quality=90)
    data = buf.getvalue()
    assert Image.open(io.BytesIO(data)).mode == "CMYK"
    for channels, mode in [(0, "RGB"), (3, "RGB"), (4, "RGBA"), (1, "L")]:
        np.testing.assert_array_equal(
            decode_jpeg(data, channels=channels), pillow_decode(data, mode)
        )
    if backend is not None:
        assert backend.calls == 0  # CMYK stays with Pillow


@pytest.mark.parametrize(
    "h, w, ratio", [(40, 24, 2), (40, 24, 8), (250, 301, 2), (250, 301, 4), (9, 15, 8), (3, 5, 2)]
)
def test_ratio_equals_pillow_draft(backend, h, w, ratio):
    data = encode(photo(h, w), "JPEG", quality=90)
    want = pillow_decode(data, "RGB", draft=(max(1, w // ratio), max(1, h // ratio)))
    got = decode_jpeg(data, channels=3, ratio=ratio)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("draft", [(100, 80), (90, 70), (30, 30), (400, 320), (1, 1)])
def test_load_image_draft_size_equals_pillow_draft(backend, tmp_path, draft):
    data = encode(photo(400, 320), "JPEG", quality=90)
    p = write(str(tmp_path / "big.jpg"), data)
    th, tw = draft
    want = pillow_decode(data, "RGB", draft=(tw, th))
    got = load_image(p, channels=3, draft_size=draft)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    got_fn = load_image(p, channels=3, draft_size=lambda h, w: (h // 4, w // 4))
    np.testing.assert_array_equal(got_fn, pillow_decode(data, "RGB", draft=(80, 100)))
    if backend is not None:
        assert backend.calls == 2


GOOD = encode(photo(64, 64), "JPEG", quality=90)
SOS = GOOD.find(b"\xff\xda")  # start of scan: entropy-coded data follows


def _patched(at: int, new: bytes) -> bytes:
    b = bytearray(GOOD)
    b[at : at + len(new)] = new
    return bytes(b)


# damage -> Pillow's reason (an error), or None: Pillow decodes it (libjpeg only warns)
DAMAGED = {
    "truncated": (GOOD[: len(GOOD) * 2 // 3], "truncated"),
    "no end marker": (GOOD[:-2], "truncated"),
    "zero components": (_patched(GOOD.find(b"\xff\xc0") + 9, b"\x00"), "not an image"),
    "bad huffman table": (_patched(GOOD.find(b"\xff\xc4") + 5, b"\xff" * 15), "broken data"),
    "end marker inside the scan": (_patched((SOS + len(GOOD)) // 2, b"\xff\xd9"), None),
    "extraneous byte": (GOOD[: SOS - 1] + b"\x00" + GOOD[SOS - 1 :], None),
}


@pytest.mark.parametrize("name", sorted(DAMAGED))
def test_damaged_jpeg_gets_pillows_verdict(backend, tmp_path, name):
    # simplejpeg (strict) rejects every one of these; Pillow's answer stands either way
    data, reason = DAMAGED[name]
    p = write(str(tmp_path / "bad.jpg"), data)
    if reason is None:
        want = pillow_decode(data, "RGB")
        np.testing.assert_array_equal(load_image(p), want)
        np.testing.assert_array_equal(decode_jpeg(data), want)
        return
    with pytest.raises(ImageDecodeError, match=reason) as info:
        load_image(p)
    assert info.value.path == p and str(info.value).startswith(p + ": ")
    for fn in (decode_jpeg, decode_image):
        with pytest.raises(ImageDecodeError, match=reason) as info:
            fn(data)
        assert info.value.path is None


def test_bomb_limit_applies(backend, monkeypatch):
    data = encode(photo(40, 40), "JPEG")  # 1,600 pixels
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 700)  # over twice the limit: an error
    with pytest.raises(ImageDecodeError, match="decompression-bomb limit"):
        decode_jpeg(data)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)  # between 1x and 2x: Pillow warns
    with pytest.warns(Image.DecompressionBombWarning):
        assert decode_jpeg(data).shape == (40, 40, 3)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1600)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert decode_jpeg(data).shape == (40, 40, 3)
    if backend is not None:
        assert backend.calls == 1  # only the image within the limit took the fast path


def test_multi_picture_jpeg_is_a_jpeg(backend):
    frames = [Image.fromarray(photo(16, 24, seed=s)) for s in (1, 2)]
    buf = io.BytesIO()
    frames[0].save(buf, "MPO", save_all=True, append_images=frames[1:])
    data = buf.getvalue()
    first = pillow_decode(data, "RGB")
    np.testing.assert_array_equal(decode_jpeg(data), first)
    np.testing.assert_array_equal(decode_image(data), first)
    both = decode_image(data, expand_animations=True)  # Pillow reads every picture
    assert both.shape == (2, 16, 24, 3)
    np.testing.assert_array_equal(both[0], first)


def test_not_a_jpeg_is_left_to_pillow(backend):
    png = encode(photo(5, 6), "PNG")
    assert decode_image(png).shape == (5, 6, 3)
    with pytest.raises(ImageDecodeError, match="expected a JPEG image, got PNG"):
        decode_jpeg(png)
    with pytest.raises(ImageDecodeError, match="empty file"):
        decode_jpeg(b"")
    with pytest.raises(TypeError, match="got str"):
        decode_jpeg("x.jpg")


def test_simplejpeg_rejects_every_damaged_file():
    # so the tests above exercise the fallback to Pillow, not simplejpeg's own verdict
    sj = pytest.importorskip("simplejpeg")
    for name, (data, _) in DAMAGED.items():
        with pytest.raises(ValueError):
            if sj.decode_jpeg_header(data):
                sj.decode_jpeg(data, "RGB", strict=True)
            pytest.fail(f"simplejpeg decoded {name!r}")
