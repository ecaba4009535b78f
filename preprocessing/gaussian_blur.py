"""RandomGaussianBlur (Keras 3's ``keras.layers.RandomGaussianBlur``)."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from ._photometric import apply_where, value_range_pair
from .base import RandomLayer, from_zero_pair


def gaussian_taps(sigma: torch.Tensor, size: int) -> torch.Tensor:
    """(B, size) normalised taps ``exp(-x^2 / (2 sigma^2))``, x centred on the kernel."""
    x = torch.arange(size, device=sigma.device, dtype=sigma.dtype) - (size - 1) / 2.0
    taps = torch.exp(-0.5 * (x / sigma.view(-1, 1)) ** 2)
    return taps / taps.sum(dim=1, keepdim=True)


def blur(x: torch.Tensor, sigma: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Separable Gaussian blur of a float (B, C, H, W) batch, each image with its own
    ``sigma`` (B, 2) = (along x, along y) and kernel ``size`` (x, y); edges reflected
    (replicated when the image is smaller than the kernel's reach)."""
    b, c, h, w = x.shape
    kx, ky = size
    rx, ry = kx // 2, ky // 2
    mode = "reflect" if rx < w and ry < h else "replicate"
    if rx or ry:
        x = F.pad(x, (rx, rx, ry, ry), mode=mode)
    taps_x = gaussian_taps(sigma[:, 0].to(x.dtype), kx).repeat_interleave(c, dim=0)
    taps_y = gaussian_taps(sigma[:, 1].to(x.dtype), ky).repeat_interleave(c, dim=0)
    y = x.reshape(1, b * c, *x.shape[2:])
    y = F.conv2d(y, taps_y.view(b * c, 1, ky, 1), groups=b * c)
    y = F.conv2d(y, taps_x.view(b * c, 1, 1, kx), groups=b * c)
    return y.view(b, c, h, w)


def _kernel_size(layer: RandomLayer, value: Any) -> tuple[int, int]:
    pair = value if isinstance(value, (list, tuple)) else (value, value)
    if len(pair) != 2 or not all(
        isinstance(k, int) and not isinstance(k, bool) and k >= 1 and k % 2 == 1 for k in pair
    ):
        layer._fail("kernel_size", "must be an odd int >= 1 or a pair of them (x, y)", value)
    return int(pair[0]), int(pair[1])


class RandomGaussianBlur(RandomLayer):
    """Blur each image, with a random probability, by a Gaussian of random width (Keras
    3's ``RandomGaussianBlur``).

    Per image a probability ``p`` is drawn from ``factor``'s range and the image is
    blurred when a second uniform draw falls below it (Keras's two draws); its standard
    deviations along x and y are drawn independently from ``sigma``'s range (plus 1e-6).
    Keras draws the two deviations once per batch; here each image has its own. The
    result is clipped to ``value_range``. Keras pads with zeros, which darkens a frame
    ``kernel_size // 2`` pixels wide; here the image is reflected at its edges
    (torchvision's ``gaussian_blur``). Pixels whose kernel stays inside the image agree
    with Keras.

    Args:
        factor: a number ``a`` in [0, 1] draws ``p`` from ``[0, a]``; a pair ``(lo, hi)``
            (``0 <= lo <= hi <= 1``) from ``[lo, hi]``. Default 1.0.
        kernel_size: the kernel's size in pixels, an odd int (default 3), or a pair of odd
            ints (along x, along y).
        sigma: a number ``s >= 0`` draws each deviation from ``[0, s]``, a pair
            ``(lo, hi)`` (``0 <= lo <= hi``) from ``[lo, hi]``; in pixels. Default 1.0.
        value_range: ``(low, high)`` of the input values (low < high), default (0, 255).
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``.
        seed: seeds the layer's draws; None uses torch's global RNG.
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``).

    Input: a rank-3 image, a rank-4 batch or a dict of targets (only ``images`` change).
    Output: same shape; float dtypes are kept, integer inputs come back as float32. Only
    the blurred images are computed. Identity (but for the dtype) in ``eval()``.

    Raises:
        ValueError: a bad argument (naming it) or an input that is not rank 3 or 4.

    Example:
        >>> import torch
        >>> layer = RandomGaussianBlur((1.0, 1.0), kernel_size=3, sigma=(1.0, 1.0))
        >>> x = torch.zeros(1, 5, 5)
        >>> x[0, 2, 2] = 1.0  # an impulse: the output is the kernel
        >>> layer(x)[0, 2].round(decimals=4)
        tensor([0.0000, 0.1238, 0.2042, 0.1238, 0.0000])
    """

    def __init__(
        self,
        factor: float | tuple[float, float] = 1.0,
        kernel_size: int | tuple[int, int] = 3,
        sigma: float | tuple[float, float] = 1.0,
        value_range: tuple[float, float] = (0, 255),
        data_format: str | None = None,
        seed: int | None = None,
        dtype: str | None = None,
    ) -> None:
        super().__init__(seed=seed, data_format=data_format, dtype=dtype)
        self.factor, self.kernel_size, self.sigma = factor, kernel_size, sigma
        self.value_range = value_range
        self._factor = from_zero_pair(self, "factor", factor)
        self._size = _kernel_size(self, kernel_size)
        self._sigma = from_zero_pair(self, "sigma", sigma, high=math.inf)
        self._range = value_range_pair(self, value_range)

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        batch, _ = self._as_batch(images)
        n, dev = batch.shape[0], batch.device
        p = self._uniform(n, *self._factor, dev, generator)
        apply = self._rand((n,), dev, generator) < p
        lo, hi = self._sigma
        sigma = lo + (hi - lo) * self._rand((n, 2), dev, generator) + 1e-6
        return {"should_apply_blur": apply, "blur_factor": sigma}

    def transform_images(self, images: torch.Tensor, params: dict[str, torch.Tensor]):
        batch, single = self._as_batch(images)
        x = self._to_nchw(self._to_float(batch))
        sigma = params["blur_factor"]
        out = apply_where(
            x, params["should_apply_blur"], lambda s, i: blur(s, sigma[i], self._size)
        )
        out = out.clamp(*self._range) if out is x else out.clamp_(*self._range)
        return self._unbatch(self._from_nchw(out), single)
