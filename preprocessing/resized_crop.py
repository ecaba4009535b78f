"""RandomResizedCrop (torchvision's ``transforms.v2.RandomResizedCrop`` semantics).

The crop of every ImageNet recipe (Szegedy et al., "Going deeper with convolutions",
2015, as torchvision implements it): per image, up to 10 tries draw an area fraction from
``scale`` and a log-uniform aspect ratio from ``ratio``; the first crop that fits is taken
at a uniform position, else the centre crop clipped to the ratio range. The crop is then
resized to ``(height, width)`` exactly as ``torch.nn.functional.interpolate`` resizes it
(half-pixel centres; with ``antialias=True`` torch's antialiasing filter, torchvision's
default), but for every image at once: each output row and column is a weighted sum of a
few input rows/columns (gathered per image), so crops of different sizes share one pass.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from . import _regions
from .base import RandomLayer, _is_number, check_bool
from .geometric import GeometricLayer, window_matrix
from .resizing import _check_size, aspect_window

INTERPOLATIONS = ("bilinear", "nearest", "nearest-exact", "bicubic")
_TRIES = 10  # torchvision's number of attempts before the centre-crop fallback


def _cubic(t: torch.Tensor, a: float) -> torch.Tensor:
    """Keys' cubic convolution kernel at distance ``t`` (a = -0.75 torch, -0.5 antialias)."""
    t = t.abs()
    near = ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0
    far = (((t - 5.0) * t + 8.0) * t - 4.0) * a
    return torch.where(t < 1.0, near, torch.where(t < 2.0, far, torch.zeros_like(t)))


def _taps_plain(length: torch.Tensor, out: int, mode: str, dtype: torch.dtype):
    """(index, weight) of shape (B, out, K) into a crop of ``length`` pixels, as torch's
    non-antialiased kernels compute them (scale = length / out in ``dtype``: float32, or
    float64 for float64 images, as torch's CPU kernels compute in the images' opmath type;
    float32 source coordinates put ~1.5e-6 of error into a float64 bicubic downscale)."""
    scale = (length.to(dtype) / out).view(-1, 1)
    o = torch.arange(out, device=length.device, dtype=dtype).view(1, -1)
    last = (length - 1).view(-1, 1)
    if mode in ("nearest", "nearest-exact"):
        src = o * scale if mode == "nearest" else (o + 0.5) * scale
        idx = torch.minimum(src.floor().long(), last)
        return idx.unsqueeze(-1), torch.ones_like(src).unsqueeze(-1)
    src = (o + 0.5) * scale - 0.5
    if mode == "bilinear":
        src = src.clamp_min(0.0)
        i0 = torch.minimum(src.floor().long(), last)
        frac = src - i0
        idx = torch.stack([i0, torch.minimum(i0 + 1, last)], dim=-1)
        return idx, torch.stack([1.0 - frac, frac], dim=-1)
    i0 = src.floor()
    frac = (src - i0).unsqueeze(-1)
    offsets = torch.arange(-1, 3, device=length.device, dtype=dtype)
    weights = _cubic(frac - offsets, -0.75)
    idx = (i0.long().unsqueeze(-1) + offsets.long()).clamp(min=0)
    return torch.minimum(idx, last.unsqueeze(-1)), weights


def _taps_antialias(length: torch.Tensor, out: int, mode: str, max_length: int, dtype: torch.dtype):
    """(index, weight) (B, out, K) of torch's antialiased kernels (bilinear: triangle;
    bicubic: Keys with a = -0.5), widened by the downscale factor, normalised; computed in
    ``dtype`` (see ``_taps_plain``)."""
    half = 1.0 if mode == "bilinear" else 2.0  # interp_size / 2
    scale = (length.to(dtype) / out).view(-1, 1)
    support = torch.where(scale >= 1.0, half * scale, torch.full_like(scale, half))
    inv = torch.where(scale >= 1.0, 1.0 / scale, torch.ones_like(scale))
    o = torch.arange(out, device=length.device, dtype=dtype).view(1, -1)
    center = scale * (o + 0.5)
    xmin = (center - support + 0.5).trunc().clamp_min(0.0)
    xmax = torch.minimum((center + support + 0.5).trunc(), length.view(-1, 1).to(dtype))
    k = int(math.ceil(2.0 * half * max(max_length / out, 1.0))) + 2  # static tap count
    j = torch.arange(k, device=length.device, dtype=dtype)
    pos = xmin.unsqueeze(-1) + j  # (B, out, K)
    t = (pos - center.unsqueeze(-1) + 0.5) * inv.unsqueeze(-1)
    w = (1.0 - t.abs()).clamp_min(0.0) if mode == "bilinear" else _cubic(t, -0.5)
    w = torch.where(pos < xmax.unsqueeze(-1), w, torch.zeros_like(w))
    total = w.sum(-1, keepdim=True)
    w = w / torch.where(total == 0, torch.ones_like(total), total)
    idx = torch.minimum(pos.long(), (length - 1).view(-1, 1, 1))
    return idx, w


def resize_windows(
    x: torch.Tensor,
    top: torch.Tensor,
    left: torch.Tensor,
    crop_h: torch.Tensor,
    crop_w: torch.Tensor,
    size: tuple[int, int],
    mode: str = "bilinear",
    antialias: bool = False,
) -> torch.Tensor:
    """Crop window ``(top, left, crop_h, crop_w)`` of each image of a float (B, C, H, W)
    batch and resize it to ``size`` as ``F.interpolate(crop, size, mode, antialias=...)``
    (``align_corners=False``) would; windows must lie inside the image.

    On CPU (eager, float32/float64) it is that: one ``F.interpolate`` per crop, whose
    separable kernels beat the per-tap gathers 4-5x there (64x3x256x256 to 224x224,
    measured on 2 cores); elsewhere, and under ``torch.compile``, the gathers resize every
    crop in one pass on the device."""
    if _regions.on_host(x) and x.dtype in (torch.float32, torch.float64):
        return _resize_each(x, top, left, crop_h, crop_w, size, mode, antialias)
    b, c, h, w = x.shape
    out_h, out_w = size
    aa = antialias and mode in ("bilinear", "bicubic")
    dt = torch.float64 if x.dtype == torch.float64 else torch.float32
    rows, row_w = (
        _taps_antialias(crop_h, out_h, mode, h, dt) if aa else _taps_plain(crop_h, out_h, mode, dt)
    )
    cols, col_w = (
        _taps_antialias(crop_w, out_w, mode, w, dt) if aa else _taps_plain(crop_w, out_w, mode, dt)
    )
    rows = rows + top.view(-1, 1, 1)
    cols = cols + left.view(-1, 1, 1)
    acc = None
    for k in range(rows.shape[-1]):  # rows: (B, C, out_h, W)
        idx = rows[..., k].view(b, 1, out_h, 1).expand(b, c, out_h, w)
        term = x.gather(2, idx) * row_w[..., k].view(b, 1, out_h, 1).to(x.dtype)
        acc = term if acc is None else acc.add_(term)
    assert acc is not None  # the kernel has at least one tap
    y, out = acc, None
    for k in range(cols.shape[-1]):  # then columns: (B, C, out_h, out_w)
        idx = cols[..., k].view(b, 1, 1, out_w).expand(b, c, out_h, out_w)
        term = y.gather(3, idx) * col_w[..., k].view(b, 1, 1, out_w).to(x.dtype)
        out = term if out is None else out.add_(term)
    assert out is not None
    return out


def _resize_each(
    x: torch.Tensor,
    top: torch.Tensor,
    left: torch.Tensor,
    crop_h: torch.Tensor,
    crop_w: torch.Tensor,
    size: tuple[int, int],
    mode: str,
    antialias: bool,
) -> torch.Tensor:
    """``resize_windows`` by one ``F.interpolate`` per crop (the host path)."""
    smooth = mode in ("bilinear", "bicubic")
    kwargs = {"align_corners": False, "antialias": antialias} if smooth else {}
    # A channels_last batch (a channels_last layer's NCHW view included) keeps its layout.
    last = x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()
    layout = torch.channels_last if last else torch.contiguous_format
    out = torch.empty((*x.shape[:2], *size), dtype=x.dtype, device=x.device, memory_format=layout)
    windows = zip(top.tolist(), left.tolist(), crop_h.tolist(), crop_w.tolist())
    for i, (t, s, ch, cw) in enumerate(windows):
        crop = x[i : i + 1, :, t : t + ch, s : s + cw]
        out[i : i + 1] = F.interpolate(crop, size=size, mode=mode, **kwargs)
    return out


class RandomResizedCrop(GeometricLayer, RandomLayer):
    """Crop a random area and aspect ratio per image, resized to ``(height, width)``.

    torchvision's draw, per image: up to 10 tries of an area fraction ``U(scale)`` and an
    aspect ratio (width / height) ``exp(U(log ratio))``, crop sides ``round(sqrt(area *
    ratio))`` by ``round(sqrt(area / ratio))``; the first that fits in the image is placed
    uniformly at random (integer offsets). When none fits, the centre crop: the whole image
    if its ratio lies in ``ratio``'s range, else the largest centred crop with the nearest
    ratio bound. The crop is resized as ``F.interpolate`` would (see the module docstring).
    In ``eval()``: the largest centred window with the output's aspect ratio, resized (so
    shapes agree; torchvision has no eval mode).

    Args:
        height, width: the output size (ints in [1, 65536]).
        scale: ``(lo, hi)`` area fractions, ``0 < lo <= hi <= 1``; default ``(0.08, 1.0)``.
        ratio: ``(lo, hi)`` aspect ratios (width / height), ``0 < lo <= hi``; default
            ``(3 / 4, 4 / 3)``.
        interpolation: ``"bilinear"`` (default), ``"nearest"`` (torch's legacy nearest, as
            torchvision's ``NEAREST``), ``"nearest-exact"`` or ``"bicubic"``.
        antialias: low-pass filter when downscaling (bilinear and bicubic; torchvision's
            default True).
        seed: seeds the layer's draws; None uses torch's global RNG.
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``.
        bounding_box_format: the format of boxes in dict inputs (``preprocessing.
            bounding_boxes``); boxes are cropped, scaled, clipped (empty ones get label -1).
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``).

    Input: a rank-3 image, a rank-4 batch or a dict of targets (``Layer``; masks are
    resized with ``"nearest-exact"``, which samples under each output pixel's centre, so
    they stay aligned with the images and boxes; torchvision's ``NEAREST`` would shift
    them by up to half a crop pixel). Output: same rank, ``(height, width)`` spatially;
    float dtypes are kept, integer inputs come back as float32.

    Raises:
        ValueError: a bad argument (naming it) or an input that is not rank 3 or 4.

    Example:
        >>> import torch
        >>> layer = RandomResizedCrop(2, 2, antialias=False)
        >>> x = torch.arange(16.0).reshape(1, 4, 4)
        >>> params = {"top": torch.tensor([0]), "left": torch.tensor([1]),
        ...           "crop_height": torch.tensor([2]), "crop_width": torch.tensor([2])}
        >>> layer.transform_images(x, params)
        tensor([[[1., 2.],
                 [5., 6.]]])
    """

    _mask_interpolation = "nearest-exact"

    def __init__(
        self,
        height: int,
        width: int,
        scale: tuple[float, float] = (0.08, 1.0),
        ratio: tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0),
        interpolation: str = "bilinear",
        antialias: bool = True,
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
        self.height, self.width = _check_size(self, height, width)
        self.scale = _positive_pair(self, "scale", scale, upper=1.0)
        self.ratio = _positive_pair(self, "ratio", ratio, upper=math.inf)
        if interpolation not in INTERPOLATIONS:
            self._fail("interpolation", f"must be one of {INTERPOLATIONS}", interpolation)
        self.interpolation = interpolation
        self.antialias = check_bool(self, "antialias", antialias)

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        n, dev = images.shape[0], images.device
        h, w = self._hw(images)
        area = self._uniform(n * _TRIES, *self.scale, dev, generator).view(n, _TRIES) * (h * w)
        log_lo, log_hi = math.log(self.ratio[0]), math.log(self.ratio[1])
        aspect = torch.exp(self._uniform(n * _TRIES, log_lo, log_hi, dev, generator))
        aspect = aspect.view(n, _TRIES)
        cw = torch.round(torch.sqrt(area * aspect))
        ch = torch.round(torch.sqrt(area / aspect))
        fits = (cw > 0) & (cw <= w) & (ch > 0) & (ch <= h)
        first = fits.to(torch.int8).argmax(dim=1, keepdim=True)  # the first try that fits
        found = fits.any(dim=1)
        fb_h, fb_w = self._fallback(h, w)
        ch = torch.where(found, ch.gather(1, first).squeeze(1), float(fb_h)).long()
        cw = torch.where(found, cw.gather(1, first).squeeze(1), float(fb_w)).long()
        u_top = self._uniform(n, 0.0, 1.0, dev, generator)
        u_left = self._uniform(n, 0.0, 1.0, dev, generator)
        top = torch.minimum((u_top * (h - ch + 1)).long(), h - ch)  # randint(0, h - ch + 1)
        left = torch.minimum((u_left * (w - cw + 1)).long(), w - cw)
        top = torch.where(found, top, (h - fb_h) // 2)
        left = torch.where(found, left, (w - fb_w) // 2)
        return {"top": top, "left": left, "crop_height": ch, "crop_width": cw}

    def _fallback(self, h: int, w: int) -> tuple[int, int]:
        """torchvision's centre crop: (crop height, crop width)."""
        in_ratio = w / h
        if in_ratio < self.ratio[0]:
            return int(round(w / self.ratio[0])), w
        if in_ratio > self.ratio[1]:
            return h, int(round(h * self.ratio[1]))
        return h, w

    def _eval_params(self, images: torch.Tensor):
        n, dev = images.shape[0], images.device
        h, w = self._hw(images)
        top, left, ch, cw = aspect_window(h, w, self.height, self.width)
        return {
            key: torch.full((n,), value, device=dev, dtype=torch.long)
            for key, value in (
                ("top", top),
                ("left", left),
                ("crop_height", ch),
                ("crop_width", cw),
            )
        }

    def output_size(self, params: Any, height: int, width: int) -> tuple[int, int]:
        return self.height, self.width

    def warp(self, x: torch.Tensor, params: Any, interpolation: str) -> torch.Tensor:
        return resize_windows(
            x,
            params["top"],
            params["left"],
            params["crop_height"],
            params["crop_width"],
            (self.height, self.width),
            interpolation,
            self.antialias,
        )

    def point_matrix(self, params: Any, height: int, width: int) -> torch.Tensor:
        return window_matrix(
            params["top"],
            params["left"],
            params["crop_height"],
            params["crop_width"],
            self.height,
            self.width,
        )


def _positive_pair(layer: Any, name: str, value: Any, upper: float) -> tuple[float, float]:
    ok = (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and all(_is_number(v) for v in value)
        and 0 < value[0] <= value[1] <= upper
    )
    if not ok:
        bound = "" if math.isinf(upper) else f" <= {upper}"
        layer._fail(name, f"must be a pair (lo, hi) with 0 < lo <= hi{bound}", value)
    return float(value[0]), float(value[1])
