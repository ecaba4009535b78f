"""RandomRotation (Keras's ``keras.layers.RandomRotation``)."""

from __future__ import annotations

from typing import Any

import torch

from .affine import AffineLayer, radians, rotation_matrix


class RandomRotation(AffineLayer):
    """Rotate each image by its own random angle about its centre.

    Args:
        factor: fraction of a full turn; a number ``f`` draws from ``[-f, f]``, a pair
            ``(lo, hi)`` (``lo <= hi``) from ``[lo, hi]``. Positive is counter-clockwise.
            Both in [-1, 1].
        fill_mode: ``"reflect"`` (default), ``"wrap"``, ``"constant"`` or ``"nearest"``,
            as documented by Keras (see ``preprocessing.affine``).
        interpolation: ``"bilinear"`` (default) or ``"nearest"``.
        seed: seeds the layer's draws; None uses torch's global RNG.
        fill_value: the value outside the image for ``fill_mode="constant"``.
        data_format: ``"channels_first"`` (``(..., C, H, W)``) or ``"channels_last"``
            (``(..., H, W, C)``); None (default): ``preprocessing.image_data_format()``.
        bounding_box_format: the format of boxes in dict inputs (``preprocessing.
            bounding_boxes``); a box becomes the extent of its rotated corners, clipped.
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``).

    Input: a rank-3 image, a rank-4 batch or a dict of targets (``Layer``: boxes, masks
    and keypoints move with the pixels). Output: same shape; float dtypes are kept,
    integer inputs come back as float32. Identity (but for the dtype) in ``eval()``.

    Raises:
        ValueError: a bad argument (naming it) or an input that is not rank 3 or 4.

    Example:
        >>> import torch
        >>> layer = RandomRotation(factor=(0.25, 0.25), seed=0)  # exactly a quarter turn
        >>> x = torch.arange(4.0).reshape(1, 2, 2)
        >>> layer(x)
        tensor([[[1., 3.],
                 [0., 2.]]])
    """

    def __init__(
        self,
        factor: float | tuple[float, float],
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
        self._set_factor(factor, bounds=(-1.0, 1.0), number="symmetric")

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        return {"angle": radians(self._draw_factor(images, generator))}

    def matrix(self, params, height: int, width: int) -> torch.Tensor:
        return rotation_matrix(params["angle"], height, width)
