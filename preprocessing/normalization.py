"""Normalization (Keras's ``keras.layers.Normalization``) with a streaming ``adapt``."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import torch

from ._targets import as_tensor
from .base import Layer, check_bool, check_layout

_EPSILON = 1e-7  # keras.backend.epsilon(): the floor on the standard deviation
_DEFAULT_BATCH = 256


class Normalization(Layer):
    """``(x - mean) / sqrt(variance)`` with statistics per channel (or other axes).

    Args:
        axis: which axes keep their own statistics. ``"channel"`` (default): the channel
            axis of ``data_format`` (Keras's default ``-1`` for channels-last data).
            ``None``: one scalar mean/variance (Keras's ``axis=None``). An int or a list
            of ints: axes of one image counted from the end (``-1`` is the last axis), so
            they mean the same for one image and a batch; they must be negative.
        mean, variance: fixed statistics (a number, or nested lists shaped like the kept
            axes); give both or neither. Otherwise call ``adapt`` (or load a state_dict).
        invert: apply the inverse, ``x * sqrt(variance) + mean``.
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``.
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``): outputs are in
            its compute dtype, the statistics in its variable dtype (float32 under
            ``"mixed_float16"`` / ``"mixed_bfloat16"``, as Keras keeps variables).

    The statistics live in buffers ``mean`` and ``variance`` (in ``state_dict`` and in
    exported programs), float64 without a policy; ``adapt`` computes in float64 whatever
    the policy. After ``adapt`` (or ``load_state_dict``) ``get_config()`` carries them as
    ``mean``/``variance`` too, so ``layer_from_config(serialize_layer(layer))`` alone
    rebuilds an adapted layer. Statistics from ``adapt`` and from a checkpoint pass the
    constructor's checks (finite, variance >= 0, shaped like the kept axes) before the
    layer changes: data holding a NaN or inf raises instead of storing a NaN mean.

    A feature of zero variance is only centred (scale 1, as scikit-learn's
    ``StandardScaler``; Keras divides by its 1e-7 floor, which turns a value 5 off the mean
    into 5e7); ``adapt`` stores zero for a feature that is constant up to
    rounding (scikit-learn's bound, ``var <= n eps var + (n eps mean)^2``). Other standard
    deviations are floored at 1e-7, as Keras.

    Input: a rank-3 image, a rank-4 batch or a dict of targets (only ``images`` change);
    or tabular data, a rank-2 batch ``(batch, features)`` or one rank-1 row ``(features,)``
    (Keras's ``axis=-1`` on 2-D input), with ``axis`` ``"channel"`` or ``-1`` (one
    mean/variance per feature; the statistics' one kept axis is the feature axis, so
    ``mean=[...]`` lists features) or None. Output: same shape; float dtypes are kept,
    integer inputs come back as float32.

    Raises:
        ValueError: a bad argument, a call before the statistics are known, an input
            whose rank or kept-axis sizes do not match; in ``adapt``, data whose statistics
            are not finite; in ``load_state_dict``, statistics that are not (naming them).

    Example:
        >>> import torch
        >>> norm = Normalization(mean=[1.0, 10.0], variance=[4.0, 100.0])
        >>> norm(torch.tensor([[[3.0]], [[30.0]]]))
        tensor([[[1.]],
        <BLANKLINE>
                [[2.]]])
    """

    _image_layer = False  # not a Keras image layer: no bounding_box_format

    # buffers (register_buffer), declared for type checkers
    mean: torch.Tensor
    variance: torch.Tensor

    def __init__(
        self,
        axis: str | int | list[int] | None = "channel",
        mean: float | list | None = None,
        variance: float | list | None = None,
        invert: bool = False,
        data_format: str | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(data_format=data_format, dtype=dtype, **kwargs)
        self._keep = self._resolve_axis(axis)
        # Only per-channel statistics depend on where the channels are.
        self._checks_layout = axis == "channel"
        self.axis = axis
        self.invert = check_bool(self, "invert", invert)
        self._config_values = {"mean": mean, "variance": variance}
        if (mean is None) != (variance is None):
            self._fail("mean/variance", "must both be given or both be None", (mean, variance))
        self.register_buffer("mean", torch.zeros(0, dtype=self.variable_dtype))
        self.register_buffer("variance", torch.zeros(0, dtype=self.variable_dtype))
        if mean is not None:
            self._set_stats(
                self._as_stat("mean", mean), self._as_stat("variance", variance), "mean/variance"
            )

    # ------------------------------------------------------------------ axes
    def _resolve_axis(self, axis: Any) -> tuple[int, ...]:
        """Kept axes as indices 0..2 of one image in this data_format."""
        if axis == "channel":
            return (0,) if self.data_format == "channels_first" else (2,)
        if axis is None:
            return ()
        axes = [axis] if isinstance(axis, int) and not isinstance(axis, bool) else axis
        if not isinstance(axes, (list, tuple)) or not all(
            isinstance(a, int) and not isinstance(a, bool) and -3 <= a <= -1 for a in axes
        ):
            self._fail("axis", "must be 'channel', None, or negative ints in [-3, -1]", axis)
        return tuple(sorted({3 + a for a in axes}))

    def _as_stat(self, name: str, value: Any) -> torch.Tensor:
        arr = np.asarray(value, dtype=np.float64)
        if not np.isfinite(arr).all() or (name == "variance" and (arr < 0).any()):
            what = "must be finite and >= 0" if name == "variance" else "must be finite"
            self._fail(name, what, value)
        if arr.ndim == 0:
            return torch.from_numpy(arr.reshape(1, 1, 1).copy())
        if arr.ndim != len(self._keep):
            self._fail(name, f"must be a number or have {len(self._keep)} dims (kept axes)", value)
        shape = [1, 1, 1]
        for axis, size in zip(self._keep, arr.shape):
            shape[axis] = size
        return torch.from_numpy(arr.reshape(shape).copy())

    def _check_stats(self, mean: Any, variance: Any, source: str) -> None:
        """The statistics' rules, wherever they come from: the constructor (``source``
        ``"mean/variance"``), ``adapt`` (``"adapt data"``) or a checkpoint
        (``"state_dict"``): float tensors of one shape ``(1|n, 1|n, 1|n)`` with size 1 off
        the kept axes, finite, the variance >= 0 (a NaN or inf mean would make every output
        of its feature NaN)."""
        of = {"adapt data": "the adapted ", "state_dict": "state_dict's "}.get(source, "")
        for t in (mean, variance):
            if not isinstance(t, torch.Tensor) or not t.is_floating_point():
                self._fail(f"{of}mean/variance", "must be float tensors", type(t).__name__)
        if mean.shape != variance.shape:
            shapes = (tuple(mean.shape), tuple(variance.shape))
            self._fail(f"{of}mean/variance", "must have the same shape", shapes)
        off = [a for a in range(3) if a not in self._keep]
        if mean.ndim != 3 or any(mean.shape[a] != 1 for a in off):
            self._fail(
                f"{of}mean/variance",
                f"must have shape (1|n, 1|n, 1|n) with size 1 off the kept axes {self._keep}",
                tuple(mean.shape),
            )
        if not bool(torch.isfinite(mean).all()):
            why = " (the data holds NaN or inf, or values beyond float64's range)"
            what = "must be finite" + (why if source == "adapt data" else "")
            self._fail(f"{of}mean", what, mean.reshape(-1)[:10].tolist())
        if not bool((torch.isfinite(variance) & (variance >= 0)).all()):
            got = variance.reshape(-1)[:10].tolist()
            self._fail(f"{of}variance", "must be finite and >= 0", got)

    def _set_stats(self, mean: torch.Tensor, variance: torch.Tensor, source: str) -> None:
        self._check_stats(mean, variance, source)
        device = self.mean.device
        self.mean = mean.to(device=device, dtype=self.variable_dtype)
        self.variance = variance.to(device=device, dtype=self.variable_dtype)
        if source != "mean/variance":  # learnt: the config carries them (get_config)
            learnt = {"mean": self.mean, "variance": self.variance}
            self._config_values = {k: self._as_config(v) for k, v in learnt.items()}

    def _as_config(self, stat: torch.Tensor) -> Any:
        """A statistic as the constructor's ``mean=``/``variance=`` takes it: a number, or
        nested lists shaped like the kept axes (``_as_stat``'s inverse)."""
        if not self._keep:
            return float(stat.reshape(-1)[0])
        off = tuple(a for a in range(3) if a not in self._keep)
        return stat.squeeze(off).tolist() if off else stat.tolist()

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        mean, var = state_dict.get(prefix + "mean"), state_dict.get(prefix + "variance")
        learnt = [t for t in (mean, var) if isinstance(t, torch.Tensor) and t.numel()]
        if learnt:  # checked before any buffer changes: a bad checkpoint changes nothing
            self._check_stats(mean, var, "state_dict")
        # The buffers' shapes are only known once adapted; take them from the checkpoint.
        for name in ("mean", "variance"):
            key = prefix + name
            if key in state_dict:
                setattr(self, name, torch.empty_like(state_dict[key], dtype=self.variable_dtype))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        if learnt:
            self._set_stats(self.mean, self.variance, "state_dict")

    # --------------------------------------------------------------- tabular
    @staticmethod
    def _is_tabular(x: Any) -> bool:
        ndim = x.ndim if isinstance(x, (torch.Tensor, np.ndarray)) else np.ndim(x)
        return ndim in (1, 2)

    def _check_tabular_axis(self) -> None:
        if self.axis not in ("channel", -1, [-1], (-1,), None):
            raise ValueError(
                "Normalization: rank-1/2 (tabular) input needs axis='channel', -1 or None; "
                f"got axis={self.axis!r}"
            )

    def _tabular_stats(self, features: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The statistics as ``(features,)`` vectors (or scalars) for a 2-D batch."""
        mean, var = self.mean.reshape(-1), self.variance.reshape(-1)
        if mean.numel() not in (1, features):
            raise ValueError(
                f"Normalization: the statistics have {mean.numel()} entries but the input "
                f"has {features} features"
            )
        return mean, var

    def _forward_tabular(self, inputs: Any) -> torch.Tensor:
        self._check_tabular_axis()
        x = as_tensor(inputs)
        if self.mean.numel() == 0:
            raise ValueError("Normalization: no statistics; call adapt() or pass mean and variance")
        mean, var = self._tabular_stats(x.shape[-1])
        x = self._to_float(x)
        std = torch.where(var == 0, 1.0, var.sqrt().clamp_min(_EPSILON))
        mean, std = mean.to(x.dtype), std.to(x.dtype)
        return (x * std).add_(mean) if self.invert else (x - mean).div_(std)

    def _tabular_moments(self, x: torch.Tensor) -> tuple[int, torch.Tensor, torch.Tensor]:
        self._check_tabular_axis()
        x = x.detach().to(torch.float64)
        x = x.reshape(1, -1) if x.ndim == 1 else x
        dims = (0,) if self._keep else (0, 1)
        b_mean = x.mean(dim=dims)
        b_m2 = (x - b_mean).square().sum(dim=dims)
        shape = [1, 1, 1]
        if self._keep:
            shape[self._keep[0]] = x.shape[1]
        n = x.shape[0] if self._keep else x.numel()
        return n, b_mean.reshape(shape).cpu(), b_m2.reshape(shape).cpu()

    # --------------------------------------------------------------- forward
    def forward(self, data: Any, generator: Any = None) -> Any:
        """Normalize an image, a batch, a dict of targets or tabular rows (class docstring)."""
        if not isinstance(data, dict) and self._is_tabular(data):
            return self._forward_tabular(data)
        return super().forward(data, generator)

    def transform_images(self, images: torch.Tensor, params: Any = None) -> torch.Tensor:
        if self.mean.numel() == 0:
            raise ValueError("Normalization: no statistics; call adapt() or pass mean and variance")
        self._check_kept_sizes(images)
        x = self._to_float(images)
        # Zero variance: scale 1 (scikit-learn); otherwise Keras's floor on the deviation.
        std = torch.where(self.variance == 0, 1.0, self.variance.sqrt().clamp_min(_EPSILON))
        mean, std = self.mean.to(x.dtype), std.to(x.dtype)
        # One fresh tensor, then in place: a second full-size allocation costs as much
        # as the arithmetic on CPU.
        return (x * std).add_(mean) if self.invert else (x - mean).div_(std)

    def _check_kept_sizes(self, batch: torch.Tensor) -> None:
        """Each kept axis must match the statistics (or they are size 1 and broadcast);
        otherwise broadcasting would fail obscurely or silently change the output shape."""
        for axis in self._keep:
            want, got = self.mean.shape[axis], batch.shape[axis + 1]
            if want != 1 and want != got:
                raise ValueError(
                    f"Normalization: the statistics have {want} entries along image axis "
                    f"{axis - 3} ({self.data_format}), but the input has {got}; "
                    f"got shape {tuple(batch.shape)}"
                )

    # ----------------------------------------------------------------- adapt
    def adapt(
        self,
        data: Any,
        batch_size: int | None = None,
        steps: int | None = None,
        progress: bool | None = None,
    ) -> None:
        """Compute mean and variance of ``data`` by streaming over it.

        Args:
            data: a numpy array or torch tensor (one image, rank 3, or a stack of images,
                rank 4; or tabular rows, rank 2 ``(rows, features)``, or one row, rank 1;
                cut into batches of ``batch_size``), or any iterable of elements, such as
                a ``datapipe.Dataset``; an element is an image, a batch or rows (array or
                tensor) or a tuple/list whose first component is one.
            batch_size: images per batch for array/tensor input (default 256); ignored
                for iterables, whose elements are taken as they come.
            steps: stop after this many batches (default: all of ``data``).
            progress: ``False`` hides the progress bar; by default a tqdm bar appears on a
                terminal for runs longer than two seconds (``DATAPIPE_PROGRESS=0`` hides
                it everywhere, ``=1`` shows it in logs too).

        Per-batch moments are computed in float64 and merged with Chan et al.'s
        parallel formula, so the result matches numpy's mean/var of all the data even
        for large values or float16 input.

        Raises:
            ValueError: ``data`` is empty, an element has the wrong rank, the kept axes
                change size between batches, or the data holds NaN or inf (the statistics
                would not be finite; the layer keeps the ones it had).
        """
        if steps is not None and (
            isinstance(steps, bool) or not isinstance(steps, int) or steps < 1
        ):
            self._fail("steps", "must be a positive int or None", steps)
        from datapipe._progress import progress_bar

        batches, total = self._batches(data, batch_size)
        with progress_bar(
            total=_min_total(total, steps),
            desc="Normalization.adapt",
            unit="batch",
            enabled=progress,
            delay=2.0,
        ) as bar:
            count, mean, m2 = self._stream_moments(batches, steps, bar)
        if mean is None:
            raise ValueError("Normalization.adapt: data has no elements")
        var = m2 / count
        # scikit-learn's _is_constant_feature: what is left of a constant feature's
        # variance after rounding is zero (scale 1), not a tiny deviation to divide by.
        eps = float(np.finfo(np.float64).eps)
        constant = var <= count * eps * var + (count * mean * eps) ** 2
        var = torch.where(constant, torch.zeros_like(var), var)
        self._set_stats(mean, var, "adapt data")  # the constructor's rules; config too

    def _stream_moments(self, batches: Any, steps: int | None, bar: Any) -> tuple:
        """(count, mean, M2) of all ``batches`` (mean None when there was no element)."""
        count, mean, m2 = 0, None, None  # mean is None until a batch had elements
        for batch in itertools.islice(batches, steps):  # never reads past the last step
            bar.update(1)
            n, b_mean, b_m2 = self._moments(batch)
            if n == 0:  # an empty batch (or zero-sized images) carries no moments
                continue
            if mean is None:
                count, mean, m2 = n, b_mean, b_m2
                continue
            if b_mean.shape != mean.shape:
                raise ValueError(
                    "Normalization.adapt: the kept axes changed size between batches: "
                    f"{tuple(mean.shape)} then {tuple(b_mean.shape)}"
                )
            # Chan et al.: merge (count, mean, M2) pairs without cancellation.
            assert m2 is not None  # set with mean
            total_n = count + n
            delta = b_mean - mean
            mean = mean + delta * (n / total_n)
            m2 = m2 + b_m2 + delta * delta * (count * n / total_n)
            count = total_n
        return count, mean, m2

    def _batches(self, data: Any, batch_size: int | None) -> tuple[Any, int | None]:
        if isinstance(data, (np.ndarray, torch.Tensor)):
            if data.ndim in (1, 3):  # one row of features / one image
                data = data[None]
            size = _DEFAULT_BATCH if batch_size is None else batch_size
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                self._fail("batch_size", "must be a positive int or None", batch_size)
            starts = range(0, data.shape[0], size)
            return (data[s : s + size] for s in starts), len(starts)
        if isinstance(data, (str, bytes)) or not hasattr(data, "__iter__"):
            self._fail("data", "must be an array, a tensor or an iterable (Dataset)", type(data))
        return (_first_component(e) for e in data), None

    def _moments(self, batch: Any) -> tuple[int, torch.Tensor, torch.Tensor]:
        """(count, mean, M2) of one batch in float64, in the buffers' broadcast shape."""
        x = batch
        if not isinstance(x, torch.Tensor):
            try:
                x = as_tensor(x)
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    "Normalization.adapt: an element must be an image or a batch (array or "
                    f"tensor) or a tuple/list whose first component is one; got {type(batch)}"
                ) from exc
        if x.ndim in (1, 2):
            return self._tabular_moments(x)
        if x.ndim == 3:
            x = x.unsqueeze(0)
        if x.ndim != 4:
            raise ValueError(
                "Normalization.adapt: expected rank-1/2 rows of features, rank-3 images or "
                "rank-4 batches; "
                f"got shape {tuple(x.shape)}"
            )
        if self._checks_layout:  # NHWC data would give per-row statistics
            check_layout(self, x)
        x = x.detach().to(torch.float64)
        dims = (0,) + tuple(1 + a for a in range(3) if a not in self._keep)
        n = math.prod(x.shape[d] for d in dims)
        b_mean = x.mean(dim=dims, keepdim=True)
        b_m2 = (x - b_mean).square().sum(dim=dims, keepdim=True)
        return n, b_mean.squeeze(0).cpu(), b_m2.squeeze(0).cpu()


def _first_component(element: Any) -> Any:
    return element[0] if isinstance(element, (tuple, list)) else element


def _min_total(total: int | None, steps: int | None) -> int | None:
    if total is None:
        return steps
    return total if steps is None else min(total, steps)
