"""What RandAugment and AugMix share: Keras 3's op set at one magnitude, drawing every op's
parameters for several slots in one call, and applying a slot (each sample its own op)
computing each op only on the samples that chose it.
"""

from __future__ import annotations

from typing import Any, cast

import torch

from ._photometric import gather_rows, scatter_rows, take
from ._random import derive_seed
from .auto_contrast import AutoContrast
from .base import Layer
from .brightness import RandomBrightness
from .color_degeneration import RandomColorDegeneration
from .contrast import RandomContrast
from .equalization import Equalization
from .posterization import RandomPosterization
from .rotation import RandomRotation
from .sharpness import RandomSharpness
from .shear import RandomShear
from .solarization import Solarization
from .translation import RandomTranslation

GEOMETRIC = ("random_shear", "random_translation", "random_rotation")


def build_ops(
    names: tuple[str, ...],
    factor: tuple[float, float],
    value_range: Any,
    interpolation: str,
    seed: int | None,
    data_format: str,
    bounding_box_format: str | None,
    dtype: str | None,
) -> torch.nn.ModuleDict:
    """Keras 3's sub-layers of RandAugment / AugMix, each configured as Keras configures
    it from the magnitude range ``factor`` = (lower, upper); sub-layer ``k`` is seeded
    with ``derive_seed(seed, k)``."""
    geo: dict[str, Any] = dict(
        interpolation=interpolation,
        data_format=data_format,
        bounding_box_format=bounding_box_format,
        dtype=dtype,
    )
    color: dict[str, Any] = dict(value_range=value_range, data_format=data_format, dtype=dtype)
    builders = {
        "random_shear": lambda s: RandomShear(x_factor=factor, y_factor=factor, seed=s, **geo),
        "random_translation": lambda s: RandomTranslation(factor, factor, seed=s, **geo),
        "random_rotation": lambda s: RandomRotation(factor, seed=s, **geo),
        "random_brightness": lambda s: RandomBrightness(factor, seed=s, **color),
        "random_color_degeneration": lambda s: RandomColorDegeneration(factor, seed=s, **color),
        "random_contrast": lambda s: RandomContrast(factor, seed=s, **color),
        "random_sharpness": lambda s: RandomSharpness(factor, seed=s, **color),
        "random_posterization": lambda s: RandomPosterization(
            max(1, int(8 * factor[1])), seed=s, **color
        ),
        "solarization": lambda s: Solarization(factor, factor, seed=s, **color),
        "auto_contrast": lambda s: AutoContrast(**color),
        "equalization": lambda s: Equalization(**color),
    }
    return torch.nn.ModuleDict(
        {name: builders[name](derive_seed(seed, k)) for k, name in enumerate(names)}
    )


def shape_only(batch: torch.Tensor, slots: int) -> torch.Tensor:
    """A tensor shaped like ``slots`` copies of ``batch`` stacked along the batch axis,
    backed by one element: what an op's ``get_random_transformation`` reads (shape,
    device) to draw for every slot at once, without allocating the images."""
    shape = (slots * batch.shape[0], *batch.shape[1:])
    return batch.new_empty_strided(shape, (0,) * batch.ndim)


def draw_slots(
    ops: torch.nn.ModuleDict, batch: torch.Tensor, slots: int, generator: Any
) -> list[dict[str, Any]]:
    """Every op's parameters for ``slots`` slots of ``batch``: one draw per op (for
    ``slots * B`` samples), split into per-slot dicts ``{op name: params}``."""
    n = batch.shape[0]
    stacked = shape_only(batch, slots)
    draws = {}
    for name, op in ops.items():
        layer = cast(Layer, op)
        params = (
            layer._call_hook("get_random_transformation", stacked, generator)
            if layer._random
            else {}
        )
        draws[name] = params if params is not None else {}
    out = []
    for s in range(slots):
        index = torch.arange(s * n, (s + 1) * n, device=batch.device)
        slot = {}
        for name, params in draws.items():
            slot[name] = take(params, index, slots * n)
            slot[name]["input_shape"] = tuple(batch.shape)
        out.append(slot)
    return out


def _subset(value: Any, rows: list[int]) -> Any:
    if isinstance(value, dict):
        return {k: _subset(v, rows) for k, v in value.items()}
    if isinstance(value, torch.Tensor):
        return gather_rows(value, rows)
    return value


def _clone(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return value.clone() if isinstance(value, torch.Tensor) else value


def _put(dst: Any, rows: list[int], src: Any) -> None:
    if isinstance(dst, dict):
        for k in dst:
            if isinstance(dst[k], torch.Tensor):
                _put(dst[k], rows, src[k])
        return
    scatter_rows(dst, rows, src)


def _where(mask: torch.Tensor, new: Any, old: Any) -> Any:
    if isinstance(old, dict):
        return {k: _where(mask, new[k], old[k]) if k in new else old[k] for k in old}
    if not isinstance(old, torch.Tensor):
        return old
    m = mask.view(-1, *([1] * (old.ndim - 1))).to(old.device)
    return torch.where(m, new.to(old.dtype) if new.dtype != old.dtype else new, old)


def apply_slot(
    ops: torch.nn.ModuleDict,
    method: str,
    value: Any,
    choice: torch.Tensor,
    slot: dict[str, Any],
    n: int,
) -> Any:
    """Apply op ``choice[i]`` (an index into ``ops``; ``len(ops)`` or more: no op) with its
    parameters ``slot`` to sample ``i`` of ``value`` (a batch of images, masks or
    keypoints, or a boxes dict), calling each op's ``method`` (``"transform_images"``,
    ...) on the samples that chose it only. Ops that leave this target alone (a
    photometric op and boxes) are skipped.

    In eager mode the per-op counts are read on the host (one device sync off CPU); under
    ``torch.compile`` every op runs on the whole batch and ``torch.where`` picks, which
    traces without data-dependent shapes.
    """
    names = [name for name in ops if cast(Layer, ops[name])._overrides(method)]
    if method == "transform_images":
        names = list(ops)
    position = {name: k for k, name in enumerate(ops)}
    if torch.compiler.is_compiling():
        out = value
        for name in names:
            new = cast(Layer, ops[name])._call_hook(method, value, slot[name])
            out = _where(choice == position[name], new, out)
        return out
    counts = torch.bincount(choice, minlength=len(ops) + 1).tolist()
    order = torch.argsort(choice, stable=True)
    starts = [0]
    for c in counts:
        starts.append(starts[-1] + c)
    # Every row is rewritten when each sample chose an op of this target: no copy first.
    covered = sum(counts[position[name]] for name in names) == n
    out = None
    for name in names:
        k = position[name]
        if counts[k] == 0:
            continue
        if counts[k] == n:
            return cast(Layer, ops[name])._call_hook(method, value, slot[name])
        index = order[starts[k] : starts[k + 1]]
        rows = index.tolist()
        sub = cast(Layer, ops[name])._call_hook(
            method, _subset(value, rows), take(slot[name], index, n)
        )
        if out is None:
            fresh = covered and isinstance(value, torch.Tensor)
            out = torch.empty_like(value, dtype=sub.dtype) if fresh else _clone(value)
        _put(out, rows, sub)
    return value if out is None else out
