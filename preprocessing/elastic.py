"""RandomElasticTransform (Keras's ``keras.layers.RandomElasticTransform``).

Simard, Steinkraus and Platt, "Best practices for convolutional neural networks applied
to visual document analysis" (ICDAR 2003): a random displacement field, smoothed by a
Gaussian, moves every pixel. Keras 3's constants: ``alpha = 0.1 * max(H, W) * s``,
``sigma = 0.05 * min(H, W) * s`` for a distortion ``s``; the noise is ``N(0, 1) * sigma``,
blurred by a Gaussian of that ``sigma`` on ``6 * int(sigma) | 1`` taps (zero padding), and
the output pixel ``p`` samples the input at ``p + alpha * blurred(p)``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ._photometric import apply_where
from .affine import INTERPOLATIONS, sample_pixels
from .base import RandomLayer, _is_number
from .geometric import GeometricLayer

FILL_MODES = ("reflect", "wrap", "constant", "nearest", "mirror")
_CHUNK = 16  # boxes / keypoints handled at once when inverting the field (bounds memory)


def _gaussian_taps(sigma: torch.Tensor, radius: int) -> torch.Tensor:
    """(B, 2 * radius + 1) normalised Gaussian taps, each image's own ``sigma`` on its own
    ``3 * int(sigma)`` radius (Keras's ``6 * int(sigma) | 1`` taps), zero beyond it."""
    x = torch.arange(-radius, radius + 1, device=sigma.device, dtype=torch.float32)
    s = sigma.to(torch.float32).clamp_min(1e-6).view(-1, 1)  # sigma 0: a unit impulse
    taps = torch.exp(-0.5 * (x / s) ** 2)
    own_radius = 3.0 * torch.floor(sigma.to(torch.float32)).view(-1, 1)
    taps = torch.where(x.abs() <= own_radius, taps, torch.zeros_like(taps))
    return taps / taps.sum(dim=1, keepdim=True)


def _blur(fields: torch.Tensor, taps: torch.Tensor) -> torch.Tensor:
    """Separable per-image Gaussian blur of (B, K, H, W) fields, zero padding (TF's SAME)."""
    b, k, h, w = fields.shape
    r = taps.shape[1] // 2
    weight = taps.repeat_interleave(k, dim=0)  # (B * K, taps): one kernel per field
    x = fields.reshape(1, b * k, h, w)
    if b * k == 0:  # an empty batch: conv2d takes no zero groups
        return fields
    n = taps.shape[1]
    x = F.conv2d(x, weight.view(b * k, 1, n, 1), padding=(r, 0), groups=b * k)
    x = F.conv2d(x, weight.view(b * k, 1, 1, n), padding=(0, r), groups=b * k)
    return x.view(b, k, h, w)


class RandomElasticTransform(GeometricLayer, RandomLayer):
    """Move every pixel by a smooth random displacement field (Keras 3's semantics).

    Per image: a probability drawn from ``factor``'s range decides (against a U[0, 1)
    draw) whether the image is transformed; a distortion ``s`` is drawn from ``scale``'s
    range (Keras draws one ``s`` per batch; here each image has its own); two N(0, 1)
    fields give the x and y displacements (Keras 3's TF backend draws both from one seed,
    so its x and y displacements are equal: a diagonal-only warp; here they are
    independent). The output is clipped to ``value_range``, as in Keras.

    Boxes become the extent of the output pixels that sample inside them (to the pixel);
    a keypoint lands where the interpolated field samples it (the output pixel sampling
    nearest to it, refined by Newton steps). Masks are resampled with ``"nearest"``.

    Args:
        factor: the probability of transforming an image: a number ``f`` in [0, 1] draws it
            from ``[0, f]``, a pair ``(lo, hi)`` (``0 <= lo <= hi <= 1``) from ``[lo, hi]``.
            Default 1.0.
        scale: the distortion ``s``: a number in [0, 1] draws it from ``[0, scale]``, a pair
            from its range. Default 1.0.
        interpolation: ``"bilinear"`` (default) or ``"nearest"``.
        fill_mode: ``"reflect"`` (default), ``"wrap"``, ``"constant"``, ``"nearest"`` or
            ``"mirror"``, as documented by Keras (see ``preprocessing.affine``; Keras 3's
            own ``reflect`` mirrors about the first pixel's centre on the low side).
        fill_value: the value outside the image for ``fill_mode="constant"``.
        value_range: ``(low, high)`` the output is clipped to (low < high); default ``(0, 255)``.
        seed: seeds the layer's draws; None uses torch's global RNG.
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``.
        bounding_box_format: the format of boxes in dict inputs (``preprocessing.
            bounding_boxes``).
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``).

    Input: a rank-3 image, a rank-4 batch or a dict of targets (``Layer``). Output: same
    shape; float dtypes are kept, integer inputs come back as float32. Identity (but for
    the dtype) in ``eval()``.

    Raises:
        ValueError: a bad argument (naming it) or an input that is not rank 3 or 4.
    """

    _scale: tuple[float, float]  # set by _set_factor

    def __init__(
        self,
        factor: float | tuple[float, float] = 1.0,
        scale: float | tuple[float, float] = 1.0,
        interpolation: str = "bilinear",
        fill_mode: str = "reflect",
        fill_value: float = 0.0,
        value_range: tuple[float, float] = (0, 255),
        seed: int | None = None,
        data_format: str | None = None,
        bounding_box_format: str | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            bounding_box_format=bounding_box_format,
            seed=seed,
            data_format=data_format,
            dtype=dtype,
            **kwargs,
        )
        if interpolation not in INTERPOLATIONS:
            self._fail("interpolation", f"must be one of {INTERPOLATIONS}", interpolation)
        if fill_mode not in FILL_MODES:
            self._fail("fill_mode", f"must be one of {FILL_MODES}", fill_mode)
        if not _is_number(fill_value):
            self._fail("fill_value", "must be a finite number", fill_value)
        self._set_factor(factor)
        self._set_factor(scale, "scale")
        self.interpolation, self.fill_mode, self.fill_value = interpolation, fill_mode, fill_value
        self._set_value_range(value_range)

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        n, dev = images.shape[0], images.device
        h, w = self._hw(images)
        probability = self._draw_factor(images, generator)
        apply = self._uniform(n, 0.0, 1.0, dev, generator) < probability
        distortion = self._draw_factor(images, generator, self._scale)
        noise = self._randn((2, n, h, w), dev, generator)
        return {
            "apply_transform": apply,
            "distortion_factor": distortion,
            "dx": noise[0],
            "dy": noise[1],
        }

    def displacement(self, params: dict, height: int, width: int) -> torch.Tensor:
        """(B, H, W, 2) pixel offsets (x, y) that each output pixel samples at."""
        s = params["distortion_factor"].to(torch.float32)
        alpha = max(height, width) * 0.1 * s
        sigma = min(height, width) * 0.05 * s
        # The largest radius any image can need, so the tap count is static.
        radius = 3 * int(min(height, width) * 0.05 * max(self._scale[1], 0.0))
        noise = torch.stack([params["dx"], params["dy"]], dim=1).to(torch.float32)
        field = _blur(noise * sigma.view(-1, 1, 1, 1), _gaussian_taps(sigma, radius))
        field = field * alpha.view(-1, 1, 1, 1)
        apply = _moves(params).view(-1, 1, 1, 1)
        return torch.where(apply, field, torch.zeros_like(field)).permute(0, 2, 3, 1)

    def source_grid(self, params: dict, height: int, width: int) -> torch.Tensor:
        """(B, H, W, 2) pixel-index coordinates (x, y) each output pixel samples."""
        d = self.displacement(params, height, width)
        ys = torch.arange(height, device=d.device, dtype=torch.float32).view(1, -1, 1)
        xs = torch.arange(width, device=d.device, dtype=torch.float32).view(1, 1, -1)
        return torch.stack([d[..., 0] + xs, d[..., 1] + ys], dim=-1)

    def warp(self, x: torch.Tensor, params: Any, interpolation: str) -> torch.Tensor:
        grid = self.source_grid(params, x.shape[-2], x.shape[-1])
        # Only the images that move are resampled: the others come back exactly (a
        # resampling at the pixels' own positions is off by float32 rounding).
        return apply_where(
            x,
            _moves(params),
            lambda s, i: sample_pixels(s, grid[i], interpolation, self.fill_mode, self.fill_value),
        )

    def transform_images(self, images: torch.Tensor, params: Any) -> torch.Tensor:
        x = self._to_nchw(self._to_float(images))
        out = self.warp(x, params, self._image_interpolation).clamp(*self._range)
        return self._from_nchw(out)

    def move_boxes(self, boxes: torch.Tensor, params: Any, height: int, width: int):
        src = self.source_grid(params, height, width) + 0.5  # continuous coordinates
        sx, sy = src[..., 0].unsqueeze(1), src[..., 1].unsqueeze(1)  # (B, 1, H, W)
        limits = torch.tensor([width, height, width, height], device=boxes.device)
        clipped = torch.minimum(boxes.clamp_min(0.0), limits.to(boxes.dtype))
        moved = [_extent(sx, sy, chunk) for chunk in clipped.split(_CHUNK, dim=1)]
        out = torch.cat(moved, dim=1).to(boxes.dtype) if moved else boxes
        return torch.where(_moves(params).view(-1, 1, 1), out, boxes)

    def move_points(self, xy: torch.Tensor, params: Any, height: int, width: int):
        src = self.source_grid(params, height, width) + 0.5
        moved = [_invert(src, chunk) for chunk in xy.to(torch.float32).split(_CHUNK, dim=1)]
        out = torch.cat(moved, dim=1).to(xy.dtype) if moved else xy
        return torch.where(_moves(params).view(-1, 1, 1), out, xy)


def _moves(params: dict) -> torch.Tensor:
    """(B,) bool: the images whose pixels move (picked, with a distortion other than 0)."""
    return params["apply_transform"] & (params["distortion_factor"] != 0)


def _first_last(hits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Index of the first True and one past the last along the last axis (0, 0 if none)."""
    n = hits.shape[-1]
    first = hits.to(torch.int8).argmax(dim=-1)
    last = n - hits.flip(-1).to(torch.int8).argmax(dim=-1)
    found = hits.any(dim=-1)
    zero = torch.zeros_like(first)
    return torch.where(found, first, zero), torch.where(found, last, zero)


def _extent(sx: torch.Tensor, sy: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
    """xyxy extent of the output pixels whose sample point lies in each box (B, n, 4)."""
    x1, y1, x2, y2 = (v[..., None, None] for v in boxes.to(torch.float32).unbind(-1))
    inside = (sx >= x1) & (sx < x2) & (sy >= y1) & (sy < y2)  # (B, n, H, W)
    left, right = _first_last(inside.any(dim=2))
    top, bottom = _first_last(inside.any(dim=3))
    return torch.stack([left, top, right, bottom], dim=-1).to(torch.float32)


def _sample(field: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """Bilinear samples of a (B, C, H, W) field at continuous points (B, k, 2) -> (B, k, C)."""
    h, w = field.shape[-2:]
    scale = torch.tensor([2.0 / w, 2.0 / h], device=points.device)
    grid = (points * scale - 1.0).unsqueeze(1)  # continuous -> align_corners=False coords
    out = F.grid_sample(field, grid, mode="bilinear", padding_mode="border", align_corners=False)
    return out.squeeze(2).transpose(1, 2)


def _invert(src: torch.Tensor, points: torch.Tensor, steps: int = 4) -> torch.Tensor:
    """Where each point (B, k, 2) lands: start at the output pixel whose sample is nearest
    to it, then Newton steps on the bilinearly interpolated field (its Jacobian from
    central differences), each at most one pixel long."""
    b, h, w, _ = src.shape
    flat = src.reshape(b, 1, h * w, 2)
    idx = ((flat - points.unsqueeze(2)) ** 2).sum(-1).argmin(dim=-1)  # (B, k)
    p = torch.stack([(idx % w).float() + 0.5, (idx // w).float() + 0.5], dim=-1)
    field = src.permute(0, 3, 1, 2)  # (B, 2, H, W): the point each pixel samples
    # d field / dx and d field / dy (central differences, one-sided at the borders).
    gx = torch.gradient(field, dim=3)[0] if w > 1 else torch.zeros_like(field)
    gy = torch.gradient(field, dim=2)[0] if h > 1 else torch.zeros_like(field)
    for _ in range(steps):
        s, jx, jy = _sample(field, p), _sample(gx, p), _sample(gy, p)
        det = jx[..., 0] * jy[..., 1] - jy[..., 0] * jx[..., 1]
        r = points - s
        safe = det.abs() > 1e-6
        det = torch.where(safe, det, torch.ones_like(det))
        dx = (jy[..., 1] * r[..., 0] - jy[..., 0] * r[..., 1]) / det
        dy = (jx[..., 0] * r[..., 1] - jx[..., 1] * r[..., 0]) / det
        step = torch.stack([dx, dy], dim=-1).clamp(-1.0, 1.0)
        p = p + torch.where(safe.unsqueeze(-1), step, torch.zeros_like(step))
    return p
