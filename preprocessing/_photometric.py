"""What the photometric layers share: colour conversions, mapping value ranges to [0, 255]
and back, and applying an operation to only the samples a draw selected (their factor and
``value_range`` arguments are the layer base's: ``Layer._set_factor`` /
``_set_value_range``).

Colour conversions follow Keras 3's backends (``keras.src.backend.*.image``): grayscale
weights ``(0.2989, 0.587, 0.114)`` (ITU-R 601, as tf.image and torchvision), and the HSV
formulas of dm_pix that Keras copies. They are written here in a form that never divides
by the value channel (see ``shift_hue`` / ``scale_saturation``), so they work on any
non-negative range without rescaling.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import torch

from .base import Layer, RandomLayer

GRAY_WEIGHTS = (0.2989, 0.587, 0.114)


# The arguments every colour layer's docstring ends with (``common_args`` fills them in).
_COMMON_ARGS = """seed: seeds the layer's draws; None uses torch's global RNG.
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``.
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``)."""

_C = TypeVar("_C", bound=type)


def common_args(cls: _C) -> _C:
    """Fill ``{common}`` in ``cls``'s docstring with the seed / data_format / dtype
    arguments (a class decorator; doctests read the filled text)."""
    cls.__doc__ = (cls.__doc__ or "").format(common=_COMMON_ARGS)
    return cls


class FactorLayer(RandomLayer):
    """Base of the random colour layers with one ``factor`` and a ``value_range``: Keras's
    ``BaseImagePreprocessingLayer`` with ``_USE_BASE_FACTOR``, whose constructor takes the
    factor and ``_set_factor`` reads it by the class's ``_FACTOR_BOUNDS``.

    ``__init__(factor, value_range=(0, 255), data_format=None, seed=None, dtype=None)``,
    the argument order of Keras's ``RandomColorDegeneration``, ``RandomHue``,
    ``RandomSaturation``, ``RandomSharpness`` and ``RandomPosterization`` (subclasses
    with Keras's other orders forward to it). A subclass sets how its factor reads
    (``_factor_bounds`` and ``_factor_number``: ``Layer._set_factor``) and implements
    ``transform_images``; the default draw is one ``factor`` per image from the factor's
    range (``{"factor": (B,) float32}``).
    """

    _abstract = True
    _factor_bounds: ClassVar[tuple[float, float]] = (0.0, 1.0)
    _factor_number: ClassVar[str] = "from_low"  # a number f reads (low, f)

    def __init__(
        self,
        factor: float | tuple[float, float],
        value_range: tuple[float, float] = (0, 255),
        data_format: str | None = None,
        seed: int | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(seed=seed, data_format=data_format, dtype=dtype, **kwargs)
        self._take_factor(factor)
        self._set_value_range(value_range)

    def _take_factor(self, factor: Any) -> None:
        """Check and keep ``factor`` (``Layer._set_factor`` by the class's rule)."""
        self._set_factor(factor, bounds=self._factor_bounds, number=self._factor_number)

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        return {"factor": self._draw_factor(images, generator)}


class SeedFirstFactorLayer(FactorLayer):
    """``FactorLayer`` with Keras's ``RandomBrightness`` / ``RandomContrast`` argument order:
    ``__init__(factor, value_range=(0, 255), seed=None, data_format=None, dtype=None)``."""

    _abstract = True

    def __init__(
        self,
        factor: float | tuple[float, float],
        value_range: tuple[float, float] = (0, 255),
        seed: int | None = None,
        data_format: str | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(factor, value_range, data_format, seed, dtype, **kwargs)


def check_channels(layer: Layer, batch: torch.Tensor, allowed: tuple[int, ...]) -> int:
    c = batch.shape[layer._channel_axis]
    if c not in allowed:
        raise ValueError(
            f"{type(layer).__name__}: expected images with {' or '.join(map(str, allowed))} "
            f"channel(s) along the channel axis of {layer.data_format!r}; got shape "
            f"{tuple(batch.shape)}"
        )
    return c


def grayscale(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Luma ``0.2989 R + 0.587 G + 0.114 B`` with the channel axis kept (size 1); a
    one-channel image is returned as is."""
    if x.shape[dim] == 1:
        return x
    r, g, b = x.unbind(dim)
    w0, w1, w2 = GRAY_WEIGHTS
    return (r * w0).add_(g, alpha=w1).add_(b, alpha=w2).unsqueeze(dim)


def per_image(values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """(B,) -> (B, 1, 1, 1) in ``like``'s dtype, for broadcasting over one image."""
    return values.to(like.dtype).view(-1, 1, 1, 1)


def shift_hue(x: torch.Tensor, dim: int, shift: torch.Tensor) -> torch.Tensor:
    """Rotate the hue of RGB images ``x`` (values >= 0) by ``shift`` (B,) turns.

    Keras's ``rgb_to_hsv`` -> ``h + shift`` -> ``hsv_to_rgb`` (dm_pix's formulas), with
    ``v * (1 - s + s * d) = v - range * (1 - d)``: the value and the range (max - min) of a
    pixel are kept, only where its hue sits moves.
    """
    r, g, b = x.unbind(dim)
    value = torch.maximum(torch.maximum(r, g), b)
    rng = value - torch.minimum(torch.minimum(r, g), b)
    norm = 1.0 / (6.0 * torch.where(rng > 0, rng, torch.ones_like(rng)))
    hue = torch.where(value == g, norm * (b - r) + 2.0 / 6.0, norm * (r - g) + 4.0 / 6.0)
    hue = torch.where(value == r, norm * (g - b), hue)
    hue = torch.where(rng > 0, hue, torch.zeros_like(hue))
    dh = torch.remainder(hue + shift.to(x.dtype).view(-1, 1, 1), 1.0).mul_(6.0)
    out = []
    for centre, sign in ((3.0, 1.0), (2.0, -1.0), (4.0, -1.0)):
        if sign > 0:  # red: clip(|dh - 3| - 1, 0, 1)
            d = (dh - centre).abs_().sub_(1.0).clamp_(0.0, 1.0)
        else:  # green / blue: clip(2 - |dh - c|, 0, 1)
            d = (dh - centre).abs_().neg_().add_(2.0).clamp_(0.0, 1.0)
        out.append(value - rng * (1.0 - d))
    return torch.stack(out, dim)


def scale_saturation(x: torch.Tensor, dim: int, factor: torch.Tensor) -> torch.Tensor:
    """Multiply the HSV saturation of RGB images ``x`` (values >= 0) by ``factor`` (B,),
    clipped to [0, 1], hue and value kept.

    With ``s = range / v`` each channel is ``c = v - range * (1 - d)``; the new saturation
    ``clip(s * f, 0, 1)`` gives ``v - clip(f, 0, v / range) * (v - c)``: no HSV round
    trip. A negative ``f`` (RandomSaturation's Keras-written ``(-a, a)`` pairs) is gray.
    """
    value = x.amax(dim=dim, keepdim=True)
    rng = value - x.amin(dim=dim, keepdim=True)
    f = per_image(factor, x)
    k = torch.minimum(f, value / torch.where(rng > 0, rng, torch.full_like(rng, math.inf)))
    return value - k.clamp_(min=0.0) * (value - x)


def _eager_cpu(x: torch.Tensor) -> bool:
    return x.device.type == "cpu" and not torch.compiler.is_compiling()


def gather_rows(x: torch.Tensor, rows: list[int]) -> torch.Tensor:
    """``x[rows]`` as a new tensor. On CPU one copy per row: ``index_select`` (and
    ``index_copy_``) along the batch axis of image batches measured here 20-100x slower
    than copying the rows one by one (64x3x224x224 float32, half the rows)."""
    if _eager_cpu(x):
        return torch.stack([x[i] for i in rows]) if rows else x[:0].clone()
    return x.index_select(0, torch.tensor(rows, dtype=torch.int64, device=x.device))


def scatter_rows(out: torch.Tensor, rows: list[int], src: torch.Tensor) -> None:
    """``out[rows] = src`` in place (see ``gather_rows`` for why row by row on CPU)."""
    src = src.to(out.dtype)
    if _eager_cpu(out):
        for j, i in enumerate(rows):
            out[i].copy_(src[j])
        return
    out.index_copy_(0, torch.tensor(rows, dtype=torch.int64, device=out.device), src)


def apply_where(
    x: torch.Tensor,
    mask: torch.Tensor,
    fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    rest: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """``fn(x[i], i)`` for the samples where ``mask`` (B,) holds, ``x[i]`` elsewhere (or
    ``rest(x)[i]``: ``rest`` maps the whole batch to a new tensor, e.g. a clip, so that a
    layer whose ``fn`` already clips does not take a second pass over every output).

    ``fn(subset, index)`` receives a run of samples and their indices (to pick their
    parameters). On CPU the mask is read on the host (no device sync there) and each run
    of consecutive selected samples is computed from its slice of ``x`` (a view: nothing
    is gathered) and written over a copy of ``x`` (``flip_batch``'s scheme); unselected
    samples are never computed. On other devices and under
    ``torch.compile`` one ``torch.where`` over the whole batch keeps everything on the
    device without a sync.
    """
    n = x.shape[0]
    if n == 0:
        # An empty batch (a filtered-out one): grouped convolutions refuse 0 groups.
        return x if rest is None else rest(x)
    if not _eager_cpu(x):
        everyone = torch.arange(n, device=x.device)
        return torch.where(mask.view(-1, 1, 1, 1), fn(x, everyone), x if rest is None else rest(x))
    chosen = mask.tolist()
    if all(chosen):
        return fn(x, torch.arange(n))
    if not any(chosen):
        return x if rest is None else rest(x)
    # One full-batch copy first (a parallel kernel that also takes the page faults of the
    # fresh tensor), then the selected runs rewritten: filling a fresh tensor run by run
    # measured slower (flip_batch's finding).
    out = x.clone() if rest is None else rest(x)
    start = 0
    for end in range(1, n + 1):
        if end < n and chosen[end] == chosen[start]:
            continue
        if chosen[start]:
            out[start:end] = fn(x[start:end], torch.arange(start, end))
        start = end
    return out


def take(params: Any, index: torch.Tensor, n: int) -> Any:
    """The parameters of the samples ``index`` of a draw for ``n`` samples: every tensor
    with a leading axis of ``n`` is indexed; ``input_shape`` gets the new batch size."""
    if isinstance(params, dict):
        out = {k: take(v, index, n) for k, v in params.items()}
        if isinstance(params.get("input_shape"), tuple):
            out["input_shape"] = (index.numel(), *params["input_shape"][1:])
        return out
    if isinstance(params, (list, tuple)):
        return type(params)(take(v, index, n) for v in params)
    if isinstance(params, torch.Tensor) and params.ndim >= 1 and params.shape[0] == n:
        return params.index_select(0, index.to(params.device))
    return params


def to_255(x: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    """``x`` from [lo, hi] to [0, 255] in Keras's order of operations (``(x - lo) / (hi -
    lo) * 255``, which decides where truncating ops cut); ``x`` itself when the range is
    already (0, 255), else a fresh tensor. Steps that change nothing (``- 0``, ``/ 1``)
    are skipped: they are exact, and each is a pass over the batch."""
    if (lo, hi) == (0.0, 255.0):
        return x
    y = x - lo if lo else None
    if hi - lo != 1.0:
        y = y.div_(hi - lo) if y is not None else x / (hi - lo)
    return y.mul_(255.0) if y is not None else x * 255.0


def from_255(y: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    """Undo ``to_255`` on a fresh tensor ``y`` (in place; identity steps skipped)."""
    if (lo, hi) == (0.0, 255.0):
        return y
    y = y.div_(255.0)
    if hi - lo != 1.0:
        y = y.mul_(hi - lo)
    return y.add_(lo) if lo else y
