"""RandomPerspective (Keras's ``keras.layers.RandomPerspective``)."""

from __future__ import annotations

from typing import Any

import torch

from .affine import AffineLayer
from .base import _is_number


def homography(start: torch.Tensor, end: torch.Tensor) -> torch.Tensor:
    """(B, 3, 3) projective matrices mapping each ``end`` point to its ``start`` point.

    ``start``, ``end``: (B, 4, 2) (x, y) corners. Solves the 8x8 system of Keras's
    ``compute_homography_matrix`` (the bottom-right entry is 1).
    """
    s, e = start.to(torch.float32), end.to(torch.float32)
    ex, ey, sx, sy = e[..., 0], e[..., 1], s[..., 0], s[..., 1]  # (B, 4)
    one, zero = torch.ones_like(ex), torch.zeros_like(ex)
    row_x = torch.stack([ex, ey, one, zero, zero, zero, -sx * ex, -sx * ey], dim=-1)
    row_y = torch.stack([zero, zero, zero, ex, ey, one, -sy * ex, -sy * ey], dim=-1)
    a = torch.stack([row_x, row_y], dim=2).reshape(-1, 8, 8)  # rows: x1, y1, x2, y2, ...
    b = torch.stack([sx, sy], dim=2).reshape(-1, 8, 1)
    coef = torch.linalg.solve(a, b).squeeze(-1)
    return torch.cat([coef, torch.ones_like(coef[:, :1])], dim=1).view(-1, 3, 3)


class RandomPerspective(AffineLayer):
    """Distort each image's perspective by moving its corners (Keras 3's semantics).

    Per image, a probability is drawn from ``factor``'s range and the image is
    transformed when a U[0, 1) draw falls below it. Each corner ``c`` of the image (pixel
    indices ``(0, 0)``, ``(W-1, 0)``, ``(0, H-1)``, ``(W-1, H-1)``) moves to
    ``c + c * d`` with ``d`` drawn per coordinate from ``[-scale / 2, scale / 2]`` (so, as
    in Keras, the top-left corner stays); the output samples the input through the
    homography that maps the moved corners back. Outside the image: ``fill_value``.

    Args:
        factor: the probability of transforming an image: a number ``f`` in [0, 1] draws it
            from ``[0, f]``, a pair ``(lo, hi)`` (``0 <= lo <= hi <= 1``) from ``[lo, hi]``.
            Default 1.0.
        scale: how far corners move, a number in [0, 1]; default 1.0.
        interpolation: ``"bilinear"`` (default) or ``"nearest"``.
        fill_value: the value outside the image.
        seed: seeds the layer's draws; None uses torch's global RNG.
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``.
        bounding_box_format: the format of boxes in dict inputs (``preprocessing.
            bounding_boxes``); a box becomes the extent of its moved corners, clipped.
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``).

    Input: a rank-3 image, a rank-4 batch or a dict of targets (``Layer``). Output: same
    shape; float dtypes are kept, integer inputs come back as float32. Identity (but for
    the dtype) in ``eval()``.

    Raises:
        ValueError: a bad argument (naming it) or an input that is not rank 3 or 4.
    """

    _projective = True

    def __init__(
        self,
        factor: float | tuple[float, float] = 1.0,
        scale: float = 1.0,
        interpolation: str = "bilinear",
        fill_value: float = 0.0,
        seed: int | None = None,
        data_format: str | None = None,
        bounding_box_format: str | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            "constant",
            interpolation,
            fill_value,
            seed,
            data_format,
            bounding_box_format,
            dtype,
            **kwargs,
        )
        if not _is_number(scale) or not 0.0 <= scale <= 1.0:
            self._fail("scale", "must be a number in [0, 1]", scale)
        self._set_factor(factor)
        self.scale = scale

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        n, dev = images.shape[0], images.device
        h, w = self._hw(images)
        # Keras's order of draws: probability, threshold, corner offsets.
        probability = self._draw_factor(images, generator)
        apply = self._uniform(n, 0.0, 1.0, dev, generator) < probability
        half = 0.5 * float(self.scale)
        offsets = self._uniform(n * 8, -half, half, dev, generator).view(n, 4, 2)
        corners = [[0.0, 0.0], [w - 1.0, 0.0], [0.0, h - 1.0], [w - 1.0, h - 1.0]]
        start = torch.tensor(corners, device=dev).expand(n, 4, 2)
        return {
            "apply_perspective": apply,
            "start_points": start,
            "end_points": start + start * offsets,
        }

    def matrix(self, params, height: int, width: int) -> torch.Tensor:
        if height < 2 or width < 2:  # corners coincide: no perspective to speak of
            n = params["start_points"].shape[0]
            return torch.eye(3, device=params["start_points"].device).expand(n, 3, 3)
        m = homography(params["start_points"], params["end_points"])
        eye = torch.eye(3, device=m.device, dtype=m.dtype)
        return torch.where(params["apply_perspective"].view(-1, 1, 1), m, eye)
