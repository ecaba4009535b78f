"""Shared matrix machinery: per-image 3x3 matrices and ONE resampling with Keras's fills.

Convention (Keras's ``affine_transform``): a matrix maps an *output* pixel ``(x, y, 1)``
(x = column, y = row, integer pixel indices, no half-pixel offset) to the *input*
position it samples (divided by the third coordinate when the bottom row is projective,
as Keras's ``perspective_transform``). Applying layer A then layer B samples the input at
``M_A @ M_B @ p``, so a chain of matrix layers composes into one matrix and one resampling.

Fill modes follow Keras's documented definitions, in which the image is first extended
on the integer pixel grid and then interpolated (what Keras's numpy/torch/jax backends
compute)::

    reflect:  d c b a | a b c d | d c b a     (about the edge of the last pixel)
    wrap:     a b c d | a b c d | a b c d
    nearest:  a a a a | a b c d | d d d d
    constant: k k k k | a b c d | k k k k     (k = fill_value)

``grid_sample`` (align_corners=False, where -1/1 are the image's outer edges) does
three of them in its one resampling pass; wrap is built here:

- reflect: grid_sample's ``reflection`` folds coordinates about the image edges (pixel
  -0.5 and n-0.5) and clamps to [0, n-1]; linear interpolation of the half-sample
  symmetric extension of a pixel grid is exactly that (with align_corners=True it
  would mirror about pixel centres instead, which is Keras's "mirror", not "reflect").
- nearest: ``border`` (clamp).
- constant k: sampling is linear in the image, so ``sample(img - k, zeros) + k`` puts
  exactly k's share of weight on the outside neighbours.
- wrap: pad the image by one pixel circularly and sample ``x mod n`` in the padded image,
  so a coordinate between n-1 and n interpolates pixel n-1 with pixel 0.

(TensorFlow's kernel, used by Keras's TF backend, clamps instead of wrapping in the band
between the last pixel and the first copy; the documented definition is followed here.)
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from ._photometric import apply_where
from .base import RandomLayer, _is_number
from .geometric import GeometricLayer

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


def _normaliser(height: int, width: int, pad: int = 0) -> torch.Tensor:
    """3x3 map from pixel indices to grid_sample's align_corners=False coordinates.

    With align_corners=False, -1 and 1 are the outer edges of the (padded) image, so
    pixel x sits at (2 (x + pad) + 1) / n - 1 for a padded size n.
    """
    wp, hp = width + 2 * pad, height + 2 * pad
    return torch.tensor(
        [
            [2.0 / wp, 0.0, (2.0 * pad + 1.0) / wp - 1.0],
            [0.0, 2.0 / hp, (2.0 * pad + 1.0) / hp - 1.0],
            [0.0, 0.0, 1.0],
        ]
    )


def _grid(matrix: torch.Tensor, height: int, width: int, projective: bool = False):
    """(B, H, W, 2) sampling coordinates: ``matrix`` applied to every output pixel."""
    device = matrix.device
    rows_used = 3 if projective else 2
    theta = matrix[:, :rows_used, :].to(torch.float32)  # rows give (x_in, y_in[, w])
    xs = torch.arange(width, device=device, dtype=torch.float32)
    ys = torch.arange(height, device=device, dtype=torch.float32)
    # The map is affine in (x, y): a per-column part plus a per-row part, so one
    # broadcast add writes the whole grid (cheaper than affine_grid's matmul).
    k = rows_used
    cols = xs.view(1, width, 1) * theta[:, :, 0].view(-1, 1, k)  # (B, W, k)
    rows = ys.view(1, height, 1) * theta[:, :, 1].view(-1, 1, k) + theta[:, :, 2].view(-1, 1, k)
    grid = rows.unsqueeze(2) + cols.unsqueeze(1)
    if projective:
        grid = grid[..., :2] / grid[..., 2:]
    return grid


def affine_transform(
    images: torch.Tensor,
    matrix: torch.Tensor,
    interpolation: str = "bilinear",
    fill_mode: str = "reflect",
    fill_value: float = 0.0,
    projective: bool = False,
) -> torch.Tensor:
    """Resample a float (B, C, H, W) batch once with per-image (B, 3, 3) matrices.

    ``projective``: divide by the third coordinate (a homography; the bottom row of an
    affine matrix is ``[0, 0, 1]`` and is ignored otherwise). Output shape equals input
    shape; the dtype is kept (float16/bfloat16 are computed in float32, which
    ``grid_sample`` supports everywhere).
    """
    _, _, h, w = images.shape
    dtype = images.dtype
    x = images if dtype in (torch.float32, torch.float64) else images.to(torch.float32)
    mode = "bilinear" if interpolation == "bilinear" else "nearest"
    padding = {"reflect": "reflection", "nearest": "border", "constant": "zeros"}
    matrix = matrix.to(torch.float32)
    if fill_mode == "wrap":
        x = F.pad(x, (1, 1, 1, 1), mode="circular")
        sizes = torch.tensor([w, h], device=x.device, dtype=torch.float32)
        grid = torch.remainder(_grid(matrix, h, w, projective), sizes)  # pixels in [0, n)
        grid = _grid_normalise(grid, _normaliser(h, w, pad=1).to(grid.device))
        pad_mode = "border"
    else:
        # The pixel->normalised step is folded into the matrix: no extra pass.
        grid = _grid(_normaliser(h, w).to(matrix.device) @ matrix, h, w, projective)
        pad_mode = padding[fill_mode]
    grid = grid.to(x.dtype)
    shift = float(fill_value) if fill_mode == "constant" else 0.0
    if shift:
        x = x - shift
    out = F.grid_sample(x, grid, mode=mode, padding_mode=pad_mode, align_corners=False)
    if shift:
        out = out + shift
    return out.to(dtype)


def _grid_normalise(grid: torch.Tensor, norm: torch.Tensor) -> torch.Tensor:
    return grid.mul_(torch.diagonal(norm)[:2]).add_(norm[:2, 2])


def _fold(coord: torch.Tensor, size: int, fill_mode: str) -> torch.Tensor:
    """Fold pixel coordinates into [0, size - 1] for the modes ``grid_sample`` lacks."""
    if fill_mode == "mirror":  # c d c b | a b c d | c b a b: period 2 (n - 1)
        if size == 1:
            return torch.zeros_like(coord)
        period = 2.0 * (size - 1)
        t = torch.remainder(coord, period)
        return torch.where(t > size - 1, period - t, t)
    return coord


def sample_pixels(
    images: torch.Tensor,
    grid: torch.Tensor,
    interpolation: str = "bilinear",
    fill_mode: str = "reflect",
    fill_value: float = 0.0,
) -> torch.Tensor:
    """Sample a float (B, C, H, W) batch at pixel-index coordinates ``grid`` (B, H', W', 2)
    (x, y), with Keras's fill modes (``FILL_MODES``) plus ``"mirror"`` (``c d c b | a b c d
    | c b a b``, about the edge pixels' centres). The dtype is kept."""
    _, _, h, w = images.shape
    dtype = images.dtype
    x = images if dtype in (torch.float32, torch.float64) else images.to(torch.float32)
    grid = grid.to(x.dtype)
    pad = 0
    if fill_mode == "wrap":
        x = F.pad(x, (1, 1, 1, 1), mode="circular")
        sizes = torch.tensor([w, h], device=x.device, dtype=x.dtype)
        grid, pad = torch.remainder(grid, sizes), 1
    elif fill_mode == "mirror":
        grid = torch.stack([_fold(grid[..., 0], w, "mirror"), _fold(grid[..., 1], h, "mirror")], -1)
    norm = _normaliser(h, w, pad=pad).to(device=x.device, dtype=x.dtype)
    grid = grid * torch.diagonal(norm)[:2] + norm[:2, 2]
    padding = {"reflect": "reflection", "constant": "zeros"}.get(fill_mode, "border")
    shift = float(fill_value) if fill_mode == "constant" else 0.0
    if shift:
        x = x - shift
    mode = "bilinear" if interpolation == "bilinear" else "nearest"
    out = F.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=False)
    if shift:
        out = out + shift
    return out.to(dtype)


def radians(turns: torch.Tensor) -> torch.Tensor:
    """Keras expresses rotations as fractions of a full turn."""
    return turns * (2.0 * math.pi)


def continuous_matrix(matrix: torch.Tensor) -> torch.Tensor:
    """Output->input pixel-index matrices -> input->output continuous-coordinate ones.

    Pixel i's centre is index i and continuous coordinate i + 0.5, so the forward map of
    continuous points is ``T(+0.5) @ inverse(M) @ T(-0.5)``. A matrix with no inverse (a
    shear with ``s_x * s_y = 1`` samples every output pixel from one line of the input,
    so an input point lands on a whole line, not a point) gives NaN: its boxes are
    dropped (label -1) and its keypoints are NaN.
    """
    m = matrix.to(torch.float32)
    shift = torch.eye(3, device=m.device, dtype=m.dtype)
    shift[0, 2] = shift[1, 2] = 0.5
    back = torch.eye(3, device=m.device, dtype=m.dtype)
    back[0, 2] = back[1, 2] = -0.5
    inverse, info = torch.linalg.inv_ex(m)  # no error (nor host sync) on singular ones
    inverse = torch.where((info != 0).view(-1, *([1] * (m.ndim - 1))), torch.nan, inverse)
    return shift @ inverse @ back


class AffineLayer(GeometricLayer, RandomLayer):
    """Base of the random layers given by one 3x3 matrix per image: flip, rotation, zoom,
    translation, shear, perspective. The output has the input's size.

    Subclasses implement ``get_random_transformation`` and ``matrix(params, h, w)``
    (output pixel -> input pixel, Keras's convention; ``_projective = True`` for
    homographies); ``transform_images`` resamples once, and boxes, keypoints and masks
    follow (``GeometricLayer``). ``Pipeline`` composes ``matrix`` of consecutive such
    layers, so they share one resampling; a ``params`` dict holding ``"matrix"`` applies
    that matrix instead of the layer's own (how ``Pipeline`` hands over a composition).

    Output: same shape as the input; float dtypes are kept, others become float32.
    """

    _abstract = True
    _projective = False

    def __init__(
        self,
        fill_mode: str = "reflect",
        interpolation: str = "bilinear",
        fill_value: float = 0.0,
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

    def _fill_key(self) -> tuple | None:
        """The resampling settings that must agree for ``Pipeline`` to fuse (None: any)."""
        return (self.fill_mode, self.interpolation, float(self.fill_value))

    def _matrix_of(self, params: dict, height: int, width: int) -> torch.Tensor:
        if "matrix" in params:
            return params["matrix"]
        return self.matrix(params, height, width)

    def warp(self, x: torch.Tensor, params: Any, interpolation: str) -> torch.Tensor:
        h, w = x.shape[-2:]
        projective = params.get("projective", self._projective)
        matrix = self._matrix_of(params, h, w)
        # An image whose matrix is the identity (not picked, a zero angle or shift) is
        # copied, not resampled: sampling a pixel at its own position through
        # grid_sample's normalised coordinates is off by float32 rounding.
        eye = torch.eye(3, device=matrix.device, dtype=matrix.dtype)
        moves = ~(matrix == eye).flatten(1).all(dim=1)
        return apply_where(
            x,
            moves,
            lambda s, i: affine_transform(
                s, matrix[i], interpolation, self.fill_mode, self.fill_value, projective
            ),
        )

    def point_matrix(self, params: Any, height: int, width: int) -> torch.Tensor:
        return continuous_matrix(self._matrix_of(params, height, width))
