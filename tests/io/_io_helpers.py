"""Helpers for the file tests: images written by Pillow, bad files of every kind."""

from __future__ import annotations

import io
import os

import numpy as np
from PIL import Image


def pixels(h: int, w: int, c: int, seed: int = 0) -> np.ndarray:
    arr = np.random.default_rng(seed).integers(0, 256, (h, w, c), dtype=np.uint8)
    return arr[..., 0] if c == 1 else arr


def encode(arr: np.ndarray, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, fmt, **kw)
    return buf.getvalue()


def write(path: str, data: bytes) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path


def bad_png_crc() -> bytes:
    """A PNG whose IDAT chunk's CRC is wrong (Pillow alone would not notice)."""
    data = bytearray(encode(pixels(8, 8, 3), "PNG"))
    i = data.find(b"IDAT")
    length = int.from_bytes(data[i - 4 : i], "big")
    data[i + 4 + length] ^= 0xFF
    return bytes(data)


def truncated_jpeg() -> bytes:
    data = encode(pixels(64, 64, 3), "JPEG")
    return data[: len(data) // 2]


BAD_FILES = {
    "truncated.jpg": (truncated_jpeg, "truncated"),
    "empty.png": (lambda: b"", "empty file"),
    "text.png": (lambda: b"hello, not an image", "not an image"),
    "badcrc.png": (bad_png_crc, "bad CRC checksum in the IDAT chunk"),
}
