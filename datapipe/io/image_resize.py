"""``resize_image``: bilinear image resizing with ``tf.image.resize``'s kernel, on numpy arrays.

The kernel is ``tf.image.resize(method="bilinear")``'s (also Keras's ``Resizing`` layer and
``image_dataset_from_directory``, and torch's ``interpolate(mode="bilinear",
align_corners=False)``): output pixel ``i`` samples the input at ``(i + 0.5) * in / out -
0.5`` (half-pixel centres), interpolating the two nearest pixels per axis and clamping at
the border. Without antialiasing a downscale by more than 2x skips pixels (aliasing), as
in TensorFlow; ``antialias=True`` is ``tf.image.resize(..., antialias=True)`` (Pillow's
``BILINEAR`` and torch's ``antialias=True`` compute it too): when an axis shrinks, the
triangle filter widens by the scale factor, so every input pixel contributes.

Backends, chosen per call (``benchmarks/bench_image_backends.py`` measured them on W2's
~256 px photos, one thread, 256 -> 224):

- OpenCV (``cv2.resize``, ``INTER_LINEAR`` -- the same kernel -- in float32) when
  ``opencv-python-headless`` is installed (``pip install "datapipe-torch[images]"``), for
  ``antialias=False`` and for ``antialias=True`` when no axis shrinks (the two kernels are
  then the same): ~0.1-0.2 ms per image, GIL released.
- torch (``interpolate`` in float32) otherwise: ~0.8 ms per image, GIL released.

Both compute in floating point (float64 for float64 input). Tolerance against
``tf.image.resize``'s float32 result, pinned by ``tests/io/test_image_resize.py`` for
both backends: float outputs within 5e-5 of the value range (0.013 on 0..255 data;
measured <= 0.005); integer outputs are those values rounded half to even and clipped to
the dtype's range -- ``tf.cast(tf.clip_by_value(tf.round(tf.image.resize(x)), lo, hi),
dtype)`` -- so within 0.5 + that tolerance, and equal to tf's rounded value except where
tf's value lies within the tolerance of a .5 boundary (0.02% of the pixel values on W2's
photos). Neither backend's 8-bit fixed-point kernel is used: OpenCV's costs about what
its float path costs and is one level off on ~10% of the pixel values; torch's is ~3x
faster than its float path but one level off on ~13%, and the fallback keeps the same
rounding rule instead.

OpenCV and torch may run an intra-op thread pool. Inside a parallel ``map`` nothing needs
setting: worker processes run both on ``max_intra_op_parallelism`` threads (default 1),
and AUTOTUNE tries processes for threads that those pools or the GIL hold back
(``datapipe.options.ThreadingOptions``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from datapipe.image_format import looks_like_other_layout

_UNSET: Any = object()
cv2: Any = _UNSET  # OpenCV (optional: pip install "datapipe-torch[images]"), imported at first use


def _opencv() -> Any:
    """The cv2 module, or None when it is not installed (imported once, on first use:
    ``import datapipe`` does not pay for it)."""
    global cv2
    if cv2 is _UNSET:
        try:
            import cv2 as found
        except ImportError:  # pragma: no cover - the torch path is tested by forcing None
            cv2 = None
        else:
            cv2 = found
    return cv2


_CV2_MAX_CHANNELS = 512  # OpenCV's CV_CN_MAX


def _check(images: Any, size: Any, dtype: Any, data_format: str) -> tuple:
    arr = np.asarray(images)
    if arr.ndim not in (3, 4):
        raise ValueError(
            "resize: images must be (height, width, channels) or (batch, height, width, "
            f"channels) (channels first with data_format='channels_first'); got shape {arr.shape}"
        )
    if arr.dtype.kind not in "uif":
        raise ValueError(f"resize: images must be integer or float, got dtype {arr.dtype}")
    try:
        h, w = (int(v) for v in size)
    except (TypeError, ValueError):
        raise ValueError(f"resize: size must be (height, width), got {size!r}") from None
    if h < 1 or w < 1:
        raise ValueError(f"resize: size must be positive, got {size!r}")
    out = arr.dtype if dtype is None else np.dtype(dtype)
    if out.kind not in "uif":
        raise ValueError(f"resize: dtype must be an integer or float dtype, got {out}")
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(
            f"resize: data_format must be 'channels_last' or 'channels_first', got {data_format!r}"
        )
    theirs = looks_like_other_layout(arr.shape, data_format)
    if theirs is not None:  # a silent misread resized the wrong axes (issue 33 item 2)
        raise ValueError(
            f"resize: data_format is {data_format!r} but the input of shape {arr.shape} looks "
            f"{theirs}; pass data_format={theirs!r} or permute the input"
        )
    return arr, (h, w), out


def _compute_dtype(dtype: np.dtype) -> type:
    return np.float64 if dtype == np.float64 else np.float32


def _resize_cv2(cv: Any, img: np.ndarray, h: int, w: int) -> np.ndarray:
    src: np.ndarray = np.ascontiguousarray(img, dtype=_compute_dtype(img.dtype))
    out = cv.resize(src, (w, h), interpolation=cv.INTER_LINEAR)
    return out.reshape(h, w, img.shape[2])  # cv2 drops a single channel's axis


def _resize_torch(img: np.ndarray, h: int, w: int, antialias: bool) -> np.ndarray:
    import torch

    src: np.ndarray = np.ascontiguousarray(img, dtype=_compute_dtype(img.dtype))
    t = torch.from_numpy(src).permute(2, 0, 1)[None]  # NCHW view, channels-last memory
    out = torch.nn.functional.interpolate(
        t, size=(h, w), mode="bilinear", align_corners=False, antialias=antialias
    )
    return out[0].permute(1, 2, 0).numpy()


def _resize_one(cv: Any, img: np.ndarray, h: int, w: int, antialias: bool) -> np.ndarray:
    """One (height, width, channels) image to (h, w, channels), float32/64."""
    shrinks = h < img.shape[0] or w < img.shape[1]
    if cv is not None and not (antialias and shrinks) and img.shape[2] <= _CV2_MAX_CHANNELS:
        return _resize_cv2(cv, img, h, w)
    return _resize_torch(img, h, w, antialias and shrinks)


def _cast(cv: Any, x: np.ndarray, dtype: np.dtype, src: np.dtype) -> np.ndarray:
    if dtype.kind == "f":
        return x.astype(dtype, copy=False)
    if cv is not None and dtype == np.uint8 and src.kind == "u":
        # One pass instead of three: saturating round half to even of |x|, and x >= 0
        # here (a convex combination of unsigned values; -0.0 at worst).
        return cv.convertScaleAbs(x).reshape(x.shape)
    x = np.rint(x, out=x)  # half to even, as tf.round
    info = np.iinfo(dtype)
    # Bilinear weights are >= 0 and sum to 1, so the output stays within the input's
    # range: integer input that fits the output dtype needs no clipping.
    if src.kind == "f" or np.iinfo(src).min < info.min or np.iinfo(src).max > info.max:
        np.clip(x, info.min, info.max, out=x)
    return x.astype(dtype)


def resize_image(
    images: Any,
    size: tuple[int, int],
    *,
    antialias: bool = False,
    dtype: Any = None,
    data_format: str = "channels_last",
) -> np.ndarray:
    """Resize an image or a batch with bilinear interpolation (``tf.image.resize``).

    Args:
        images: ``(height, width, channels)`` or ``(batch, height, width, channels)``
            (``(channels, height, width)`` / ``(batch, channels, height, width)`` with
            ``data_format="channels_first"``); any integer or float dtype.
        size: ``(height, width)`` of the output, positive ints.
        antialias: False (default, as ``tf.image.resize``): two taps per axis at
            half-pixel centres. True: when an axis shrinks, a triangle filter as wide as
            the scale factor (``tf.image.resize(..., antialias=True)``); no effect when
            no axis shrinks.
        dtype: the output dtype; default the input's. Float outputs are unrounded;
            integer outputs are rounded half to even and clipped to the dtype's range.
        data_format: ``"channels_last"`` (default) or ``"channels_first"``.

    Returns:
        ``np.ndarray`` of ``dtype``, the input's layout with height and width replaced
        by ``size``.

    Raises:
        ValueError: a rank other than 3 or 4, a non-numeric dtype, a bad ``size``,
            ``dtype`` or ``data_format``, or an input that looks like the other layout
            (``datapipe.image_format.looks_like_other_layout``: a ``(3, 50, 40)`` array
            with ``data_format="channels_last"``), naming ``data_format``.

    The kernel and the backends (OpenCV when installed, else torch) are described in the
    module's docstring, with the tolerance against ``tf.image.resize``.

    Example:
        >>> import numpy as np
        >>> img = np.array([[0, 100], [200, 255]], np.uint8)[..., None]
        >>> resize_image(img, (1, 1))[..., 0]  # a 2x downscale averages each 2x2 block
        array([[139]], dtype=uint8)
        >>> resize_image(img, (1, 1), dtype=np.float32)[..., 0]
        array([[138.75]], dtype=float32)
    """
    return _resize(_opencv(), images, size, antialias, dtype, data_format)


def _resize(
    cv: Any, images: Any, size: Any, antialias: bool, dtype: Any, data_format: str
) -> np.ndarray:
    """``resize_image`` with OpenCV's module given (None: torch computes it)."""
    arr, (h, w), out_dtype = _check(images, size, dtype, data_format)
    batch = arr if arr.ndim == 4 else arr[None]
    if data_format == "channels_first":
        batch = batch.transpose(0, 2, 3, 1)
    if 0 in batch.shape[1:]:
        raise ValueError(f"resize: images of shape {arr.shape} have no pixels")
    outs = [_cast(cv, _resize_one(cv, img, h, w, antialias), out_dtype, arr.dtype) for img in batch]
    out = outs[0][None] if len(outs) == 1 else np.stack(outs)
    if data_format == "channels_first":
        out = np.ascontiguousarray(out.transpose(0, 3, 1, 2))
    return out if arr.ndim == 4 else out[0]
