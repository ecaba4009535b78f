"""Resizing and CenterCrop (Keras's ``keras.layers.Resizing`` / ``CenterCrop``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .base import MAX_SIDE, Layer, _is_number, check_bool
from .geometric import GeometricLayer, window_matrix

# Keras's torch backend maps its names onto these F.interpolate modes.
_MODES = {"bilinear": "bilinear", "nearest": "nearest-exact", "bicubic": "bicubic"}


def _check_size(layer: Layer, height: Any, width: Any) -> tuple[int, int]:
    """``(height, width)`` as Python ints in [1, MAX_SIDE] (numpy integers too, as Keras
    takes them: the layer and its config hold plain ints). Keras checks nothing; an absurd
    size would fail later, deep in torch. Raises ``ValueError`` naming the argument."""
    sides = []
    for name, v in (("height", height), ("width", width)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 1 <= v <= MAX_SIDE:
            layer._fail(name, f"must be an int in [1, {MAX_SIDE}]", v)
        sides.append(int(v))
    return sides[0], sides[1]


def resize_nchw(
    x: torch.Tensor, size: tuple[int, int], interpolation: str = "bilinear", antialias=False
) -> torch.Tensor:
    """Resize a float (B, C, H, W) batch; half-pixel centres, as tf.image.resize."""
    h, w = x.shape[-2:]
    # The shortcut only for sizes known now: a symbolic side (torch.export with a dynamic
    # height) would be guarded to differ from the target ("Constraints violated (h)").
    # Interpolating to the same size is exact in every mode, so both paths agree.
    if isinstance(h, int) and isinstance(w, int) and (h, w) == tuple(size):
        return x
    mode = _MODES[interpolation]
    align = False if mode in ("bilinear", "bicubic") else None
    anti = bool(antialias) and mode in ("bilinear", "bicubic")
    dtype = x.dtype
    y = x if dtype in (torch.float32, torch.float64) else x.to(torch.float32)
    y = F.interpolate(y, size=size, mode=mode, align_corners=align, antialias=anti)
    return y.to(dtype)


def aspect_window(h: int, w: int, height: int, width: int) -> tuple[int, int, int, int]:
    """(top, left, crop_h, crop_w): the largest centred window of an h x w image with the
    aspect ratio of height x width (Keras's crop_to_aspect_ratio)."""
    # Integer floor division: Keras's int(w * height / width) for these non-negative
    # sides (below 2**16 each, so the float quotient is never rounded across an integer),
    # and it stays symbolic under torch.export with dynamic sides (a float would pin them).
    crop_h = max(min(h, w * height // width), 1)
    crop_w = max(min(w, h * width // height), 1)
    return (h - crop_h) // 2, (w - crop_w) // 2, crop_h, crop_w


def crop_to_aspect(x: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """The largest centred window of (B, C, H, W) ``x`` with the target aspect ratio."""
    h, w = x.shape[-2:]
    top, left, crop_h, crop_w = aspect_window(h, w, height, width)
    return x[..., top : top + crop_h, left : left + crop_w]


def pad_amounts(h: int, w: int, height: int, width: int) -> tuple[int, int]:
    """(top, left) padding of Keras's pad_to_aspect_ratio (each applied on both sides)."""
    pad_h = max(h, w * height // width)  # as aspect_window: exact, and stays symbolic
    pad_w = max(w, h * width // height)
    return (pad_h - h) // 2, (pad_w - w) // 2


def pad_to_aspect(x: torch.Tensor, height: int, width: int, fill_value: float) -> torch.Tensor:
    """Pad (B, C, H, W) ``x`` symmetrically with ``fill_value`` to the target aspect ratio."""
    h, w = x.shape[-2:]
    top, left = pad_amounts(h, w, height, width)
    # Keras pads both sides by the same amount (the centred start).
    return F.pad(x, (left, left, top, top), value=float(fill_value))


def center_window(h: int, w: int, height: int, width: int) -> tuple[int, int, int, int]:
    """The window CenterCrop takes: the centred (height, width) one when the image is large
    enough, else the largest centred window with that aspect ratio (then resized)."""
    if h >= height and w >= width:
        return (h - height) // 2, (w - width) // 2, height, width
    return aspect_window(h, w, height, width)


def center_crop_nchw(
    x: torch.Tensor, height: int, width: int, interpolation: str = "bilinear"
) -> torch.Tensor:
    """Keras's CenterCrop: crop when large enough, else crop to aspect and resize."""
    h, w = x.shape[-2:]
    top, left, crop_h, crop_w = center_window(h, w, height, width)
    x = x[..., top : top + crop_h, left : left + crop_w]
    return resize_nchw(x, (height, width), interpolation)


def fixed_window_matrix(
    batch: int, window: tuple[int, int, int, int], height: int, width: int
) -> torch.Tensor:
    """(batch, 3, 3) point matrices of one window resized to (height, width)."""
    top, left, win_h, win_w = window
    m = window_matrix(torch.tensor(float(top)), left, win_h, win_w, height, width)
    return m.expand(batch, 3, 3)


class Resizing(GeometricLayer):
    """Resize images to ``(height, width)``.

    Args:
        height, width: the output size (ints in [1, 65536]).
        interpolation: ``"bilinear"`` (default), ``"nearest"`` or ``"bicubic"``; the
            kernels are those Keras's torch backend uses (half-pixel centres).
        crop_to_aspect_ratio: first take the largest centred window with the target
            aspect ratio, so nothing is distorted.
        pad_to_aspect_ratio: first pad symmetrically with ``fill_value`` to the target
            aspect ratio. At most one of the two may be True.
        fill_mode: only ``"constant"`` (Keras's only mode for resizing).
        fill_value: the padding value for ``pad_to_aspect_ratio``.
        antialias: low-pass filter when downsampling (bilinear/bicubic only).
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``.
        bounding_box_format: the format of boxes in dict inputs (``preprocessing.
            bounding_boxes``); boxes are scaled (and shifted by the crop or padding).
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``).

    Input: a rank-3 image, a rank-4 batch or a dict of targets (``Layer``; masks are
    resized with ``"nearest"``). Output: same rank with the new size; float dtypes are
    kept, integer inputs come back as float32.

    Raises:
        ValueError: a bad argument (naming it) or an input that is not rank 3 or 4.

    Example:
        >>> import torch
        >>> Resizing(1, 2)(torch.tensor([[[0.0, 2.0, 4.0, 6.0]]]))
        tensor([[[1., 5.]]])
    """

    def __init__(
        self,
        height: int,
        width: int,
        interpolation: str = "bilinear",
        crop_to_aspect_ratio: bool = False,
        pad_to_aspect_ratio: bool = False,
        fill_mode: str = "constant",
        fill_value: float = 0.0,
        antialias: bool = False,
        data_format: str | None = None,
        bounding_box_format: str | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            bounding_box_format=bounding_box_format, data_format=data_format, dtype=dtype, **kwargs
        )
        height, width = _check_size(self, height, width)
        if interpolation not in _MODES:
            self._fail("interpolation", f"must be one of {tuple(_MODES)}", interpolation)
        if crop_to_aspect_ratio and pad_to_aspect_ratio:
            self._fail(
                "crop_to_aspect_ratio/pad_to_aspect_ratio", "cannot both be True", (True, True)
            )
        if fill_mode != "constant":
            self._fail("fill_mode", "must be 'constant'", fill_mode)
        if not _is_number(fill_value):
            self._fail("fill_value", "must be a finite number", fill_value)
        self.height, self.width = height, width
        self.interpolation = interpolation
        self.crop_to_aspect_ratio = check_bool(self, "crop_to_aspect_ratio", crop_to_aspect_ratio)
        self.pad_to_aspect_ratio = check_bool(self, "pad_to_aspect_ratio", pad_to_aspect_ratio)
        self.fill_mode, self.fill_value = fill_mode, fill_value
        self.antialias = check_bool(self, "antialias", antialias)

    def output_size(self, params: Any, height: int, width: int) -> tuple[int, int]:
        return self.height, self.width

    def warp(self, x: torch.Tensor, params: Any, interpolation: str) -> torch.Tensor:
        if self.crop_to_aspect_ratio:
            x = crop_to_aspect(x, self.height, self.width)
        elif self.pad_to_aspect_ratio:
            x = pad_to_aspect(x, self.height, self.width, self.fill_value)
        return resize_nchw(x, (self.height, self.width), interpolation, self.antialias)

    def point_matrix(self, params: Any, height: int, width: int) -> torch.Tensor:
        if self.crop_to_aspect_ratio:
            window = aspect_window(height, width, self.height, self.width)
        elif self.pad_to_aspect_ratio:
            top, left = pad_amounts(height, width, self.height, self.width)
            window = (-top, -left, height + 2 * top, width + 2 * left)
        else:
            window = (0, 0, height, width)
        return fixed_window_matrix(params["input_shape"][0], window, self.height, self.width)


class CenterCrop(GeometricLayer):
    """Crop the centre ``(height, width)`` window (Keras's ``CenterCrop``).

    When the input is smaller than the target on either side, the largest centred
    window with the target aspect ratio is resized (bilinear) to the target, as Keras.

    Args:
        height, width: the output size (ints in [1, 65536]).
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``.
        bounding_box_format: the format of boxes in dict inputs (``preprocessing.
            bounding_boxes``).
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``).

    Input: a rank-3 image, a rank-4 batch or a dict of targets (``Layer``). Output: same
    rank, ``(height, width)`` spatially; float dtypes are kept, integer inputs come back
    as float32.

    Raises:
        ValueError: a bad size or an input that is not rank 3 or 4.

    Example:
        >>> import torch
        >>> CenterCrop(1, 2)(torch.arange(12.0).reshape(1, 3, 4))
        tensor([[[5., 6.]]])
    """

    def __init__(
        self,
        height: int,
        width: int,
        data_format: str | None = None,
        bounding_box_format: str | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            bounding_box_format=bounding_box_format, data_format=data_format, dtype=dtype, **kwargs
        )
        self.height, self.width = _check_size(self, height, width)

    def output_size(self, params: Any, height: int, width: int) -> tuple[int, int]:
        return self.height, self.width

    def warp(self, x: torch.Tensor, params: Any, interpolation: str) -> torch.Tensor:
        return center_crop_nchw(x, self.height, self.width, interpolation)

    def point_matrix(self, params: Any, height: int, width: int) -> torch.Tensor:
        window = center_window(height, width, self.height, self.width)
        return fixed_window_matrix(params["input_shape"][0], window, self.height, self.width)
