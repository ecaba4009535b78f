"""JPEG decoding through simplejpeg (libjpeg-turbo's TurboJPEG API), when it is installed.

Measured on W2's photos (``benchmarks/bench_image_backends.py``): simplejpeg decodes a
~256 px JPEG in ~0.6 of Pillow's time (Pillow parses the markers in Python and copies
the pixels once more into numpy) and releases the GIL while it decodes. Both run
libjpeg-turbo with the same settings (the ISLOW integer DCT, "fancy" chroma upsampling), so
the pixels are the same: ``images.py`` takes this path only where that holds, and Pillow
decodes everything else:

- a colour space Pillow and libjpeg convert alike: Gray, YCbCr or RGB (CMYK and YCCK go
  to Pillow, which applies its own Adobe CMYK inversion);
- ``channels`` 0, 3 or 4, or 1 for a gray JPEG (Pillow's RGB -> L conversion is its own
  weighted sum, not libjpeg's Y channel);
- under Pillow's decompression-bomb limit (Pillow then warns or raises);
- a DCT scale that TurboJPEG picks exactly (see ``decode``).

Any error here (truncated or corrupt data, a warning libjpeg would only print, a
subsampling TurboJPEG does not handle) returns None, so Pillow decodes the file again and
its verdict -- an image, or ``ImageDecodeError`` with Pillow's reason -- is the answer:
bad input behaves the same with or without simplejpeg.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from PIL import Image

try:  # optional: pip install "datapipe-torch[images]"
    import simplejpeg
except ImportError:  # pragma: no cover - exercised by forcing the attribute to None
    simplejpeg = None


def _version(mod) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in str(mod.__version__).split(".")[:2])
    except (AttributeError, ValueError):  # pragma: no cover
        return (0,)


if simplejpeg is not None and _version(simplejpeg) < (1, 9):  # pragma: no cover
    simplejpeg = None  # ``strict=`` (used below) is tested from 1.9 on

_SOI = b"\xff\xd8\xff"
_PIXEL_FORMAT = {0: None, 3: "RGB", 4: "RGBA"}  # 0: as stored, chosen from the header


def available() -> bool:
    """True when simplejpeg is installed (and not switched off for a test)."""
    return simplejpeg is not None


def is_jpeg(data: bytes) -> bool:
    return data[:3] == _SOI


def _pixel_format(colorspace: str, channels: int) -> str | None:
    if colorspace not in ("YCbCr", "RGB", "Gray"):
        return None  # CMYK / YCCK: Pillow's conversion
    gray = colorspace == "Gray"
    if channels == 1:
        return "GRAY" if gray else None
    if channels == 0:
        return "GRAY" if gray else "RGB"
    return _PIXEL_FORMAT[channels]


def _under_bomb_limit(h: int, w: int) -> bool:
    limit = Image.MAX_IMAGE_PIXELS
    return limit is None or h * w <= limit


def decode(
    data: bytes, channels: int, scale_for: Callable[[int, int], int] | None = None
) -> np.ndarray | None:
    """``data`` decoded to uint8 ``(h, w, c)``, or None when Pillow should decode it.

    ``scale_for(height, width)`` gives the DCT scale (1, 2, 4 or 8) from the stored size:
    the image decodes at ``ceil(size / scale)`` with libjpeg's DCT scaling, as Pillow's
    ``draft`` does. TurboJPEG picks the smallest of its M/8 factors whose output still
    covers the requested size; with a side of at least 8 pixels no factor below 1/scale
    covers ``ceil(side / scale)`` (it gives at least side/8 pixels fewer), so it picks
    exactly 1/scale. Smaller images go to Pillow.
    """
    if simplejpeg is None or not is_jpeg(data):
        return None
    try:
        h, w, colorspace, _ = simplejpeg.decode_jpeg_header(data)
        fmt = _pixel_format(colorspace, channels)
        if fmt is None or not _under_bomb_limit(h, w):
            return None
        scale = 1 if scale_for is None else scale_for(h, w)
        if scale == 1:
            return simplejpeg.decode_jpeg(data, fmt, strict=True)
        if max(h, w) < 8:
            return None
        th, tw = -(-h // scale), -(-w // scale)
        return simplejpeg.decode_jpeg(
            data, fmt, min_height=th, min_width=tw, min_factor=scale, strict=True
        )
    except ValueError:
        return None  # Pillow decodes it again and reports (or accepts) it its own way
