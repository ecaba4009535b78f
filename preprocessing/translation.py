"""RandomTranslation (Keras's ``keras.layers.RandomTranslation``)."""

from __future__ import annotations

from typing import Any

import torch

from .affine import AffineLayer, translation_matrix


class RandomTranslation(AffineLayer):
    """Shift each image by its own random fraction of its height and width.

    Args:
        height_factor: a number ``f`` draws the vertical shift from ``[-f, f]`` times the
            height, a pair ``(lo, hi)`` (``lo <= hi``) from ``[lo, hi]``; positive shifts
            down. In [-1, 1].
        width_factor: the same for the horizontal shift; positive shifts right.
        fill_mode, interpolation, seed, fill_value, data_format, bounding_box_format, dtype:
            as ``RandomRotation``.

    Input: a rank-3 image, a rank-4 batch or a dict of targets (``Layer``: boxes, masks
    and keypoints move with the pixels). Output: same shape; float dtypes are kept,
    integer inputs come back as float32. Identity (but for the dtype) in ``eval()``.

    Raises:
        ValueError: a bad argument (naming it) or an input that is not rank 3 or 4.

    Example:
        >>> import torch
        >>> layer = RandomTranslation(0.0, (0.5, 0.5), fill_mode="constant", seed=1)
        >>> out = layer(torch.tensor([[[1.0, 2.0, 3.0, 4.0]]]))  # two pixels to the right
        >>> out.round(decimals=4) + 0.0
        tensor([[[0., 0., 1., 2.]]])
    """

    # set by _set_factor
    _height_factor: tuple[float, float]
    _width_factor: tuple[float, float]

    def __init__(
        self,
        height_factor: float | tuple[float, float],
        width_factor: float | tuple[float, float],
        fill_mode: str = "reflect",
        interpolation: str = "bilinear",
        seed: int | None = None,
        fill_value: float = 0.0,
        data_format: str | None = None,
        bounding_box_format: str | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            fill_mode,
            interpolation,
            fill_value,
            seed,
            data_format,
            bounding_box_format,
            dtype,
            **kwargs,
        )
        self._set_factor(height_factor, "height_factor", (-1.0, 1.0), "symmetric")
        self._set_factor(width_factor, "width_factor", (-1.0, 1.0), "symmetric")

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        h, w = self._hw(images)
        dy = self._draw_factor(images, generator, self._height_factor) * h
        dx = self._draw_factor(images, generator, self._width_factor) * w
        return {"dy": dy, "dx": dx}

    def matrix(self, params, height: int, width: int) -> torch.Tensor:
        return translation_matrix(params["dy"], params["dx"])
