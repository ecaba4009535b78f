"""Shared affine machinery: per-image 3x3 matrices and ONE resampling with Keras's fills.

Convention (Keras's ``affine_transform``): a matrix maps an *output* pixel ``(x, y, 1)``
(x = column, y = row, integer pixel indices, no half-pixel offset) to the *input*
position it samples. Applying layer A then layer B samples the input at ``M_A @ M_B @ p``,
so a chain of geometric layers composes into one matrix and one resampling.

Fill modes follow Keras's documented definitions, in which the image is first extended
on the integer pixel grid and then interpolated (what Keras's numpy/torch/jax backends
compute)::

    reflect:  d c b a | a b c d | d c b a     (about the edge of the last pixel)
    wrap:     a b c d | a b c d | a b c d
    nearest:  a a a a | a b c d | d d d d
    constant: k k k k | a b c d | k k k k     (k = fill_value)

``grid_sample`` has no wrap and its reflection is about pixel centres, so the fills are
built here by mapping the sampling coordinates and calling ``grid_sample`` once:

- reflect: the half-sample-symmetric extension of a pixel grid, interpolated linearly, is
  the original image sampled at the coordinate folded (period ``2n``, mirrors at -0.5 and
  n-0.5) and then clamped to [0, n-1] (grid_sample's ``border``).
- nearest: clamp (``border``).
- constant k: sampling is linear in the image, so ``sample(img - k, zeros) + k`` puts
  exactly k's share of weight on the outside neighbours.
- wrap: pad the image by one pixel circularly and sample ``x mod n`` in the padded image,
  so a coordinate between n-1 and n interpolates pixel n-1 with pixel 0.

(TensorFlow's kernel, used by Keras's TF backend, clamps instead of wrapping in the band
between the last pixel and the first copy; the documented definition is followed here.)
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .base import RandomLayer, _is_number

FILL_MODES = ("reflect", "wrap", "constant", "nearest")
INTERPOLATIONS = ("bilinear", "nearest")


def _eye(batch: int, device: torch.device) -> torch.Tensor:
    return torch.eye(3, device=device, dtype=torch.float32).expand(batch, 3, 3).clone()


def rotation_matrix(angle: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """(B, 3, 3) for counter-clockwise angles in radians about the image centre (Keras)."""
    cx, cy = (width - 1) / 2.0, (height - 1) / 2.0
    cos, sin = torch.cos(angle), torch.sin(angle)
    m = _eye(angle.shape[0], angle.device)
    m[:, 0, 0], m[:, 0, 1] = cos, -sin
    m[:, 0, 2] = cx - cx * cos + cy * sin
    m[:, 1, 0], m[:, 1, 1] = sin, cos
    m[:, 1, 2] = cy - cx * sin - cy * cos
    return m


def zoom_matrix(zoom_h: torch.Tensor, zoom_w: torch.Tensor, height: int, width: int):
    """(B, 3, 3) zoom about the centre; factor > 1 zooms out (Keras's RandomZoom)."""
    m = _eye(zoom_h.shape[0], zoom_h.device)
    m[:, 0, 0] = zoom_w
    m[:, 0, 2] = (width - 1) / 2.0 * (1.0 - zoom_w)
    m[:, 1, 1] = zoom_h
    m[:, 1, 2] = (height - 1) / 2.0 * (1.0 - zoom_h)
    return m


def translation_matrix(dy: torch.Tensor, dx: torch.Tensor) -> torch.Tensor:
    """(B, 3, 3) shifting the content by (dy, dx) pixels (down/right positive)."""
    m = _eye(dy.shape[0], dy.device)
    m[:, 0, 2] = -dx
    m[:, 1, 2] = -dy
    return m


def flip_matrix(flip_h: torch.Tensor, flip_v: torch.Tensor, height: int, width: int):
    """(B, 3, 3) mirroring columns where ``flip_h`` and rows where ``flip_v`` (bool)."""
    fh, fv = flip_h.to(torch.float32), flip_v.to(torch.float32)
    m = _eye(fh.shape[0], fh.device)
    m[:, 0, 0] = 1.0 - 2.0 * fh
    m[:, 0, 2] = fh * (width - 1)
    m[:, 1, 1] = 1.0 - 2.0 * fv
    m[:, 1, 2] = fv * (height - 1)
    return m


def _axis_scale(n: int) -> float:
    # align_corners=True maps normalised -1..1 onto pixel 0..n-1; n == 1 has one pixel.
    return 2.0 / (n - 1) if n > 1 else 0.0


def _pixel_grid(matrix: torch.Tensor, height: int, width: int, shift: float) -> torch.Tensor:
    """(B, H, W, 2) input positions (x, y) + ``shift`` for every output pixel."""
    device = matrix.device
    ys, xs = torch.meshgrid(
        torch.arange(height, device=device, dtype=torch.float32),
        torch.arange(width, device=device, dtype=torch.float32),
        indexing="ij",
    )
    base = torch.stack([xs, ys, torch.ones_like(xs)], dim=-1).reshape(1, height * width, 3)
    theta = matrix[:, :2, :].to(torch.float32)  # (B, 2, 3)
    if shift:
        theta = theta + torch.tensor([0.0, 0.0, shift], device=device)
    # One batched matmul computes every coordinate (what affine_grid does internally).
    grid = torch.matmul(base, theta.transpose(1, 2))
    return grid.reshape(-1, height, width, 2)


def _fold_reflect(grid: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Grid of x+0.5 -> normalised coordinates of the folded (reflected) position."""
    # u = x + 0.5 has mirrors at 0 and n; u' = n - |(u mod 2n) - n| lies in [0, n];
    # x' = u' - 0.5, normalised: x' * 2/(n-1) - 1 = c1 - c2 * |(u mod 2n) - n|.
    sizes = torch.tensor([width, height], device=grid.device, dtype=grid.dtype)
    grid = torch.remainder(grid, 2.0 * sizes).sub_(sizes).abs_()
    c2 = torch.tensor([_axis_scale(width), _axis_scale(height)], device=grid.device)
    c1 = (sizes - 0.5) * c2 - 1.0
    return grid.mul_(-c2).add_(c1)


def _normalise(grid: torch.Tensor, height: int, width: int, pad: int = 0) -> torch.Tensor:
    scale = torch.tensor(
        [_axis_scale(width + 2 * pad), _axis_scale(height + 2 * pad)], device=grid.device
    )
    return grid.mul_(scale).sub_(1.0)


def _sampling_matrix(matrix: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Fold pixel->normalised conversion into the matrix (saves a pass over the grid)."""
    norm = torch.diag(
        torch.tensor([_axis_scale(width), _axis_scale(height), 1.0], device=matrix.device)
    )
    norm[0, 2] = norm[1, 2] = -1.0
    return norm @ matrix.to(torch.float32)


def affine_transform(
    images: torch.Tensor,
    matrix: torch.Tensor,
    interpolation: str = "bilinear",
    fill_mode: str = "reflect",
    fill_value: float = 0.0,
) -> torch.Tensor:
    """Resample a float (B, C, H, W) batch once with per-image (B, 3, 3) matrices.

    Output shape equals input shape; the dtype is kept (float16/bfloat16 are computed in
    float32, which ``grid_sample`` supports everywhere).
    """
    b, _, h, w = images.shape
    dtype = images.dtype
    x = images if dtype in (torch.float32, torch.float64) else images.to(torch.float32)
    mode = "bilinear" if interpolation == "bilinear" else "nearest"
    if fill_mode == "wrap":
        x = F.pad(x, (1, 1, 1, 1), mode="circular")
        sizes = torch.tensor([w, h], device=x.device, dtype=torch.float32)
        grid = torch.remainder(_pixel_grid(matrix, h, w, 0.0), sizes).add_(1.0)
        grid = _normalise(grid, h, w, pad=1)
    elif fill_mode == "reflect":
        grid = _fold_reflect(_pixel_grid(matrix, h, w, 0.5), h, w)
    else:
        theta = _sampling_matrix(matrix, h, w)[:, :2, :]
        grid = _pixel_grid(theta, h, w, 0.0)
    grid = grid.to(x.dtype)
    if fill_mode == "constant":
        shift = float(fill_value)
        if shift:
            x = x - shift
        out = F.grid_sample(x, grid, mode=mode, padding_mode="zeros", align_corners=True)
        if shift:
            out = out + shift
    else:
        out = F.grid_sample(x, grid, mode=mode, padding_mode="border", align_corners=True)
    return out.to(dtype)


def radians(turns: torch.Tensor) -> torch.Tensor:
    """Keras expresses rotations as fractions of a full turn."""
    return turns * (2.0 * math.pi)


class AffineLayer(RandomLayer):
    """Base of the random geometric layers that resample (rotation, zoom, translation).

    Subclasses implement ``get_random_transformation`` and ``matrix(params, h, w)``;
    ``transform_images`` resamples once. ``Pipeline`` composes ``matrix`` of consecutive
    geometric layers, so they share one resampling.

    Output: same shape as the input; float dtypes are kept, others become float32.
    """

    _abstract = True

    def __init__(
        self,
        fill_mode: str = "reflect",
        interpolation: str = "bilinear",
        fill_value: float = 0.0,
        seed: int | None = None,
        data_format: str = "channels_first",
    ) -> None:
        super().__init__(seed=seed, data_format=data_format)
        if fill_mode not in FILL_MODES:
            self._fail("fill_mode", f"must be one of {FILL_MODES}", fill_mode)
        if interpolation not in INTERPOLATIONS:
            self._fail("interpolation", f"must be one of {INTERPOLATIONS}", interpolation)
        if not _is_number(fill_value):
            self._fail("fill_value", "must be a finite number", fill_value)
        self.fill_mode = fill_mode
        self.interpolation = interpolation
        self.fill_value = fill_value

    def matrix(self, params: dict[str, torch.Tensor], height: int, width: int) -> torch.Tensor:
        """(B, 3, 3) output->input pixel matrices for ``params``."""
        raise NotImplementedError

    def transform_images(self, images: torch.Tensor, params: dict[str, torch.Tensor]):
        batch, single = self._as_batch(images)
        h, w = self._hw(batch)
        x = self._to_nchw(self._to_float(batch))
        out = affine_transform(
            x, self.matrix(params, h, w), self.interpolation, self.fill_mode, self.fill_value
        )
        return self._unbatch(self._from_nchw(out), single)
