"""ContrastLimitedAdaptiveHistogramEqualization (Keras 3's
``keras.layers.ContrastLimitedAdaptiveHistogramEqualization``).

CLAHE (Zuiderveld, "Contrast Limited Adaptive Histogram Equalization", Graphics Gems IV,
1994) as Keras 3.15 computes it (``keras/src/layers/preprocessing/image_preprocessing/
clahe.py``): the image, mirrored at its bottom/right edge up to whole tiles, is cut into
a grid of tiles; each tile's 256-bin histogram is clipped and its excess spread evenly
over the bins; each tile's cumulative histogram becomes a lookup table; each pixel is the
bilinear blend of the tables of the four tiles whose centres surround it.

Everything is vectorised over the batch, the channels and the tiles: one scatter-add for
every tile's histogram, one pass over the (rows, 256) tables, four gathers from them.
"""

from __future__ import annotations

from typing import Any

import torch

from ._photometric import from_255, to_255
from .base import MAX_TILES, Layer, _is_number

BINS = 256


def _symmetric(n: int, padded: int, device: torch.device) -> torch.Tensor:
    """Positions ``0 .. padded - 1`` of an axis of ``n`` extended as numpy's
    ``pad(mode="symmetric")`` extends it at the end: ``n - 1, n - 2, ...`` after the last
    (the edge repeated), periodic with period ``2 n`` for pads longer than the axis."""
    i = torch.arange(padded, device=device) % (2 * n)
    return torch.where(i < n, i, 2 * n - 1 - i)


def _tile_sizes(h: int, w: int, grid: tuple[int, int]) -> tuple[int, int]:
    """Keras's tile size: the image divided by the grid, rounded up."""
    return -(-h // grid[0]), -(-w // grid[1])


def tile_histograms(index: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
    """Per-tile 256-bin histograms (B * C * gh * gw, 256) float32 of ``index`` (B, C, H, W),
    uint8 bins (any strides), the image mirrored at its end up to whole tiles (Keras)."""
    b, c, h, w = index.shape
    (gh, gw), (th, tw) = grid, _tile_sizes(h, w, grid)
    if th * gh != h:
        index = index.index_select(2, _symmetric(h, th * gh, index.device))
    if tw * gw != w:
        index = index.index_select(3, _symmetric(w, tw * gw, index.device))
    # Each tile's pixels in one row (a copy of one byte per pixel), so one scatter-add
    # along the rows counts every tile at once and parallelises over them.
    tiles = index.reshape(b, c, gh, th, gw, tw).permute(0, 1, 2, 4, 3, 5)
    rows = tiles.reshape(b * c * gh * gw, th * tw).to(torch.int64)
    ones = torch.ones((), dtype=torch.float32, device=index.device).expand(rows.shape)
    hist = torch.zeros(rows.shape[0], BINS, dtype=torch.float32, device=index.device)
    return hist.scatter_add_(1, rows, ones)  # counts < 2**24 per tile: exact in float32


def lookup_tables(hist: torch.Tensor, pixels: int, clip_limit: float) -> torch.Tensor:
    """Keras's per-tile tables (R, 256) float32 in [0, 255] from histograms of ``pixels``.

    With ``clip_limit > 0`` each bin is clipped to ``clip_limit * pixels / 256`` and the
    clipped excess is spread evenly over all 256 bins (once, as Keras; no iteration).
    Table ``(cdf - cdf[0]) * 255 / (pixels - cdf[0])``, clipped to [0, 255], no rounding
    (Keras takes the minimum of the cumulative sum, which is its first bin).
    """
    if clip_limit > 0:
        clipped = hist.clamp(0.0, clip_limit * pixels / float(BINS))
        excess = (hist - clipped).sum(dim=1, keepdim=True)
        hist = clipped.add_(excess / float(BINS))
    cdf = hist.cumsum(dim=1)
    cdf_min = cdf[:, :1]
    den = pixels - cdf_min
    den = torch.where(den == 0, torch.ones_like(den), den)
    return ((cdf - cdf_min) * 255.0 / den).clamp_(0.0, 255.0)


def _cells(n: int, tile: int, grid: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """For positions ``0 .. n - 1`` along an axis: the table of the tile centred before each
    (an index into the edge-replicated grid of ``grid + 2`` tables) and the weight of the
    next one. Keras's float32 arithmetic: ``g = (y - tile / 2) / tile + 1``,
    ``k = floor(g)``, weight ``g - k``; the centre of tile ``t`` is at ``tile * (t + 1/2)``."""
    pos = torch.arange(n, dtype=torch.float32, device=device)
    # A tensor divisor: torch divides by a scalar as a multiplication by its reciprocal,
    # which rounds differently from Keras's division.
    g = (pos - tile / 2.0) / torch.full_like(pos, float(tile)) + 1.0
    k = g.floor()
    return k.clamp(0, grid).to(torch.int64), g - k


def _shape(ndim: int, dim: int, n: int) -> tuple[int, ...]:
    return tuple(n if d == dim else 1 for d in range(ndim))


def interpolate(index: torch.Tensor, tables: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
    """The bilinear blend, per pixel of ``index`` (B, C, H, W) uint8, of the tables
    (B * C * gh * gw, 256) of the four tiles whose centres surround it; tiles beyond the
    grid's edge repeat the edge tile (Keras). float32, with ``index``'s strides when it is
    contiguous or channels_last (so a channels_last batch is not permuted in memory)."""
    b, c, h, w = index.shape
    (gh, gw), (th, tw) = grid, _tile_sizes(h, w, grid)
    dev = index.device
    edge_y = torch.arange(gh + 2, device=dev).sub_(1).clamp_(0, gh - 1)
    edge_x = torch.arange(gw + 2, device=dev).sub_(1).clamp_(0, gw - 1)
    table = tables.view(b, c, gh, gw, BINS).index_select(2, edge_y).index_select(3, edge_x)
    table = table.reshape(-1)
    y0, wy = _cells(h, th, gh, dev)
    x0, wx = _cells(w, tw, gw, dev)
    sx, sy = BINS, (gw + 2) * BINS
    sc = (gh + 2) * sy
    # Work in memory order: axes (b, c, y, x) sit at `at` in the tensor `mem`.
    last = not index.is_contiguous() and index.is_contiguous(memory_format=torch.channels_last)
    mem = index.permute(0, 2, 3, 1) if last else index.contiguous()
    at = (0, 3, 1, 2) if last else (0, 1, 2, 3)
    offsets = [
        torch.arange(n, device=dev).mul_(s).view(_shape(4, d, n))
        for n, s, d in ((b, c * sc, at[0]), (c, sc, at[1]))
    ]
    cell = (y0 * sy).view(_shape(4, at[2], h)) + (x0 * sx).view(_shape(4, at[3], w))
    # Flat index of the north-west table's bin; the other three corners are fixed offsets
    # from it, read from views of the table that start later (no further index tensors).
    flat = (offsets[0] + offsets[1] + cell).add_(mem).view(-1)

    def corner(offset: int) -> torch.Tensor:
        return table[offset:].index_select(0, flat).view(mem.shape)

    wx, wy = wx.view(_shape(4, at[3], w)), wy.view(_shape(4, at[2], h))
    # Keras's order of operations (a * (1 - w) + b * w), each step rounded in float32.
    top = corner(0).mul_(1.0 - wx).add_(corner(sx).mul_(wx))
    bottom = corner(sy).mul_(1.0 - wx).add_(corner(sy + sx).mul_(wx))
    out = top.mul_(1.0 - wy).add_(bottom.mul_(wy))
    return out.permute(0, 3, 1, 2) if last else out


def clahe(index: torch.Tensor, grid: tuple[int, int], clip_limit: float) -> torch.Tensor:
    """CLAHE of ``index`` (B, C, H, W) uint8 grey levels (any strides: a channels_last
    batch is passed as its permuted view): float32 in [0, 255], the same strides."""
    _, _, h, w = index.shape
    th, tw = _tile_sizes(h, w, grid)
    return interpolate(
        index, lookup_tables(tile_histograms(index, grid), th * tw, clip_limit), grid
    )


def _grid_size(layer: Layer, value: Any) -> tuple[int, int]:
    if (
        not isinstance(value, (list, tuple))
        or len(value) != 2
        or not all(
            isinstance(g, int) and not isinstance(g, bool) and 1 <= g <= MAX_TILES for g in value
        )
    ):
        layer._fail(
            "tile_grid_size", f"must be a pair of ints in [1, {MAX_TILES}] (rows, columns)", value
        )
    return int(value[0]), int(value[1])


class ContrastLimitedAdaptiveHistogramEqualization(Layer):
    """Contrast-limited adaptive histogram equalisation of each channel of each image
    (Keras 3's ``ContrastLimitedAdaptiveHistogramEqualization``; Zuiderveld 1994).

    Keras 3.15's algorithm and float32 arithmetic, per image and channel, on values mapped
    from ``value_range`` to [0, 255] and truncated to 256 grey levels:

    - tiles: ``tile_grid_size = (gh, gw)`` tiles of ``ceil(H / gh) x ceil(W / gw)``
      pixels; the image is extended at its bottom and right edges by mirroring
      (numpy's ``pad(mode="symmetric")``) to whole tiles;
    - per tile, a 256-bin histogram; with ``clip_limit > 0`` each bin is clipped to
      ``clip_limit * tile_pixels / 256`` and the clipped excess is spread evenly over the
      256 bins (once); the lookup table is ``(cdf - cdf[0]) * 255 / (tile_pixels -
      cdf[0])`` (not rounded);
    - each pixel ``(y, x)`` blends bilinearly the tables of the four tiles whose centres
      surround it: with ``gy = (y - th / 2) / th + 1``, tiles ``floor(gy) - 1`` and
      ``floor(gy)`` (the edge tile where that is off the grid), weight ``gy -
      floor(gy)`` for the second (the same along x);
    - mapped back to ``value_range``.

    Deterministic: applied in ``train()`` and ``eval()`` alike, as Keras does. Vectorised
    over the batch, the channels and the tiles (one scatter-add for all histograms, four
    gathers for all pixels).

    Differs from Keras 3: integer inputs come back as float32 (the package's rule; Keras
    casts back to the input dtype, truncating); a grid with more tiles than pixels along
    an axis mirrors periodically as numpy does (Keras's TensorFlow backend refuses a
    mirror pad longer than the image).

    Args:
        value_range: ``(low, high)`` of the input values (low < high), default (0, 255).
        clip_limit: a number >= 0, default 4.0: the histogram clip in multiples of the
            mean bin count; 0 turns clipping off (plain adaptive equalisation; Keras
            clips only when it is > 0).
        tile_grid_size: ``(rows, columns)`` of tiles, ints in [1, 64], default (8, 8)
            (``preprocessing.base.MAX_TILES``: a 256-bin histogram per tile, channel and
            image).
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``.
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``).

    Input: a rank-3 image, a rank-4 batch or a dict of targets (only ``images`` change).
    Output: same shape; float dtypes are kept (the arithmetic is float32, as Keras's),
    integer inputs come back as float32.

    Raises:
        ValueError: a bad argument (naming it) or an input that is not rank 3 or 4.

    Example:
        >>> import torch
        >>> clahe = ContrastLimitedAdaptiveHistogramEqualization(
        ...     clip_limit=0, tile_grid_size=(1, 1), data_format="channels_first"
        ... )
        >>> clahe(torch.tensor([[[10.0, 10.0, 20.0, 40.0]]]))  # cdf * 255 / 4, cdf[0] = 0
        tensor([[[127.5000, 127.5000, 191.2500, 255.0000]]])
    """

    _keras_base_factor = True  # Keras's takes its base layer's (unused) factor

    def __init__(
        self,
        value_range: tuple[float, float] = (0, 255),
        clip_limit: float = 4.0,
        tile_grid_size: tuple[int, int] = (8, 8),
        data_format: str | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(data_format=data_format, dtype=dtype, **kwargs)
        self.clip_limit, self.tile_grid_size = clip_limit, tile_grid_size
        self._set_value_range(value_range)
        if not _is_number(clip_limit) or clip_limit < 0:
            self._fail("clip_limit", "must be a finite number >= 0", clip_limit)
        self._grid = _grid_size(self, tile_grid_size)

    def transform_images(self, images: torch.Tensor, params: object = None) -> torch.Tensor:
        out_dtype = self.compute_dtype or (
            images.dtype if images.is_floating_point() else torch.float32
        )
        x = self._to_nchw(images)
        lo, hi = self._range
        # Keras's grey level: the value truncated towards zero, clipped to [0, 255].
        if (lo, hi) != (0.0, 255.0):  # Keras maps the range in float32 (a fresh tensor)
            index = to_255(x.to(torch.float32), lo, hi).clamp_(0, 255).to(torch.uint8)
        else:
            index = x if x.dtype == torch.uint8 else x.clamp(0, 255).to(torch.uint8)
        out = clahe(index, self._grid, float(self.clip_limit))
        out = from_255(out, lo, hi).to(out_dtype)
        return self._from_nchw(out)
