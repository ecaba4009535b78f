"""RandomGrayscale (Keras 3's ``keras.layers.RandomGrayscale``)."""

from __future__ import annotations

from typing import Any

import torch

from ._photometric import apply_where, check_channels, common_args, grayscale
from .base import RandomLayer


@common_args
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

    factor: float  # set by _set_factor

    def __init__(
        self,
        factor: float = 0.5,
        data_format: str | None = None,
        seed: int | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(seed=seed, data_format=data_format, dtype=dtype, **kwargs)
        self._set_factor(factor)  # a number in [0, 1]
        if isinstance(factor, (list, tuple)):
            self._fail("factor", "must be a number (a probability) in [0, 1]", factor)

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        u = self._rand((images.shape[0],), images.device, generator)
        return {"apply": u < self.factor}

    def transform_images(self, images: torch.Tensor, params: dict[str, torch.Tensor]):
        check_channels(self, images, (1, 3))
        x, dim = self._to_float(images), self._channel_axis
        return apply_where(x, params["apply"], lambda s, i: grayscale(s, dim).expand_as(s))
