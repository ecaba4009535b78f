"""Rescaling (Keras's ``keras.layers.Rescaling``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ._targets import as_tensor
from .base import Layer, _is_number


class Rescaling(Layer):
    """``x * scale + offset``, with scalar or per-channel ``scale``/``offset``.

    Args:
        scale: a number, or one number per channel (a list; numpy/torch values are taken
            as numbers or lists).
        offset: a number (default 0.0), or one number per channel.
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``; locates the
            channel axis for per-channel values.
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``).

    Input: a rank-3 image, a rank-4 batch or a dict of targets (only ``images`` change);
    or a tensor/array of any other rank (features, a scalar: Keras's ``Rescaling`` is not
    only for images), where per-channel values go along the last axis. Output: same
    shape; float dtypes are kept, integer inputs (e.g. uint8) come back as float32.

    Raises:
        ValueError: a non-numeric ``scale``/``offset``, or per-channel values whose count
            is neither 1 nor the input's channel count.

    Example:
        >>> import torch
        >>> Rescaling(1 / 127.5, offset=-1.0)(torch.tensor([[[0, 255]]], dtype=torch.uint8))
        tensor([[[-1.,  1.]]])
    """

    _image_layer = False  # not a Keras image layer: no bounding_box_format

    def __init__(
        self,
        scale: float | list[float],
        offset: float | list[float] = 0.0,
        data_format: str | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(data_format=data_format, dtype=dtype, **kwargs)
        # numpy / torch values (Keras takes them) become numbers or lists: a JSON config.
        scale, offset = _plain(scale), _plain(offset)
        self.scale = scale
        self.offset = offset
        for name, v in (("scale", scale), ("offset", offset)):
            values = v if isinstance(v, (list, tuple)) else [v]
            if not values or not all(_is_number(x) for x in values):
                self._fail(name, "must be a number or a list of numbers", v)
        # Scalars scale every value alike: only per-channel values depend on the layout.
        self._checks_layout = isinstance(scale, (list, tuple)) or isinstance(offset, (list, tuple))

    def _per_channel(self, value: Any, like: torch.Tensor) -> torch.Tensor | float:
        if not isinstance(value, (list, tuple)):
            return float(value)
        channels = like.shape[self._channel_axis]
        if len(value) not in (1, channels):  # one value broadcasts, like a number
            raise ValueError(
                f"Rescaling: {len(value)} per-channel values for an input with {channels} "
                f"channels ({self.data_format}); got shape {tuple(like.shape)}"
            )
        t = torch.tensor(value, dtype=like.dtype, device=like.device)
        shape = [1, 1, 1, 1]
        shape[self._channel_axis] = len(value)
        return t.view(shape)

    def forward(self, data: Any, generator: Any = None) -> Any:
        """Rescale an image, a batch, a dict of targets, or values of any other rank."""
        # A tensor's own rank: np.ndim on a tensor is a numpy call on torch data, which
        # torch.compile(fullgraph=True) refuses ("torch.* op returned non-Tensor").
        rank = data.ndim if isinstance(data, (torch.Tensor, np.ndarray)) else np.ndim(data)
        if isinstance(data, dict) or rank in (3, 4):
            return super().forward(data, generator)
        x = as_tensor(data)
        x = self._to_float(x)
        scale, offset = self._along_last(self.scale, x), self._along_last(self.offset, x)
        return (x * scale).add_(offset)

    def _along_last(self, value: Any, like: torch.Tensor) -> torch.Tensor | float:
        """A number, or per-channel values along the last axis of a non-image input."""
        if not isinstance(value, (list, tuple)):
            return float(value)
        channels = like.shape[-1] if like.ndim else 1
        if len(value) not in (1, channels):
            raise ValueError(
                f"Rescaling: {len(value)} per-channel values for an input whose last axis "
                f"has {channels}; got shape {tuple(like.shape)}"
            )
        return torch.tensor(value, dtype=like.dtype, device=like.device)

    def transform_images(self, images: torch.Tensor, params: Any = None) -> torch.Tensor:
        x = self._to_float(images)
        # One fresh tensor, offset in place (the same arithmetic as x * scale + offset).
        return (x * self._per_channel(self.scale, x)).add_(self._per_channel(self.offset, x))


def _plain(value: Any) -> Any:
    """A numpy/torch scalar or array as a Python number or (nested) list."""
    if isinstance(value, (np.ndarray, np.generic, torch.Tensor)):
        return value.tolist()
    return value
