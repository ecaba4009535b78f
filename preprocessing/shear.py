"""RandomShear (Keras's ``keras.layers.RandomShear``)."""

from __future__ import annotations

from typing import Any

import torch

from .affine import AffineLayer
from .base import _is_number, ordered_pair


def _shear_pair(layer: AffineLayer, name: str, value: Any) -> tuple[float, float]:
    """Keras's rule: a number f in [0, 1] means (-f, f); a pair (lower <= upper) of values
    in [-1, 1] is taken as is (the sign is drawn separately). Keras's own pair check
    wants [0, 1], so the ``(-f, f)`` its ``get_config`` writes does not load in Keras;
    here it loads and draws what ``f`` drew."""
    if _is_number(value):
        if not 0.0 <= value <= 1.0:
            layer._fail(name, "must lie in [0, 1]", value)
        return -float(value), float(value)
    return ordered_pair(layer, name, value, -1.0, 1.0, symmetric=False)


class RandomShear(AffineLayer):
    """Shear each image along x and/or y by its own random amount (Keras 3's semantics).

    The output pixel ``(x, y)`` samples the input at ``(x + s_x * y, y + s_y * x)`` (pixel
    indices, about the top-left pixel, Keras's shear matrix ``[[1, s_x, 0], [s_y, 1, 0]]``).
    Per image, ``s_x`` is drawn from ``x_factor``'s range, ``s_y`` from ``y_factor``'s, and
    both are negated together with probability 1/2 (Keras's ``invert``).

    Args:
        x_factor: a number ``f`` in [0, 1] draws ``s_x`` from ``[-f, f]``; a pair ``(lo, hi)``
            (``-1 <= lo <= hi <= 1``) from ``[lo, hi]`` (the ``(-f, f)`` in Keras's config
            loads). Values are fractions of the image
            (0.3 shears pixels up to 30% of the way across). Default 0: no x shear.
        y_factor: the same for ``s_y``.
        interpolation: ``"bilinear"`` (default) or ``"nearest"``.
        fill_mode: ``"reflect"`` (default), ``"wrap"``, ``"constant"`` or ``"nearest"``, as
            documented by Keras (see ``preprocessing.affine``).
        fill_value: the value outside the image for ``fill_mode="constant"``.
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``.
        seed: seeds the layer's draws; None uses torch's global RNG.
        bounding_box_format: the format of boxes in dict inputs (``preprocessing.
            bounding_boxes``); a box becomes the extent of its sheared corners, clipped.
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``).

    Input: a rank-3 image, a rank-4 batch or a dict of targets (``Layer``). Output: same
    shape; float dtypes are kept, integer inputs come back as float32. Identity (but for
    the dtype) in ``eval()``.

    Raises:
        ValueError: a bad argument (naming it) or an input that is not rank 3 or 4.

    Example:
        >>> import torch
        >>> layer = RandomShear(x_factor=0.5)
        >>> x = torch.arange(6.0).reshape(1, 2, 3)
        >>> params = {"shear_factor": torch.tensor([[1.0, 0.0]])}  # s_x = 1, s_y = 0
        >>> layer.transform_images(x, params)  # row y shifts left by y pixels
        tensor([[[0., 1., 2.],
                 [4., 5., 5.]]])
    """

    def __init__(
        self,
        x_factor: float | tuple[float, float] = 0.0,
        y_factor: float | tuple[float, float] = 0.0,
        interpolation: str = "bilinear",
        fill_mode: str = "reflect",
        fill_value: float = 0.0,
        data_format: str | None = None,
        seed: int | None = None,
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
        self.x_factor, self.y_factor = x_factor, y_factor
        self._x = _shear_pair(self, "x_factor", x_factor)
        self._y = _shear_pair(self, "y_factor", y_factor)

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        n, dev = images.shape[0], images.device
        # Keras's order of draws: the sign, then y, then x.
        invert = torch.where(self._uniform(n, 0.0, 1.0, dev, generator) > 0.5, -1.0, 1.0)
        shear_y = self._uniform(n, self._y[0], self._y[1], dev, generator)
        shear_x = self._uniform(n, self._x[0], self._x[1], dev, generator)
        return {"shear_factor": torch.stack([shear_x, shear_y], dim=1) * invert.view(-1, 1)}

    def matrix(self, params, height: int, width: int) -> torch.Tensor:
        shear = params["shear_factor"].to(torch.float32)
        m = torch.eye(3, device=shear.device).expand(shear.shape[0], 3, 3).clone()
        m[:, 0, 1] = shear[:, 0]
        m[:, 1, 0] = shear[:, 1]
        return m
