"""Pipeline: layers in order, consecutive geometric layers fused into one resampling."""

from __future__ import annotations

from typing import Any

import torch

from .affine import AffineLayer, affine_transform
from .base import Layer, RandomLayer, layer_from_config, serialize_layer
from .flip import RandomFlip

_GEOMETRIC = (RandomFlip, AffineLayer)


def _fill_key(layer: Layer) -> tuple | None:
    """Resampling settings of a geometric layer (None: a flip, which has none)."""
    if isinstance(layer, AffineLayer):
        return (layer.fill_mode, layer.interpolation, float(layer.fill_value))
    return None


def _groups(layers: list[Layer]) -> list[list[Layer]]:
    """Split into runs: each run of geometric layers with one set of fill settings
    becomes one group (one warp); every other layer is a group of its own."""
    groups: list[list[Layer]] = []
    key: tuple | None = None
    for layer in layers:
        if isinstance(layer, _GEOMETRIC) and groups and isinstance(groups[-1][0], _GEOMETRIC):
            k = _fill_key(layer)
            if k is None or key is None or k == key:
                groups[-1].append(layer)
                key = key or k
                continue
        groups.append([layer])
        key = _fill_key(layer) if isinstance(layer, _GEOMETRIC) else None
    return groups


class Pipeline(Layer):
    """Apply ``layers`` in order, fusing consecutive geometric layers (Keras's name).

    Runs of ``RandomFlip``, ``RandomRotation``, ``RandomZoom`` and ``RandomTranslation``
    whose ``fill_mode``/``interpolation``/``fill_value`` agree (flips have none, so they
    join any run) compose into one 3x3 matrix per image and ONE resampling. This equals
    the layers applied one by one wherever every intermediate sample lies inside the
    image and at most one of them falls between pixels (flips and whole-pixel moves are
    exact); otherwise the fused result is the sharper one: it interpolates the original
    image once instead of interpolating interpolations, and samples the original
    image's extension directly (no fill seen through fill). Other layers run as
    themselves, in order; nested Pipelines receive ``generator`` too.

    Args:
        layers: layers, or their ``serialize_layer`` dicts. All must share ``data_format``.
        seed: unused by the Pipeline itself (each layer draws from its own seed); kept
            so every layer takes one.
        data_format: must equal the layers' ``data_format``; None (default):
            ``preprocessing.image_data_format()``, as for every layer.

    ``forward(images, generator=None)``: a given generator is passed to every random
    layer. In ``eval()`` the random layers are the identity (RandomCrop centre-crops).

    Raises:
        ValueError: a non-layer entry or a ``data_format`` mismatch.
    """

    def __init__(
        self,
        layers: list[Any],
        seed: int | None = None,
        data_format: str | None = None,
    ) -> None:
        if not isinstance(layers, (list, tuple)):
            raise ValueError(f"Pipeline: layers must be a list; got {type(layers).__name__}")
        built = [layer_from_config(x) if isinstance(x, dict) else x for x in layers]
        for layer in built:
            if not isinstance(layer, Layer):
                raise ValueError(
                    f"Pipeline: layers must hold preprocessing layers or their configs; got "
                    f"{layer!r}"
                )
        super().__init__(data_format=data_format)
        for layer in built:
            if layer.data_format != self.data_format:
                self._fail(
                    "layers",
                    f"must all use data_format={self.data_format!r}",
                    f"{type(layer).__name__}(data_format={layer.data_format!r})",
                )
        self.seed = seed
        self.layers = torch.nn.ModuleList(built)
        self._config_values = {"layers": [serialize_layer(x) for x in built]}

    def forward(self, images: Any, generator: Any = None) -> torch.Tensor:
        batch, single = self._as_batch(images)
        x = self._to_float(batch)
        for group in _groups(list(self.layers)):
            if isinstance(group[0], _GEOMETRIC):
                x = self._warp(group, x, generator)
            elif isinstance(group[0], (RandomLayer, Pipeline)):
                x = group[0](x, generator=generator)
            else:
                x = group[0](x)
        return self._unbatch(x, single)

    def _warp(self, group: list[Layer], x: torch.Tensor, generator: Any) -> torch.Tensor:
        if not self.training:
            return x
        if len(group) == 1:
            return group[0](x, generator=generator)
        h, w = self._hw(x)
        matrix = None
        for layer in group:
            params = layer.get_random_transformation(x, generator)
            m = layer.matrix(params, h, w)
            # Layer A then B samples the input at M_A @ M_B @ p.
            matrix = m if matrix is None else matrix @ m
        key = next((_fill_key(a) for a in group if _fill_key(a) is not None), None)
        if key is None:  # flips only: exact pixel copies, no resampling needed
            key = ("nearest", "nearest", 0.0)
        fill_mode, interpolation, fill_value = key
        out = affine_transform(self._to_nchw(x), matrix, interpolation, fill_mode, fill_value)
        return self._from_nchw(out)
