"""RandomGaussianBlur (Keras 3's ``keras.layers.RandomGaussianBlur``)."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from ._photometric import _eager_cpu, apply_where
from .base import MAX_KERNEL_SIZE, RandomLayer


def gaussian_taps(sigma: torch.Tensor, size: int) -> torch.Tensor:
    """(B, size) normalised taps ``exp(-x^2 / (2 sigma^2))``, x centred on the kernel;
    taps below ``eps**2`` of the dtype are zero (``flush_weights``)."""
    x = torch.arange(size, device=sigma.device, dtype=sigma.dtype) - (size - 1) / 2.0
    taps = torch.exp(-0.5 * (x / sigma.view(-1, 1)) ** 2)
    return flush_weights(taps / taps.sum(dim=1, keepdim=True))


def flush_weights(weights: torch.Tensor) -> torch.Tensor:
    """``weights`` (of a kernel summing to 1) with those below ``eps**2`` set to zero.

    A narrow Gaussian's outer taps (sigma 0.15: 5e-42) are denormal floats, or make
    denormal products with the pixels; x86 computes those ~40x slower (measured: one
    such image among 64 made the batch's convolution 6x slower). What a weight below
    ``eps**2`` adds to a pixel lies ~23 bits (float32) below that pixel's resolution.
    """
    floor = torch.finfo(weights.dtype).eps ** 2
    return weights.masked_fill(weights < floor, 0.0)


def blur(
    x: torch.Tensor,
    sigma: torch.Tensor,
    size: tuple[int, int],
    clip: tuple[float, float] | None = None,
) -> torch.Tensor:
    """Gaussian blur of a float (B, C, H, W) batch, each image with its own ``sigma``
    (B, 2) = (along x, along y) and kernel ``size`` (x, y); edges reflected (replicated
    when the image is smaller than the kernel's reach); the result clipped to ``clip`` =
    (low, high) when given.

    Kernels up to ``MAX_2D_SIDE`` on a side are one depthwise convolution with each
    image's 2D kernel ``taps_y x taps_x`` (the separable kernel's weights, summed in
    another order); larger ones two 1D passes. Eager on CPU the batch goes through in
    chunks (``_blur_chunks``); elsewhere (other devices, ``torch.compile``) at once.
    """
    b, c, h, w = x.shape
    kx, ky = size
    rx, ry = kx // 2, ky // 2
    mode = "reflect" if rx < w and ry < h else "replicate"
    taps_x = gaussian_taps(sigma[:, 0].to(x.dtype), kx)
    taps_y = gaussian_taps(sigma[:, 1].to(x.dtype), ky)
    kernel = None
    if max(kx, ky) <= MAX_2D_SIDE:
        kernel = flush_weights(taps_y.unsqueeze(2) * taps_x.unsqueeze(1))
    tracked = torch.is_grad_enabled() and (x.requires_grad or sigma.requires_grad)
    if _eager_cpu(x) and b and not tracked:
        return _blur_chunks(x, kernel, taps_x, taps_y, mode, clip)
    y = _blur_once(x, kernel, taps_x, taps_y, mode)
    return y if clip is None else y.clamp_(*clip)


# Kernels up to 7x7 take one 2D convolution (64x3x224x224, 2 threads, CPU: 16, 18 and
# 22 ms for 3x3, 5x5 and 7x7 against 20, 28 and 26 ms for two 1D passes; 82 ms vs 27 ms
# at 9x9, where oneDNN leaves its depthwise kernel).
MAX_2D_SIDE = 7
CHUNK_IMAGES = 16  # images per convolution on CPU: oneDNN's blocks are 16 channels


def _blur_once(
    x: torch.Tensor,
    kernel: torch.Tensor | None,
    taps_x: torch.Tensor,
    taps_y: torch.Tensor,
    mode: str,
) -> torch.Tensor:
    """``blur`` of ``x`` in one go: the 2D ``kernel`` (B, ky, kx) if there is one, else
    two grouped convolutions along y, then x (one group per plane)."""
    b, c, h, w = x.shape
    kx, ky = taps_x.shape[1], taps_y.shape[1]
    y = x
    if kx > 1 or ky > 1:
        y = F.pad(x, (kx // 2, kx // 2, ky // 2, ky // 2), mode=mode)
    y = y.reshape(1, b * c, *y.shape[2:])  # planes as channels
    if kernel is not None:
        weight = kernel.repeat_interleave(c, dim=0).view(b * c, 1, ky, kx)
        return F.conv2d(y, weight, groups=b * c).view(b, c, h, w)
    taps_x = taps_x.repeat_interleave(c, dim=0)
    taps_y = taps_y.repeat_interleave(c, dim=0)
    y = F.conv2d(y, taps_y.view(b * c, 1, ky, 1), groups=b * c)
    y = F.conv2d(y, taps_x.view(b * c, 1, 1, kx), groups=b * c)
    return y.view(b, c, h, w)


def _blur_chunks(
    x: torch.Tensor,
    kernel: torch.Tensor | None,
    taps_x: torch.Tensor,
    taps_y: torch.Tensor,
    mode: str,
    clip: tuple[float, float] | None,
) -> torch.Tensor:
    """``_blur_once`` on CPU, ``CHUNK_IMAGES`` images at a time, each chunk clipped on its
    way into the output.

    oneDNN converts a convolution's input to its blocked layout and the result back;
    over a whole batch those conversions are passes over memory in large fresh buffers
    that page-fault in anew on many calls. A chunk's stay in cache (64x3x224x224, kernel
    5, 2 threads: 17 ms vs 28 ms for the batch at once, 120-150 ms when it faults).
    """
    b = x.shape[0]
    out = None if b <= CHUNK_IMAGES else torch.empty_like(x)
    for i in range(0, b, CHUNK_IMAGES):
        part = slice(i, i + CHUNK_IMAGES)
        k = None if kernel is None else kernel[part]
        y = _blur_once(x[part], k, taps_x[part], taps_y[part], mode)
        if out is None:  # one chunk: its result is the output
            return y if clip is None else y.clamp_(*clip)
        if clip is None:
            out[part].copy_(y)
        else:
            torch.clamp(y, *clip, out=out[part])
    assert out is not None
    return out


def _kernel_size(layer: RandomLayer, value: Any) -> tuple[int, int]:
    pair = value if isinstance(value, (list, tuple)) else (value, value)
    if len(pair) != 2 or not all(
        isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= MAX_KERNEL_SIZE and k % 2
        for k in pair
    ):
        layer._fail(
            "kernel_size",
            f"must be an odd int in [1, {MAX_KERNEL_SIZE}] or a pair of them (x, y)",
            value,
        )
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
            ints (along x, along y); at most 511 (``preprocessing.base.MAX_KERNEL_SIZE``:
            the image is padded by half of it).
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

    _sigma: tuple[float, float]  # set by _set_factor

    def __init__(
        self,
        factor: float | tuple[float, float] = 1.0,
        kernel_size: int | tuple[int, int] = 3,
        sigma: float | tuple[float, float] = 1.0,
        value_range: tuple[float, float] = (0, 255),
        data_format: str | None = None,
        seed: int | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(seed=seed, data_format=data_format, dtype=dtype, **kwargs)
        self._set_factor(factor)
        self.kernel_size, self._size = kernel_size, _kernel_size(self, kernel_size)
        self._set_factor(sigma, "sigma", bounds=(0.0, math.inf))
        self._set_value_range(value_range)

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        n, dev = images.shape[0], images.device
        p = self._draw_factor(images, generator)
        apply = self._rand((n,), dev, generator) < p
        lo, hi = self._sigma
        sigma = lo + (hi - lo) * self._rand((n, 2), dev, generator) + 1e-6
        return {"should_apply_blur": apply, "blur_factor": sigma}

    def transform_images(self, images: torch.Tensor, params: dict[str, torch.Tensor]):
        x = self._to_nchw(self._to_float(images))
        sigma, (low, high) = params["blur_factor"], self._range
        # Every output is clipped: blur clips its images while they are in cache, and
        # the images left as they were are clipped on their way into the output.
        out = apply_where(
            x,
            params["should_apply_blur"],
            lambda s, i: blur(s, sigma[i], self._size, clip=(low, high)),
            rest=lambda s: s.clamp(low, high),
        )
        return self._from_nchw(out)
