"""RandomZoom (Keras's ``keras.layers.RandomZoom``)."""

from __future__ import annotations

from typing import Any

import torch

from .affine import AffineLayer, zoom_matrix
from .base import _factor_pair


class RandomZoom(AffineLayer):
    """Zoom each image in or out by its own random amount about its centre.

    Args:
        height_factor: a number ``f`` draws the vertical zoom from ``[-f, f]``, a pair
            ``(lo, hi)`` (``lo <= hi``) from ``[lo, hi]``; positive zooms out, negative
            zooms in (the sampling step is ``1 + factor``). Values in (-1, 1].
        width_factor: the same for the horizontal axis; None (default) reuses the
            vertical zoom, keeping the aspect ratio.
        fill_mode, interpolation, seed, fill_value, data_format, bounding_box_format, dtype:
            as ``RandomRotation``.

    Input: a rank-3 image, a rank-4 batch or a dict of targets (``Layer``: boxes, masks
    and keypoints move with the pixels). Output: same shape; float dtypes are kept,
    integer inputs come back as float32. Identity (but for the dtype) in ``eval()``.

    Raises:
        ValueError: a bad argument (naming it) or an input that is not rank 3 or 4.
    """

    def __init__(
        self,
        height_factor: float | tuple[float, float],
        width_factor: float | tuple[float, float] | None = None,
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
        self.height_factor = height_factor
        self.width_factor = width_factor
        self._h = _factor_pair(self, "height_factor", height_factor, -1.0, 1.0)
        if self._h[0] <= -1.0:
            self._fail("height_factor", "must lie in (-1, 1]", height_factor)
        self._w = None
        if width_factor is not None:
            self._w = _factor_pair(self, "width_factor", width_factor, -1.0, 1.0)
            if self._w[0] <= -1.0:
                self._fail("width_factor", "must lie in (-1, 1]", width_factor)

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        batch, _ = self._as_batch(images)
        n, dev = batch.shape[0], batch.device
        zoom_h = self._uniform(n, 1.0 + self._h[0], 1.0 + self._h[1], dev, generator)
        if self._w is None:
            zoom_w = zoom_h
        else:
            zoom_w = self._uniform(n, 1.0 + self._w[0], 1.0 + self._w[1], dev, generator)
        return {"height_zoom": zoom_h, "width_zoom": zoom_w}

    def matrix(self, params, height: int, width: int) -> torch.Tensor:
        return zoom_matrix(params["height_zoom"], params["width_zoom"], height, width)
