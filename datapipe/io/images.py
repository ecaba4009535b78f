"""Image decoding: ``decode_image``, ``decode_jpeg``, ``decode_png``, ``load_image``.

Semantics follow ``tf.io.decode_image`` / ``decode_jpeg`` / ``decode_png`` where they apply:
HWC arrays, ``channels`` 0 (as stored) / 1 / 3 / 4, ``dtype`` uint8 (or uint16, or float
in [0, 1] as ``tf.image.convert_image_dtype`` scales). Pillow decodes, and its
decompression-bomb limit (``PIL.Image.MAX_IMAGE_PIXELS``) stays on: an image over twice
the limit raises ``ImageDecodeError`` (Pillow itself only warns between 1x and 2x).

JPEGs decode through simplejpeg when it is installed (``pip install "datapipe-torch[images]"``):
about 1.7x as fast as Pillow on ~256 px photos, with the GIL released while it decodes,
and the same pixels -- both run libjpeg-turbo with the ISLOW DCT and fancy upsampling
(``benchmarks/bench_image_backends.py`` measures it; ``_jpeg.py`` lists the cases that stay
with Pillow). A file simplejpeg rejects is decoded again by Pillow, so errors are Pillow's
with or without it. Note that ``tf.io.decode_jpeg``'s default ``dct_method=""`` is the
faster, less accurate IFAST DCT (pixels differ by up to ~7 levels); its
``dct_method="INTEGER_ACCURATE"`` gives these pixels.

As in tf.io, the EXIF orientation tag is ignored: pixels come out as stored, the same
as ``numpy.asarray(PIL.Image.open(f))`` (apply ``PIL.ImageOps.exif_transpose`` yourself
to rotate them).

Every failure raises ``ImageDecodeError`` (a ``ValueError``) with the reason; the functions
on bytes cannot know the file, ``load_image(path)`` names it, and inside ``Dataset.map``
the ``PipelineError`` carries it as ``.path``.
"""

from __future__ import annotations

import io
import os
import struct
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from datapipe.errors import ImageDecodeError
from datapipe.io import _jpeg
from datapipe.io.read_file import as_path, read_file

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_SIXTEEN_BIT = ("I", "I;16", "I;16B", "I;16L", "I;16N")
_MODE_OF_CHANNELS = {1: "L", 3: "RGB", 4: "RGBA"}


def _check_png_crcs(data: bytes) -> None:
    """libpng (tf.io.decode_png) rejects a chunk whose CRC is wrong; Pillow does not check
    the CRC of image-data chunks, so check every chunk here (zlib.crc32 runs at memory speed)."""
    pos, n = 8, len(data)
    while pos + 12 <= n:
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        end = pos + 8 + length
        if end + 4 > n:
            raise ImageDecodeError(f"truncated PNG: chunk at byte {pos} runs past the end")
        ctype = data[pos + 4 : pos + 8]
        (crc,) = struct.unpack(">I", data[end : end + 4])
        if zlib.crc32(data[pos + 4 : end]) & 0xFFFFFFFF != crc:
            name = ctype.decode("latin-1")
            raise ImageDecodeError(f"corrupt PNG: bad CRC checksum in the {name} chunk")
        if ctype == b"IEND":
            return
        pos = end + 4
    raise ImageDecodeError("truncated PNG: no IEND chunk")


def _as_bytes(contents: bytes) -> bytes:
    if not isinstance(contents, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected the image file's bytes, got {type(contents).__name__}")
    if len(contents) == 0:
        raise ImageDecodeError("empty file (0 bytes), not an image")
    return bytes(contents)


def _open(data: bytes, expect: str | None = None) -> Image.Image:
    """Open ``data`` with Pillow (lazily), turning its errors into ImageDecodeError."""
    if data.startswith(_PNG_SIGNATURE):
        _check_png_crcs(data)
    try:
        img = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as e:
        raise ImageDecodeError(f"over Pillow's decompression-bomb limit: {e}") from e
    except UnidentifiedImageError as e:
        raise ImageDecodeError(f"not an image Pillow can read (starts with {data[:8]!r})") from e
    except (OSError, SyntaxError, ValueError) as e:
        raise ImageDecodeError(f"corrupt image header: {e}") from e
    if expect is not None and _format(img) != expect:
        raise ImageDecodeError(f"expected a {expect} image, got {img.format}")
    return img


def _format(img: Image.Image) -> str | None:
    """Pillow's format name, with a multi-picture JPEG (MPO: a JPEG with an APP2 index of
    further pictures, as cameras write) counted as JPEG, as libjpeg and tf.io read it."""
    return "JPEG" if img.format == "MPO" else img.format


def _draft_scale(w: int, h: int, tw: int, th: int) -> int:
    """The DCT scale Pillow's ``JpegImageFile.draft(None, (tw, th))`` picks: the largest of
    8, 4, 2, 1 not above ``min(w // tw, h // th)``."""
    scale = min(w // max(1, tw), h // max(1, th))
    return next(s for s in (8, 4, 2, 1) if scale >= s or s == 1)


def _draft(img: Image.Image, tw: int, th: int) -> None:
    if _format(img) == "JPEG":
        img.draft(None, (max(1, int(tw)), max(1, int(th))))


def _load(img: Image.Image) -> None:
    try:
        img.load()
    except Image.DecompressionBombError as e:
        raise ImageDecodeError(f"over Pillow's decompression-bomb limit: {e}") from e
    except (OSError, SyntaxError, ValueError, EOFError, struct.error) as e:
        # Pillow reports a truncated file as OSError("image file is truncated ...")
        raise ImageDecodeError(f"corrupt or truncated {img.format} data: {e}") from e


def _natural_mode(img: Image.Image) -> str:
    """The Pillow mode that ``channels=0`` decodes to (what the file stores)."""
    m = img.mode
    if m in ("L", "LA", "RGB", "RGBA") or m in _SIXTEEN_BIT:
        return m
    if m == "1":
        return "L"
    if m in ("P", "PA"):
        return "RGBA" if m == "PA" or "transparency" in img.info else "RGB"
    if m == "La":
        return "LA"
    if m in ("RGBa", "RGBX"):
        return "RGBA" if m == "RGBa" else "RGB"
    return "RGB"  # CMYK, YCbCr, LAB, HSV, F


def _convert_dtype(arr: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``tf.image.convert_image_dtype``'s scaling between uint8, uint16 and float."""
    src = arr.dtype
    if dtype == src:
        return arr
    if dtype.kind == "f":
        return (arr.astype(dtype) / dtype.type(np.iinfo(src).max)).astype(dtype)
    if dtype == np.uint8 and src == np.uint16:
        return (arr >> 8).astype(np.uint8)
    if dtype == np.uint16 and src == np.uint8:
        return arr.astype(np.uint16) * np.uint16(257)
    raise ValueError(f"dtype must be uint8, uint16, float16, float32 or float64, got {dtype}")


def _frame_to_array(img: Image.Image, channels: int, dtype: np.dtype) -> np.ndarray:
    natural = _natural_mode(img)
    if natural in _SIXTEEN_BIT:
        gray = np.asarray(img).astype(np.uint16)[..., None]  # "I" holds 16-bit values in int32
        if channels in (3, 4):
            parts = [gray] * 3 + ([np.full_like(gray, 65535)] if channels == 4 else [])
            gray = np.concatenate(parts, axis=-1)
        return _convert_dtype(gray, dtype)
    mode = natural if channels == 0 else _MODE_OF_CHANNELS[channels]
    if img.mode != mode:
        img = img.convert(mode)
    arr = np.asarray(img)
    if arr.ndim == 2:
        arr = arr[..., None]
    return _convert_dtype(arr, dtype)


def _check_args(channels: int | None, dtype: Any) -> tuple[int, np.dtype]:
    c = 0 if channels is None else int(channels)
    if c not in (0, 1, 3, 4):
        raise ValueError(f"channels must be 0, 1, 3 or 4, got {channels}")
    dt = np.dtype(dtype)
    if dt not in (np.uint8, np.uint16) and dt.kind != "f":
        raise ValueError(f"dtype must be uint8, uint16 or a float dtype, got {dt}")
    return c, dt


def _decode(img: Image.Image, channels: int, dtype: np.dtype, expand: bool) -> np.ndarray:
    _load(img)
    frames = getattr(img, "n_frames", 1)
    if not expand or frames == 1:
        return _frame_to_array(img, channels, dtype)
    out = []
    for i in range(frames):  # later GIF frames are composited; decode them all as RGB(A)
        try:
            img.seek(i)
            img.load()
        except (OSError, EOFError, ValueError) as e:
            raise ImageDecodeError(f"corrupt animation frame {i}: {e}") from e
        out.append(_frame_to_array(img.convert("RGB") if channels == 0 else img, channels, dtype))
    return np.stack(out)


def decode_image(
    contents: bytes,
    channels: int | None = 0,
    dtype: Any = np.uint8,
    expand_animations: bool = False,
) -> np.ndarray:
    """Decode a BMP, GIF, JPEG, PNG, WebP or TIFF image (``tf.io.decode_image``).

    Args:
        contents: the encoded file's bytes.
        channels: 0 keeps the file's channels (gray 1, gray+alpha 2, RGB 3, RGBA 4; a
            palette image becomes RGB, or RGBA when it has transparency); 1, 3 or 4
            convert with Pillow (``L``, ``RGB``, ``RGBA``).
        dtype: ``uint8`` (default), ``uint16`` (16-bit PNGs keep their precision; 8-bit
            values scale by 257), or a float dtype (values scaled to [0, 1]).
        expand_animations: False (default here; tf's default is True) decodes the first
            frame of an animated GIF/PNG/WebP into a 3-D array; True returns all frames
            as ``(frames, height, width, channels)`` (RGB when ``channels=0``).

    Returns:
        ``np.ndarray`` of shape ``(height, width, channels)`` and ``dtype``.

    Raises:
        ImageDecodeError: empty, not an image, truncated or corrupt data (including a PNG
            chunk with a bad CRC), or over Pillow's decompression-bomb limit.
        ValueError: bad ``channels`` or ``dtype``.

    Example:
        >>> import io, numpy as np
        >>> from PIL import Image
        >>> buf = io.BytesIO()
        >>> Image.fromarray(np.zeros((4, 6), np.uint8)).save(buf, "PNG")
        >>> decode_image(buf.getvalue(), channels=3).shape
        (4, 6, 3)
    """
    c, dt = _check_args(channels, dtype)
    data = _as_bytes(contents)
    fast = None if expand_animations else _jpeg.decode(data, c)
    if fast is not None:
        return _convert_dtype(fast, dt)
    return _decode(_open(data), c, dt, expand_animations)


def decode_jpeg(contents: bytes, channels: int | None = 0, ratio: int = 1) -> np.ndarray:
    """Decode a JPEG to ``uint8`` HWC (``tf.io.decode_jpeg``).

    Args:
        contents: JPEG bytes.
        channels: 0 (as stored: 1 or 3), 1 or 3 (4 also accepted: RGBA with opaque alpha).
        ratio: 1, 2, 4 or 8: downscale while decoding (libjpeg's DCT scaling, as
            Pillow's draft mode picks it); the size is ``ceil(size / ratio)``.

    Raises:
        ImageDecodeError: not a JPEG, or corrupt/truncated data.

    Example:
        >>> import io, numpy as np
        >>> from PIL import Image
        >>> buf = io.BytesIO()
        >>> Image.fromarray(np.zeros((16, 8, 3), np.uint8)).save(buf, "JPEG")
        >>> decode_jpeg(buf.getvalue(), ratio=4).shape
        (4, 2, 3)
    """
    c, _ = _check_args(channels, np.uint8)
    if ratio not in (1, 2, 4, 8):
        raise ValueError(f"decode_jpeg: ratio must be 1, 2, 4 or 8, got {ratio}")
    data = _as_bytes(contents)
    fast = _jpeg.decode(data, c, lambda h, w: _draft_scale(w, h, w // ratio, h // ratio))
    if fast is not None:
        return fast
    img = _open(data, expect="JPEG")
    if ratio > 1:
        w, h = img.size
        _draft(img, w // ratio, h // ratio)
    return _decode(img, c, np.dtype(np.uint8), False)


def decode_png(contents: bytes, channels: int | None = 0, dtype: Any = np.uint8) -> np.ndarray:
    """Decode a PNG to HWC (``tf.io.decode_png``): ``dtype`` uint8 or uint16 (or float).

    Raises:
        ImageDecodeError: not a PNG, a chunk with a bad CRC, or truncated/corrupt data.
    """
    c, dt = _check_args(channels, dtype)
    return _decode(_open(contents, expect="PNG"), c, dt, False)


def load_image(
    path: str | bytes | os.PathLike,
    channels: int | None = 0,
    dtype: Any = np.uint8,
    draft_size: tuple[int, int] | Callable[[int, int], tuple[int, int]] | None = None,
    expand_animations: bool = False,
) -> np.ndarray:
    """Read and decode the image file at ``path``; errors name the path.

    Args:
        path: the file.
        channels, dtype, expand_animations: as in ``decode_image``.
        draft_size: ``(height, width)``: a JPEG is decoded at the largest 1/2, 1/4 or 1/8
            scale that still has at least this size (libjpeg's DCT scaling as Pillow's
            draft mode picks it; much faster than a full decode followed by a resize).
            Other formats decode at full size. May be a function ``(height, width) ->
            (height, width)`` of the stored size.

    Raises:
        ImageDecodeError: as ``decode_image``, with ``path`` set.
        OSError: the file cannot be read (``filename`` set).
    """
    p = as_path(path)
    c, dt = _check_args(channels, dtype)
    data = read_file(p)

    def target(h: int, w: int) -> tuple[int, int]:
        assert draft_size is not None  # target() is only called when a size was given
        th, tw = draft_size(h, w) if callable(draft_size) else draft_size
        return int(th), int(tw)

    def scale_for(h: int, w: int) -> int:
        th, tw = target(h, w)
        return _draft_scale(w, h, tw, th)

    try:
        data = _as_bytes(data)
        fast = None
        if not expand_animations:
            fast = _jpeg.decode(data, c, None if draft_size is None else scale_for)
        if fast is not None:
            return _convert_dtype(fast, dt)
        img = _open(data)
        if draft_size is not None:
            th, tw = target(img.size[1], img.size[0])
            _draft(img, tw, th)
        return _decode(img, c, dt, expand_animations)
    except ImageDecodeError as e:
        raise e.with_path(p) from e.__cause__
