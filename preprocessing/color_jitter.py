"""RandomColorJitter (Keras 3's ``keras.layers.RandomColorJitter``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, cast

import torch

from ._photometric import common_args
from ._random import derive_seed
from .base import RandomLayer
from .brightness import RandomBrightness
from .contrast import RandomContrast
from .hue import RandomHue
from .saturation import RandomSaturation


@common_args
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
        ValueError: a bad argument or input, naming ``RandomColorJitter`` and the argument
            (``brightness_factor``, ...) or the step that refused the input.

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
        self._set_value_range(value_range)
        self.brightness_factor, self.contrast_factor = brightness_factor, contrast_factor
        self.saturation_factor, self.hue_factor = saturation_factor, hue_factor
        self.steps = torch.nn.ModuleDict()
        for k, (name, cls) in enumerate(self._STEPS):
            factor = getattr(self, f"{name}_factor")
            if factor is None:
                continue
            with self._as_own_error(cls, name):
                self.steps[name] = cls(
                    factor,
                    value_range=value_range,
                    seed=derive_seed(seed, k),
                    data_format=self.data_format,
                    dtype=self.dtype,
                )

    @contextlib.contextmanager
    def _as_own_error(self, cls: type, step: str) -> Iterator[None]:
        """A step's ValueError as this layer's: ``"RandomBrightness: factor must ..."``
        becomes ``"RandomColorJitter: brightness_factor must ..."``, and an input error
        (``"RandomSaturation: expected images with 3 channel(s) ..."``) names this layer
        and the step (the user made no RandomSaturation)."""
        try:
            yield
        except ValueError as e:
            prefix, msg = f"{cls.__name__}: ", str(e)
            if not msg.startswith(prefix):
                raise
            rest = msg[len(prefix) :]
            if rest.startswith("factor "):
                rest = f"{step}_factor {rest[len('factor ') :]}"
            else:
                rest = f"{rest} (in the {step} step, set by {step}_factor)"
            raise ValueError(f"{type(self).__name__}: {rest}") from None

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        params = {}
        for name, step in self.steps.items():
            with self._as_own_error(type(step), name):
                params[name] = cast(RandomLayer, step)._call_hook(
                    "get_random_transformation", images, generator
                )
        return params

    def transform_images(self, images: torch.Tensor, params: dict[str, Any]):
        x = self._to_float(images)
        for name, step in self.steps.items():
            with self._as_own_error(type(step), name):
                x = cast(RandomLayer, step)._call_hook("transform_images", x, params[name])
        return x
