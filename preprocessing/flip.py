"""RandomFlip (Keras's ``keras.layers.RandomFlip``)."""

from __future__ import annotations

from typing import Any

import torch

from .affine import flip_matrix
from .base import RandomLayer

MODES = ("horizontal", "vertical", "horizontal_and_vertical")


class RandomFlip(RandomLayer):
    """Mirror each image left-right and/or up-down with probability 1/2 per axis.

    Args:
        mode: ``"horizontal"`` (default), ``"vertical"`` or ``"horizontal_and_vertical"``;
            the last flips each axis independently, so all four outcomes occur.
        seed: seeds the layer's generator; None uses torch's global RNG.
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``.

    Input: a rank-3 image or a rank-4 batch. Output: same shape, exact pixel copies;
    float dtypes are kept, integer inputs come back as float32 (Keras's policy).
    Identity (but for the dtype) in ``eval()``.

    Raises:
        ValueError: an unknown ``mode`` or an input that is not rank 3 or 4.

    Example:
        >>> import torch
        >>> flip = RandomFlip("horizontal", seed=0)
        >>> x = torch.tensor([[[1.0, 2.0, 3.0]]])
        >>> flip.transform_images(x, {"flip_h": torch.tensor([True]),
        ...                           "flip_v": torch.tensor([False])})
        tensor([[[3., 2., 1.]]])
    """

    def __init__(
        self,
        mode: str = "horizontal",
        seed: int | None = None,
        data_format: str | None = None,
    ) -> None:
        super().__init__(seed=seed, data_format=data_format)
        if mode not in MODES:
            self._fail("mode", f"must be one of {MODES}", mode)
        self.mode = mode

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        batch, _ = self._as_batch(images)
        n, dev = batch.shape[0], batch.device
        # Two independent coins per image, always drawn, so a seed gives the same
        # horizontal decisions whatever the mode.
        coins = self._uniform(2 * n, 0.0, 1.0, dev, generator) < 0.5
        flip_h, flip_v = coins[:n], coins[n:]
        if self.mode == "vertical":
            flip_h = torch.zeros_like(flip_h)
        if self.mode == "horizontal":
            flip_v = torch.zeros_like(flip_v)
        return {"flip_h": flip_h, "flip_v": flip_v}

    def matrix(self, params, height: int, width: int) -> torch.Tensor:
        """(B, 3, 3) output->input matrices, so ``Pipeline`` can fold flips into one warp."""
        return flip_matrix(params["flip_h"], params["flip_v"], height, width)

    def transform_images(self, images: torch.Tensor, params: dict[str, torch.Tensor]):
        batch, single = self._as_batch(images)
        x = self._to_float(batch)
        h_axis, w_axis = (2, 3) if self.data_format == "channels_first" else (1, 2)
        # torch.where over the whole batch: one kernel per axis, no Python loop, no sync.
        fh = params["flip_h"].view(-1, 1, 1, 1)
        fv = params["flip_v"].view(-1, 1, 1, 1)
        if self.mode != "vertical":
            x = torch.where(fh, x.flip(w_axis), x)
        if self.mode != "horizontal":
            x = torch.where(fv, x.flip(h_axis), x)
        return self._unbatch(x, single)
