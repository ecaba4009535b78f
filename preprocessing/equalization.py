"""Equalization (Keras 3's ``keras.layers.Equalization``)."""

from __future__ import annotations

from typing import Any

import torch

from ._photometric import from_255, to_255
from .base import MAX_BINS, Layer, check_int


def equalize(x: torch.Tensor, bins: int) -> torch.Tensor:
    """Histogram-equalise each row of ``x`` (R, N) holding values in [0, 255].

    Keras's arithmetic: bin ``int(v * (bins - 1) / 255)``, lookup table
    ``round((cdf - cdf_min) * 255 / (cdf[-1] - cdf_min))`` with ``cdf_min`` the first
    non-zero cumulative count, rows with one occupied bin (or none) unchanged.
    """
    rows, n = x.shape
    scaled = x if bins == 256 else x * ((bins - 1) / 255.0)
    # Truncation through uint8 is Keras's int cast for values in [0, 255] and is cheaper
    # than a float -> int64 cast; the int64 index is needed by scatter/gather.
    small = torch.uint8 if bins <= 256 else torch.int32
    index = scaled.clamp(0, bins - 1).to(small).to(torch.int64)
    # Counts in float32 are exact below 2**24 pixels per image; a scatter into a (R, bins)
    # table costs a quarter of bincount over row-offset indices.
    count_dtype = torch.float32 if n < 2**24 else torch.float64
    ones = torch.ones((), dtype=count_dtype, device=x.device).expand(rows, n)
    hist = torch.zeros(rows, bins, dtype=count_dtype, device=x.device).scatter_add_(1, index, ones)
    cdf = hist.cumsum(dim=1)
    # The first non-zero cumulative count is the smallest one above zero.
    cdf_min = torch.where(cdf > 0, cdf, torch.full_like(cdf, n + 1)).amin(dim=1, keepdim=True)
    den = cdf[:, -1:] - cdf_min
    den = torch.where(den == 0, torch.ones_like(den), den)
    lut = ((cdf - cdf_min) * 255.0 / den).round_().clamp_(0, 255).to(x.dtype)
    out = torch.gather(lut, 1, index)
    flat = (hist > 0).sum(dim=1, keepdim=True) <= 1
    if x.device.type == "cpu" and not torch.compiler.is_compiling() and not flat.any():
        return out  # (read on the host: no device sync on CPU)
    return torch.where(flat, x, out)


class Equalization(Layer):
    """Histogram-equalise each channel of each image (Keras 3's ``Equalization``).

    The image is mapped from ``value_range`` to [0, 255]; per image and channel, values
    are binned into ``bins`` bins and replaced by the rounded cumulative distribution of
    their bin, stretched over [0, 255] (Keras's formula; see ``equalize``); a channel
    whose values fill one bin is left as it is. Keras histograms each channel over the
    whole batch at once; here each image gets its own histogram, as for a single image in
    Keras (and as PIL's ``ImageOps.equalize``), so an image's result does not depend on
    the batch it came in. Identity (but for the dtype) in ``eval()``, as Keras's.

    Args:
        value_range: ``(low, high)`` of the input values (low < high), default (0, 255).
        bins: the number of histogram bins, an int in [2, 65536] (default 256;
            ``preprocessing.base.MAX_BINS``: a histogram per image and channel).
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``.
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``).

    Input: a rank-3 image, a rank-4 batch or a dict of targets (only ``images`` change).
    Output: same shape; float dtypes are kept, integer inputs come back as float32.

    Raises:
        ValueError: a bad argument (naming it) or an input that is not rank 3 or 4.

    Example:
        >>> import torch
        >>> Equalization()(torch.tensor([[[10.0, 10.0, 20.0, 40.0]]]))
        tensor([[[  0.,   0., 128., 255.]]])
    """

    _keras_base_factor = True  # Keras's takes its base layer's (unused) factor

    _random = True  # Keras applies it in training only

    def __init__(
        self,
        value_range: tuple[float, float] = (0, 255),
        bins: int = 256,
        data_format: str | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(data_format=data_format, dtype=dtype, **kwargs)
        self._set_value_range(value_range)
        self.bins = bins
        check_int(self, "bins", bins, 2, high=MAX_BINS)

    def get_random_transformation(self, images: torch.Tensor, generator: object = None):
        return {}  # deterministic, but identity in eval() (_random)

    def transform_images(self, images: torch.Tensor, params: object = None) -> torch.Tensor:
        x = self._to_nchw(self._to_float(images))
        lo, hi = self._range
        y = to_255(x, lo, hi)
        b, c, h, w = y.shape
        out = equalize(y.reshape(b * c, h * w), self.bins).reshape(b, c, h, w)
        out = from_255(out, lo, hi)
        return self._from_nchw(out)
