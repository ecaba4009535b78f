"""Colour layers (Keras 3's ``RandomColorDegeneration``, ``RandomGrayscale``,
``RandomInvert``, ``RandomHue``, ``RandomSaturation``, ``RandomColorJitter``).

Every layer draws one parameter set per image on the input's device and changes only
pixel values: the other targets of a dict input pass through untouched. Layers that
change only some samples (grayscale, invert) compute and write only those on CPU
(``_photometric.apply_where``).
"""

from __future__ import annotations

from typing import Any, cast

import torch

from ._photometric import (
    apply_where,
    channel_dim,
    check_channels,
    grayscale,
    per_image,
    scale_saturation,
    shift_hue,
    value_range_pair,
)
from ._random import derive_seed
from .base import RandomLayer, from_zero_pair
from .brightness import RandomBrightness
from .contrast import RandomContrast

_COMMON_ARGS = """seed: seeds the layer's draws; None uses torch's global RNG.
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``.
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``)."""


class RandomColorDegeneration(RandomLayer):
    """Blend each image towards its grayscale version by a random amount.

    ``clip(x + f * (gray(x) - x), low, high)`` per image, ``gray`` the luma
    ``0.2989 R + 0.587 G + 0.114 B`` (Keras 3's ``RandomColorDegeneration``; PIL's
    ``ImageEnhance.Color`` with factor ``1 - f``).

    Args:
        factor: a number ``a`` in [0, 1] draws ``f`` from ``[0, a]``; a pair ``(lo, hi)``
            (``0 <= lo <= hi <= 1``) from ``[lo, hi]``. ``f = 1``: grayscale.
        value_range: ``(low, high)`` of the input values (low < high), default (0, 255).
        {common}

    Input: a rank-3 image, a rank-4 batch (3 channels, or 1: unchanged but for the clip)
    or a dict of targets (only ``images`` change). Output: same shape; float dtypes are
    kept, integer inputs come back as float32. Identity (but for the dtype) in ``eval()``.

    Raises:
        ValueError: a bad argument (naming it), an input that is not rank 3 or 4, or a
            channel count other than 1 or 3.

    Example:
        >>> import torch
        >>> layer = RandomColorDegeneration((1.0, 1.0), value_range=(0, 1))
        >>> layer(torch.tensor([[[1.0]], [[0.0]], [[0.0]]])).flatten()  # red -> its luma
        tensor([0.2989, 0.2989, 0.2989])
    """

    def __init__(
        self,
        factor: float | tuple[float, float],
        value_range: tuple[float, float] = (0, 255),
        data_format: str | None = None,
        seed: int | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(seed=seed, data_format=data_format, dtype=dtype, **kwargs)
        self.factor, self.value_range = factor, value_range
        self._factor = from_zero_pair(self, "factor", factor)
        self._range = value_range_pair(self, value_range)

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        batch, _ = self._as_batch(images)
        lo, hi = self._factor
        return {"factor": self._uniform(batch.shape[0], lo, hi, batch.device, generator)}

    def transform_images(self, images: torch.Tensor, params: dict[str, torch.Tensor]):
        batch, single = self._as_batch(images)
        check_channels(self, batch, (1, 3))
        x = self._to_float(batch)
        gray = grayscale(x, channel_dim(self))
        out = torch.lerp(x, gray.expand_as(x), per_image(params["factor"], x))
        return self._unbatch(out.clamp_(*self._range), single)


RandomColorDegeneration.__doc__ = (RandomColorDegeneration.__doc__ or "").format(
    common=_COMMON_ARGS
)


class RandomGrayscale(RandomLayer):
    """Turn each image to grayscale with probability ``factor`` (Keras 3's
    ``RandomGrayscale``); the channel count is kept (the luma in every channel).

    Args:
        factor: the probability, in [0, 1] (default 0.5), that an image becomes gray.
        {common}

    Input: a rank-3 image, a rank-4 batch (3 channels, or 1: unchanged) or a dict of
    targets (only ``images`` change). Output: same shape; float dtypes are kept, integer
    inputs come back as float32. Only the selected images are computed. Identity (but
    for the dtype) in ``eval()``.

    Raises:
        ValueError: a bad argument (naming it), an input that is not rank 3 or 4, or a
            channel count other than 1 or 3.

    Example:
        >>> import torch
        >>> layer = RandomGrayscale(factor=1.0)
        >>> layer(torch.tensor([[[0.0]], [[1.0]], [[0.0]]])).flatten()  # green -> luma
        tensor([0.5870, 0.5870, 0.5870])
    """

    def __init__(
        self,
        factor: float = 0.5,
        data_format: str | None = None,
        seed: int | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(seed=seed, data_format=data_format, dtype=dtype, **kwargs)
        self.factor = factor
        from_zero_pair(self, "factor", factor)  # a number in [0, 1]
        if isinstance(factor, (list, tuple)):
            self._fail("factor", "must be a number (a probability) in [0, 1]", factor)

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        batch, _ = self._as_batch(images)
        u = self._rand((batch.shape[0],), batch.device, generator)
        return {"apply": u < self.factor}

    def transform_images(self, images: torch.Tensor, params: dict[str, torch.Tensor]):
        batch, single = self._as_batch(images)
        check_channels(self, batch, (1, 3))
        x, dim = self._to_float(batch), channel_dim(self)
        out = apply_where(x, params["apply"], lambda s, i: grayscale(s, dim).expand_as(s))
        return self._unbatch(out, single)


RandomGrayscale.__doc__ = (RandomGrayscale.__doc__ or "").format(common=_COMMON_ARGS)


class RandomInvert(RandomLayer):
    """Invert each image (``low + high - x``) with a random probability (Keras 3's
    ``RandomInvert``).

    Per image a probability ``p`` is drawn from ``factor``'s range and the image is
    inverted when a second uniform draw falls below it (Keras's two draws), so the
    default ``factor=1.0`` inverts half of the images on average. Keras computes
    ``high - x``, which equals ``low + high - x`` for its usual ranges (low = 0) and would
    leave ``[low, high]`` otherwise.

    Args:
        factor: a number ``a`` in [0, 1] draws ``p`` from ``[0, a]``; a pair ``(lo, hi)``
            (``0 <= lo <= hi <= 1``) from ``[lo, hi]``. Default 1.0.
        value_range: ``(low, high)`` of the input values (low < high), default (0, 255).
        {common}

    Input: a rank-3 image, a rank-4 batch or a dict of targets (only ``images`` change).
    Output: same shape; float dtypes are kept, integer inputs come back as float32. Only
    the inverted images are computed. Identity (but for the dtype) in ``eval()``.

    Raises:
        ValueError: a bad argument (naming it) or an input that is not rank 3 or 4.

    Example:
        >>> import torch
        >>> layer = RandomInvert((1.0, 1.0), value_range=(0, 1))  # p = 1: always
        >>> layer(torch.tensor([[[0.0, 0.25, 1.0]]]))
        tensor([[[1.0000, 0.7500, 0.0000]]])
    """

    def __init__(
        self,
        factor: float | tuple[float, float] = 1.0,
        value_range: tuple[float, float] = (0, 255),
        seed: int | None = None,
        data_format: str | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(seed=seed, data_format=data_format, dtype=dtype, **kwargs)
        self.factor, self.value_range = factor, value_range
        self._factor = from_zero_pair(self, "factor", factor)
        self._range = value_range_pair(self, value_range)

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        batch, _ = self._as_batch(images)
        n, dev = batch.shape[0], batch.device
        p = self._uniform(n, self._factor[0], self._factor[1], dev, generator)
        return {"apply_inversion": self._rand((n,), dev, generator) < p}

    def transform_images(self, images: torch.Tensor, params: dict[str, torch.Tensor]):
        batch, single = self._as_batch(images)
        total = self._range[0] + self._range[1]
        x = self._to_float(batch)
        out = apply_where(x, params["apply_inversion"], lambda s, i: total - s)
        return self._unbatch(out, single)


RandomInvert.__doc__ = (RandomInvert.__doc__ or "").format(common=_COMMON_ARGS)


class RandomHue(RandomLayer):
    """Rotate the hue of each image by a random amount (Keras 3's ``RandomHue``).

    Per image a magnitude ``f`` is drawn from ``factor``'s range and a sign with
    probability 1/2 each; the hue (HSV, in turns) moves by ``sign * f / 2``, so
    ``factor=1`` reaches half a turn either way. Saturation and value are kept; the
    result is clipped to ``value_range``.

    Args:
        factor: a number ``a`` in [0, 1] draws ``f`` from ``[0, a]``; a pair ``(lo, hi)``
            (``0 <= lo <= hi <= 1``) from ``[lo, hi]``. 0: no change.
        value_range: ``(low, high)`` of the input values (low < high), default (0, 255).
        {common}

    Input: a rank-3 image, a rank-4 batch (3 channels, RGB) or a dict of targets (only
    ``images`` change). Output: same shape; float dtypes are kept, integer inputs come
    back as float32. Identity (but for the dtype) in ``eval()``.

    Raises:
        ValueError: a bad argument (naming it), an input that is not rank 3 or 4 or not
            3 channels.

    Example:
        >>> import torch
        >>> layer = RandomHue((2 / 3, 2 / 3), value_range=(0, 1), seed=0)  # +-1/3 turn
        >>> layer(torch.tensor([[[1.0]], [[0.0]], [[0.0]]])).flatten().round(decimals=4)
        tensor([0., 0., 1.])
    """

    def __init__(
        self,
        factor: float | tuple[float, float],
        value_range: tuple[float, float] = (0, 255),
        data_format: str | None = None,
        seed: int | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(seed=seed, data_format=data_format, dtype=dtype, **kwargs)
        self.factor, self.value_range = factor, value_range
        self._factor = from_zero_pair(self, "factor", factor)
        self._range = value_range_pair(self, value_range)

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        batch, _ = self._as_batch(images)
        n, dev = batch.shape[0], batch.device
        sign = torch.where(self._rand((n,), dev, generator) > 0.5, -1.0, 1.0)
        f = self._uniform(n, self._factor[0], self._factor[1], dev, generator)
        return {"factor": sign * f * 0.5}

    def transform_images(self, images: torch.Tensor, params: dict[str, torch.Tensor]):
        batch, single = self._as_batch(images)
        check_channels(self, batch, (3,))
        lo, hi = self._range
        x = self._to_float(batch)
        # The HSV formulas are homogeneous in the pixel values: shifting by low is the
        # whole of Keras's rescaling to [0, 1] and back.
        out = shift_hue(x - lo if lo else x, channel_dim(self), params["factor"])
        if lo:
            out = out.add_(lo)
        return self._unbatch(out.clamp_(lo, hi), single)


RandomHue.__doc__ = (RandomHue.__doc__ or "").format(common=_COMMON_ARGS)


class RandomSaturation(RandomLayer):
    """Scale the HSV saturation of each image by a random factor (Keras 3's
    ``RandomSaturation``).

    Per image ``f`` is drawn from ``factor``'s range and the saturation is multiplied by
    ``f / (1 - f + 1e-7)`` and clipped to [0, 1]: ``f = 0.5`` changes nothing, 0 gives
    grayscale (the HSV value: the largest channel), 1 full saturation. Hue and value are
    kept. (Keras clips the saturation to ``value_range`` instead of [0, 1], which with
    its default (0, 255) lets channels go negative; the two agree for ``(0, 1)``.)

    Args:
        factor: a number ``a`` in [0, 1] draws ``f`` from ``[0, a]``; a pair ``(lo, hi)``
            (``0 <= lo <= hi <= 1``) from ``[lo, hi]``.
        value_range: ``(low, high)`` of the input values (low < high), default (0, 255).
        {common}

    Input: a rank-3 image, a rank-4 batch (3 channels, RGB) or a dict of targets (only
    ``images`` change). Output: same shape; float dtypes are kept, integer inputs come
    back as float32. Identity (but for the dtype) in ``eval()``.

    Raises:
        ValueError: a bad argument (naming it), an input that is not rank 3 or 4 or not
            3 channels.

    Example:
        >>> import torch
        >>> layer = RandomSaturation((0.0, 0.0), value_range=(0, 1))  # no saturation
        >>> layer(torch.tensor([[[0.8]], [[0.4]], [[0.2]]])).flatten()
        tensor([0.8000, 0.8000, 0.8000])
    """

    def __init__(
        self,
        factor: float | tuple[float, float],
        value_range: tuple[float, float] = (0, 255),
        data_format: str | None = None,
        seed: int | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(seed=seed, data_format=data_format, dtype=dtype, **kwargs)
        self.factor, self.value_range = factor, value_range
        self._factor = from_zero_pair(self, "factor", factor)
        self._range = value_range_pair(self, value_range)

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        batch, _ = self._as_batch(images)
        f = self._uniform(batch.shape[0], *self._factor, batch.device, generator)
        return {"factor": f / (1.0 - f + 1e-7)}

    def transform_images(self, images: torch.Tensor, params: dict[str, torch.Tensor]):
        batch, single = self._as_batch(images)
        check_channels(self, batch, (3,))
        lo, hi = self._range
        x = self._to_float(batch)
        out = scale_saturation(x - lo if lo else x, channel_dim(self), params["factor"])
        if lo:
            out = out.add_(lo)
        return self._unbatch(out.clamp_(lo, hi), single)


RandomSaturation.__doc__ = (RandomSaturation.__doc__ or "").format(common=_COMMON_ARGS)


class RandomColorJitter(RandomLayer):
    """Random brightness, contrast, saturation and hue, in that order (Keras 3's
    ``RandomColorJitter``); a factor left at None skips its step.

    Each step is the layer of that name (``RandomBrightness``, ``RandomContrast``,
    ``RandomSaturation``, ``RandomHue``) with the given factor and ``value_range``, and
    draws its own parameters per image. (Keras seeds the four with the same seed; here
    each gets a seed derived from ``seed``, so their draws are independent.)

    Args:
        value_range: ``(low, high)`` of the input values (low < high), default (0, 255).
        brightness_factor: ``RandomBrightness``'s ``factor`` (in [-1, 1]) or None.
        contrast_factor: ``RandomContrast``'s ``factor`` (in [0, 1]) or None.
        saturation_factor: ``RandomSaturation``'s ``factor`` (in [0, 1]) or None.
        hue_factor: ``RandomHue``'s ``factor`` (in [0, 1]) or None.
        {common}

    Input: a rank-3 image, a rank-4 batch (3 channels for saturation and hue) or a dict
    of targets (only ``images`` change). Output: same shape; float dtypes are kept,
    integer inputs come back as float32. Identity (but for the dtype) in ``eval()``.

    Raises:
        ValueError: a bad argument (naming the step's layer and argument) or input.

    Example:
        >>> import torch
        >>> jitter = RandomColorJitter((0, 1), brightness_factor=(0.5, 0.5))
        >>> jitter(torch.tensor([[[0.0, 0.25, 0.75]]]))
        tensor([[[0.5000, 0.7500, 1.0000]]])
    """

    _keras_base_factor = True  # Keras's takes its base layer's (unused) factor

    _STEPS = (
        ("brightness", RandomBrightness),
        ("contrast", RandomContrast),
        ("saturation", RandomSaturation),
        ("hue", RandomHue),
    )

    def __init__(
        self,
        value_range: tuple[float, float] = (0, 255),
        brightness_factor: float | tuple[float, float] | None = None,
        contrast_factor: float | tuple[float, float] | None = None,
        saturation_factor: float | tuple[float, float] | None = None,
        hue_factor: float | tuple[float, float] | None = None,
        seed: int | None = None,
        data_format: str | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(seed=seed, data_format=data_format, dtype=dtype, **kwargs)
        self.value_range = value_range
        value_range_pair(self, value_range)
        self.brightness_factor, self.contrast_factor = brightness_factor, contrast_factor
        self.saturation_factor, self.hue_factor = saturation_factor, hue_factor
        self.steps = torch.nn.ModuleDict()
        for k, (name, cls) in enumerate(self._STEPS):
            factor = getattr(self, f"{name}_factor")
            if factor is not None:
                self.steps[name] = cls(
                    factor,
                    value_range=value_range,
                    seed=derive_seed(seed, k),
                    data_format=self.data_format,
                    dtype=self.dtype,
                )

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        batch, _ = self._as_batch(images)
        return {
            name: cast(RandomLayer, step).get_random_transformation(batch, generator)
            for name, step in self.steps.items()
        }

    def transform_images(self, images: torch.Tensor, params: dict[str, Any]):
        batch, single = self._as_batch(images)
        x = self._to_float(batch)
        for name, step in self.steps.items():
            x = cast(RandomLayer, step).transform_images(x, params[name])
        return self._unbatch(x, single)


RandomColorJitter.__doc__ = (RandomColorJitter.__doc__ or "").format(common=_COMMON_ARGS)
