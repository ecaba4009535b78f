"""Discretization (Keras 3's ``keras.layers.Discretization``) with Keras's quantile sketch."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from . import _categorical as cat
from ._targets import as_tensor
from .base import MAX_ENCODING_DEPTH, Layer, check_bool


class Discretization(Layer):
    """Bucket numbers by boundaries: ``x < b[0]`` -> 0, ``b[i-1] <= x < b[i]`` -> i,
    ``x >= b[-1]`` -> ``len(b)`` (``numpy.digitize``, Keras's rule).

    Args:
        bin_boundaries: sorted boundaries (a list of floats); or
        num_bins: the number of bins ``adapt`` learns (give one of the two), at most 2**24
            (``preprocessing.base.MAX_ENCODING_DEPTH``: the encodings' width).
        epsilon: the error tolerance of ``adapt``'s approximate quantiles (default 0.01;
            smaller is more exact and uses more memory: about ``1 / epsilon`` points).
        output_mode: ``"int"`` (default), ``"one_hot"``, ``"multi_hot"`` or ``"count"``.
        sparse: a torch sparse COO tensor for the encodings.
        dtype: the encodings' dtype (Keras's): a float name, default ``"float32"``; the
            ``int`` mode always returns int32, as Keras's.
        **kwargs: Keras's base-layer arguments (``name``, ...; see ``Layer``).

    ``adapt`` is Keras's sketch (``keras/src/layers/preprocessing/discretization.py``):
    each batch is summarised by every ``n * epsilon``-th sorted value with its weight,
    summaries are merged and compressed to ``1 / epsilon`` points by interpolating the
    cumulative weights, in float32; the boundaries are the summary compressed to
    ``num_bins`` points, less the last. Batches cut the same way give Keras's boundaries.

    The boundaries live in the float32 buffer ``bin_boundaries`` (``state_dict``, exported
    programs) and in the config (after ``adapt`` too: ``get_config()["bin_boundaries"]``).

    Input: a number or a float/int tensor/array of any shape. Output: int mode int32 of the
    input's shape (Keras's dtype); encodings float32 ``(..., depth)``, depth
    ``len(bin_boundaries) + 1``. Runs in torch: any device, ``torch.export``.

    Raises:
        ValueError: both or neither of ``bin_boundaries`` / ``num_bins``, unsorted or
            non-finite boundaries, ``adapt`` without ``num_bins``, a call before the
            boundaries are known.

    Example:
        >>> layer = Discretization(bin_boundaries=[0.0, 1.0, 2.0])
        >>> layer(torch.tensor([[-1.5, 1.0, 3.4, 0.5]]))
        tensor([[0, 2, 3, 1]], dtype=torch.int32)
    """

    _image_layer = False  # not a Keras image layer: no bounding_box_format

    _checks_layout = False

    # buffers (register_buffer), declared for type checkers
    bin_boundaries: torch.Tensor

    def __init__(
        self,
        bin_boundaries: list[float] | None = None,
        num_bins: int | None = None,
        epsilon: float = 0.01,
        output_mode: str = "int",
        sparse: bool = False,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        out_name = cat.output_dtype(self, dtype, int_output=False)
        self.dtype, self._out_dtype = out_name, cat.torch_dtype(out_name)
        if (bin_boundaries is None) == (num_bins is None):
            both = (bin_boundaries, num_bins)
            self._fail("bin_boundaries/num_bins", "exactly one of the two must be set", both)
        self.num_bins = cat.check_int(
            self, "num_bins", num_bins, 0, optional=True, high=MAX_ENCODING_DEPTH
        )
        if (
            isinstance(epsilon, bool)
            or not isinstance(epsilon, (int, float))
            or not 0 < epsilon < 1
        ):
            self._fail("epsilon", "must be a number in (0, 1)", epsilon)
        self.epsilon = float(epsilon)
        self.output_mode = cat.check_choice(
            self, "output_mode", output_mode, ("int", "one_hot", "multi_hot", "count")
        )
        self.sparse = check_bool(self, "sparse", sparse)
        if self.sparse and self.output_mode == "int":
            self._fail("sparse", "needs output_mode other than 'int'", True)
        self.register_buffer("bin_boundaries", torch.zeros(0, dtype=torch.float32))
        self._config_values = {"bin_boundaries": None}
        self._known = False
        if bin_boundaries is not None:
            self._set_boundaries(cat.finite_floats(self, "bin_boundaries", bin_boundaries))

    def _check_boundaries(self, bounds: list[float], name: str = "bin_boundaries") -> None:
        """The boundaries' rules, wherever they come from (argument, adapt, checkpoint)."""
        cat.finite_floats(self, name, bounds)
        if any(b > a for b, a in zip(bounds, bounds[1:])):
            self._fail(name, "must be sorted in ascending order", bounds[:20])
        if self.output_mode != "int" and len(bounds) + 1 > MAX_ENCODING_DEPTH:
            self._fail(name, f"must make at most {MAX_ENCODING_DEPTH} bins", len(bounds) + 1)

    def _set_boundaries(self, bounds: list[float]) -> None:
        self._check_boundaries(bounds)
        device = self.bin_boundaries.device
        self.bin_boundaries = torch.tensor(bounds, dtype=torch.float32, device=device)
        self._config_values = {"bin_boundaries": [float(b) for b in self.bin_boundaries.tolist()]}
        self._known = True

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        saved = state_dict.get(prefix + "bin_boundaries")
        if isinstance(saved, torch.Tensor):  # checked before the buffer changes
            if saved.ndim != 1:
                self._fail("state_dict['bin_boundaries']", "must be 1-D", tuple(saved.shape))
            self._check_boundaries(saved.tolist(), "state_dict['bin_boundaries']")
        cat.resize_buffers_from(self, state_dict, prefix, ("bin_boundaries",))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        if prefix + "bin_boundaries" in state_dict:
            self._set_boundaries(self.bin_boundaries.tolist())

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Discretization:
        # An adapted layer's config holds both (as Keras's); the boundaries win.
        config = dict(config)
        if config.get("bin_boundaries") is not None and config.get("num_bins") is not None:
            bounds = config.pop("bin_boundaries")
            layer = super().from_config(config)
            layer._set_boundaries(cat.finite_floats(layer, "bin_boundaries", bounds))
            return layer
        return super().from_config(config)

    # ----------------------------------------------------------------- adapt
    def adapt(
        self,
        data: Any,
        batch_size: int | None = None,
        steps: int | None = None,
        progress: bool | None = None,
    ) -> None:
        """Learn ``num_bins`` boundaries of ``data`` (an array, or an iterable of batches
        such as a ``datapipe.Dataset``; tuple elements give their first component),
        streaming; see the class docstring for the sketch. ``batch_size`` cuts an array
        into batches (default: one batch, as Keras).

        Raises:
            ValueError: the layer has no ``num_bins``, or ``data`` has no values.
        """
        if self.num_bins is None:
            raise ValueError(
                "Discretization.adapt: the layer was built with bin_boundaries; use num_bins"
            )
        summary = np.zeros((2, 0), dtype=np.float32)

        def update(batch: Any) -> None:
            nonlocal summary
            values = cat.to_numpy(batch).astype(np.float32)
            if values.size:
                summary = merge_summaries(summarize(values, self.epsilon), summary, self.epsilon)

        cat.run_adapt(self, data, batch_size, steps, progress, update)
        if summary.shape[1] == 0:
            raise ValueError("Discretization.adapt: data has no values")
        self._set_boundaries(get_bin_boundaries(summary, self.num_bins).tolist())

    # ------------------------------------------------------------------ call
    def forward(self, inputs: Any) -> torch.Tensor:  # type: ignore[override]  # no generator
        if not self._known:
            raise ValueError(
                "Discretization: no bin boundaries; pass bin_boundaries= or call adapt()"
            )
        x = as_tensor(inputs)
        if x.is_complex() or x.dtype == torch.bool:
            self._fail("input", "must be real numbers", f"dtype {x.dtype}")
        x = x.to(torch.float32)  # Keras's input dtype (floatx)
        bounds = self.bin_boundaries.to(x.device)
        # right=True: b[i-1] <= x < b[i] -> i, numpy.digitize's (and Keras's) rule.
        indices = torch.bucketize(x, bounds, right=True)
        if self.output_mode == "int":
            return indices.to(torch.int32)
        out = cat.encode(indices, self.output_mode, bounds.numel() + 1, self._out_dtype)
        return out.to_sparse() if self.sparse else out


# Keras 3's approximate quantile sketch (discretization.py), unchanged in behaviour.
def summarize(values: np.ndarray, epsilon: float) -> np.ndarray:
    """Every ``max(n * epsilon, 1)``-th sorted value with that step as its weight."""
    values = np.sort(np.reshape(values, [-1]))
    step = max(values.size / (1.0 / epsilon), 1)
    boundaries = values[int(step - 1) :: int(step)]
    return np.stack([boundaries, np.ones_like(boundaries) * step])


def merge_summaries(prev: np.ndarray, nxt: np.ndarray, epsilon: float) -> np.ndarray:
    merged = np.concatenate((prev, nxt), axis=1)
    merged = np.take(merged, np.argsort(merged[0]), axis=1)
    return compress_summary(merged, epsilon)


def get_bin_boundaries(summary: np.ndarray, num_bins: int) -> np.ndarray:
    return compress_summary(summary, 1.0 / num_bins)[0, :-1]


def compress_summary(summary: np.ndarray, epsilon: float) -> np.ndarray:
    """Interpolate the summary to ``1 / epsilon`` points of equal cumulative weight."""
    if summary.shape[1] * epsilon < 1:
        return summary
    percents = epsilon + np.arange(0.0, 1.0, epsilon)
    cum_weights = summary[1].cumsum()
    cum_weight_percents = cum_weights / cum_weights[-1]
    new_bins = np.interp(percents, cum_weight_percents, summary[0])
    cum_weights = np.interp(percents, cum_weight_percents, cum_weights)
    new_weights = cum_weights - np.concatenate((np.array([0]), cum_weights[:-1]))
    return np.stack((new_bins, new_weights)).astype("float32")
