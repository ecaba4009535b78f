"""RandomZoom (Keras's ``keras.layers.RandomZoom``)."""

from __future__ import annotations

from typing import Any

import torch

from .affine import AffineLayer, zoom_matrix


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

    # set by _set_factor; a _width_factor of None: the width zooms as the height
    _height_factor: tuple[float, float]
    _width_factor: tuple[float, float] | None

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
        # A zoom of 1 + (-1) = 0 has no inverse: the lower end is open.
        lower, _ = self._set_factor(height_factor, "height_factor", (-1.0, 1.0), "symmetric")
        if lower <= -1.0:
            self._fail("height_factor", "must lie in (-1, 1]", height_factor)
        self.width_factor, self._width_factor = None, None
        if width_factor is not None:
            lower, _ = self._set_factor(width_factor, "width_factor", (-1.0, 1.0), "symmetric")
            if lower <= -1.0:
                self._fail("width_factor", "must lie in (-1, 1]", width_factor)

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        lo, hi = self._height_factor
        zoom_h = self._draw_factor(images, generator, (1.0 + lo, 1.0 + hi))
        if self._width_factor is None:
            zoom_w = zoom_h
        else:
            lo, hi = self._width_factor
            zoom_w = self._draw_factor(images, generator, (1.0 + lo, 1.0 + hi))
        return {"height_zoom": zoom_h, "width_zoom": zoom_w}

    def matrix(self, params, height: int, width: int) -> torch.Tensor:
        return zoom_matrix(params["height_zoom"], params["width_zoom"], height, width)
