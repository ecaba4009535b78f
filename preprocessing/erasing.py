"""RandomErasing (Keras's ``keras.layers.RandomErasing``)."""

from __future__ import annotations

import math
from typing import Any

import torch

from . import _regions
from .base import RandomLayer, _is_number


class RandomErasing(RandomLayer):
    """Fill a random rectangle of each image with a constant or with noise.

    Random Erasing (Zhong et al., "Random Erasing Data Augmentation", AAAI 2020) as Keras
    3 draws it, per image: two area fractions ``s_w, s_h ~ U(scale)``; the rectangle is
    ``sqrt(s_w) * W`` wide and ``sqrt(s_h) * H`` high (floats) at ``U * (W - width)``,
    ``U * (H - height)``, and covers the pixels whose integer coordinates fall inside
    (``preprocessing._regions``); an erase probability ``p ~ U(factor)``, and the image is
    erased when ``U < p``. The fill is ``fill_value`` or, when it is None, ``N(0, 1) *
    value_range[1]`` per pixel and channel; either is clipped to ``value_range``.

    Args:
        factor: the erase probability: a number ``f`` in [0, 1] draws ``p`` from ``[0,
            f]`` per image (default 1.0: images are erased with probability 1/2, as in
            Keras), a pair ``(lo, hi)`` (``0 <= lo <= hi <= 1``) from ``[lo, hi]``.
        scale: area fractions, the same rule in [0, 1] (a number ``s`` means ``(0, s)``);
            default ``(0.02, 0.33)``.
        fill_value: None (default: noise, as above), a number, or one number per channel.
        value_range: ``(low, high)`` of the input values, default ``(0, 255)``.
        seed: seeds the layer's draws; None uses torch's global RNG.
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``.
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``).

    Input: a rank-3 image, a rank-4 batch or a dict of targets; only ``images`` change
    (Keras returns labels, boxes and masks unchanged; keypoints pass through too). Output:
    same shape; float dtypes are kept, integer inputs come back as float32. Identity (but
    for the dtype) in ``eval()``. Keras fills a per-channel ``fill_value`` correctly only
    in ``channels_last`` (it broadcasts the list along the last axis); here both formats
    fill channel ``c`` with ``fill_value[c]``.

    Raises:
        ValueError: a bad argument (naming it), an input that is not rank 3 or 4, or a
            per-channel ``fill_value`` whose length is not the images' channel count.

    Example:
        >>> import torch
        >>> layer = RandomErasing(factor=(1.0, 1.0), scale=(0.25, 0.25), fill_value=9.0,
        ...                       seed=0)
        >>> out = layer(torch.zeros(1, 4, 4))  # a 2x2 window of the 4x4 image is erased
        >>> int((out == 9.0).sum())
        4
    """

    _scale: tuple[float, float]  # set by _set_factor

    def __init__(
        self,
        factor: float | tuple[float, float] = 1.0,
        scale: float | tuple[float, float] = (0.02, 0.33),
        fill_value: float | list[float] | None = None,
        value_range: tuple[float, float] = (0, 255),
        seed: int | None = None,
        data_format: str | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(seed=seed, data_format=data_format, dtype=dtype, **kwargs)
        self._set_factor(factor)
        self._set_factor(scale, "scale")
        ok = fill_value is None or _is_number(fill_value)
        if isinstance(fill_value, (list, tuple)):
            ok = len(fill_value) > 0 and all(_is_number(v) for v in fill_value)
        if not ok:
            self._fail("fill_value", "must be None, a number or one number per channel", fill_value)
        self.fill_value = fill_value
        self._set_value_range(value_range)

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        n, dev = images.shape[0], images.device
        h, w = self._hw(images)
        u = self._rand((6, n), dev, generator)
        lo, hi = self._scale
        side = torch.sqrt(lo + (hi - lo) * u[0:2])  # Keras's mix_weight: [width, height]
        x0, x1 = _regions.crop_bounds(u[2], w, side[0])
        y0, y1 = _regions.crop_bounds(u[3], h, side[1])
        p = self._factor[0] + (self._factor[1] - self._factor[0]) * u[4]
        params = {"corners": torch.stack([x0, x1, y0, y1], 1), "apply_erasing": u[5] < p}
        if self.fill_value is None:
            # Noise for the largest window the scale allows, read from its top-left corner.
            c = images.shape[self._channel_axis]
            most_h = min(h, math.ceil(math.sqrt(hi) * h) + 1)
            most_w = min(w, math.ceil(math.sqrt(hi) * w) + 1)
            params["noise"] = self._randn((n, c, most_h, most_w), dev, generator)
        return params

    def _constant_fill(self, x: torch.Tensor) -> torch.Tensor:
        """The clipped fill value, (C, 1, 1) or scalar, in ``x``'s dtype and device."""
        fill = torch.tensor(self.fill_value, dtype=torch.float32, device=x.device)
        if fill.ndim == 1:
            if fill.numel() != x.shape[1]:
                self._fail(
                    "fill_value",
                    f"has {fill.numel()} values (one per channel) but the images have "
                    f"{x.shape[1]} channel(s)",
                    self.fill_value,
                )
            fill = fill.view(-1, 1, 1)
        return fill.clamp(*self._range).to(x.dtype)

    def transform_images(self, images: torch.Tensor, params: dict[str, torch.Tensor]):
        x = self._to_nchw(self._to_float(images))
        h, w = x.shape[2], x.shape[3]
        window = _regions.pixel_window(params["corners"], h, w)
        low, high = self._range
        noise = params.get("noise")
        if noise is None:
            fill = self._constant_fill(x)
        else:
            fill = (noise.to(x.device) * high).clamp_(low, high).to(x.dtype)
        active = params["apply_erasing"]
        if _regions.on_host(x):
            out = x.clone() if x.data_ptr() == images.data_ptr() else x  # keep the input
            if noise is None:
                pick = lambda i, y0, y1, x0, x1: fill  # noqa: E731
            else:
                pick = lambda i, y0, y1, x0, x1: fill[i, :, : y1 - y0, : x1 - x0]  # noqa: E731
            _regions.fill_windows(out, window, active, pick)
        else:
            mask = _regions.window_mask(window, h, w) & active.view(-1, 1, 1, 1)
            if noise is not None:  # each window pixel reads the noise at its offset
                rows = (torch.arange(h, device=x.device) - window[:, 2:3]).clamp(
                    0, fill.shape[2] - 1
                )
                cols = (torch.arange(w, device=x.device) - window[:, 0:1]).clamp(
                    0, fill.shape[3] - 1
                )
                fill = fill.gather(
                    2, rows.view(-1, 1, h, 1).expand(-1, fill.shape[1], h, fill.shape[3])
                )
                fill = fill.gather(3, cols.view(-1, 1, 1, w).expand(-1, fill.shape[1], h, w))
            out = torch.where(mask, fill, x)
        return self._from_nchw(out)
