"""Pipeline: layers in order, consecutive matrix layers fused into one resampling."""

from __future__ import annotations

from typing import Any, cast

import torch

from . import _targets
from .affine import AffineLayer
from .base import Layer, RandomLayer, call_training, layer_from_config, serialize_layer


def _groups(layers: list[Layer]) -> list[list[Layer]]:
    """Split into runs: each run of ``AffineLayer``s (anything given by a per-image matrix)
    with one set of fill settings becomes one group (one warp); every other layer is a
    group of its own."""
    groups: list[list[Layer]] = []
    key: tuple | None = None
    for layer in layers:
        if isinstance(layer, AffineLayer) and groups and isinstance(groups[-1][0], AffineLayer):
            k = layer._fill_key()
            if k is None or key is None or k == key:
                groups[-1].append(layer)
                key = key or k
                continue
        groups.append([layer])
        key = layer._fill_key() if isinstance(layer, AffineLayer) else None
    return groups


class Pipeline(Layer):
    """Apply ``layers`` in order, fusing consecutive matrix layers (Keras's name).

    Runs of ``AffineLayer``s (``RandomFlip``, ``RandomRotation``, ``RandomZoom``,
    ``RandomTranslation``, ``RandomShear``, ``RandomPerspective``, and any other layer
    built on ``AffineLayer``) whose ``fill_mode``/``interpolation``/``fill_value`` agree
    (flips have none, so they join any run) compose into one 3x3 matrix per image and ONE
    resampling. This equals the layers applied one by one wherever every intermediate
    sample lies inside the image and at most one of them falls between pixels (flips and
    whole-pixel moves are exact); otherwise the fused result is the sharper one: it
    interpolates the original image once instead of interpolating interpolations, and
    samples the original image's extension directly (no fill seen through fill). Boxes
    and keypoints of a dict input go through the composed matrix (a box is the extent of
    the composed moved box, at least as tight as layer-by-layer extents); masks are
    resampled once with ``"nearest"``. Runs of flips alone run layer by layer (exact
    copies). Other layers run as themselves, in order; nested Pipelines receive
    ``generator`` too.

    Args:
        layers: layers, or their ``serialize_layer`` dicts. All must share ``data_format``.
        seed: unused by the Pipeline itself (each layer draws from its own seed); kept
            so every layer takes one.
        data_format: must equal the layers' ``data_format``; None (default): the
            layers' shared one (Keras's ``Pipeline`` has no layout of its own, so its
            config names none), or ``preprocessing.image_data_format()`` for no layers
            or layers that differ (which is then refused).
        dtype: a dtype policy name or None: the input images are first cast to its
            compute dtype (each layer then applies its own policy).

    ``forward(data, generator=None, training=None)``: an image, a batch or a dict of
    targets (``Layer``); a given generator is passed to every random layer. In ``eval()``
    the random layers are the identity (RandomCrop centre-crops); Keras's ``training=``
    (True / False) sets the mode of every layer for one call (``Layer``).

    Raises:
        ValueError: a non-layer entry, a ``data_format`` mismatch, or fused layers that
            disagree on ``bounding_box_format`` when boxes are given.
    """

    _image_layer = False  # not a Keras image layer: no bounding_box_format

    def __init__(
        self,
        layers: list[Any],
        seed: int | None = None,
        data_format: str | None = None,
        dtype: str | None = None,
        **kwargs: Any,
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
        formats = {layer.data_format for layer in built}
        if data_format is None and len(formats) == 1:
            data_format = formats.pop()
        super().__init__(data_format=data_format, dtype=dtype, **kwargs)
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

    def forward(self, data: Any, generator: Any = None) -> Any:
        is_dict = isinstance(data, dict)
        if is_dict:
            _targets.check_keys(self, data)
        batch, single = self._as_batch(data["images"] if is_dict else data)
        x: Any = self._unbatch(self._to_float(batch), single)
        if is_dict:
            x = dict(data, images=x)
        for group in _groups([cast(Layer, m) for m in self.layers]):
            anchor = None
            if len(group) > 1:  # only AffineLayers form groups of several
                fusable = [a for a in group if isinstance(a, AffineLayer)]  # all of them
                anchor = next((a for a in fusable if a._fill_key() is not None), None)
            if anchor is not None:
                x = self._fused(fusable, anchor, x, generator)
                continue
            for layer in group:
                if isinstance(layer, (RandomLayer, Pipeline)):
                    x = layer(x, generator=generator)
                else:
                    x = layer(x)
        return x

    def _fused(self, group: list[AffineLayer], anchor: AffineLayer, data: Any, generator: Any):
        if not call_training(self):
            return data
        is_dict = isinstance(data, dict)
        batch, single = anchor._as_batch(data["images"] if is_dict else data)
        h, w = self._hw(batch)
        matrix = None
        for layer in group:
            m = layer.matrix(layer._call_hook("get_random_transformation", batch, generator), h, w)
            # Layer A then B samples the input at M_A @ M_B @ p.
            matrix = m if matrix is None else matrix @ m
        params: dict[str, Any] = {
            "matrix": matrix,
            "projective": any(a._projective for a in group),
            "input_shape": tuple(batch.shape),
        }
        if not is_dict:
            return anchor._unbatch(anchor._images_out(batch, params), single)
        formats = {a.bounding_box_format for a in group if a.bounding_box_format}
        if "bounding_boxes" in data and len(formats) > 1:
            self._fail("layers", "fused into one warp must agree on bounding_box_format", formats)
        if formats:
            params["bounding_box_format"] = formats.pop()
        return anchor._apply_targets(data, batch, single, params)
