"""Shared pieces of the categorical layers: output-mode encoding, argument checks, state.

``encode(indices, output_mode, depth)`` is Keras 3's ``encode_categorical_inputs``
(``keras/src/utils/numerical_utils.py``) in torch: ``one_hot`` encodes every element (a
trailing axis of size 1 is replaced by the encoding); ``multi_hot`` / ``count`` reduce
Keras's one axis: axis 1 of an input of rank 2 or more (a sample per row of a
``(batch, n)`` input; ``(a, b, c)`` gives ``(a, c, depth)``), axis 0 of a rank-1 input (one
sample); a scalar is one sample of one element. Indices outside ``[0, depth)`` add nothing
(the lookup layers send their mask token there).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import torch

from .base import check_int  # the layers' one int check (with its bounds)
from .dtype_policy import keras_dtype_name

OUTPUT_MODES = ("int", "one_hot", "multi_hot", "count", "tf_idf")


def check_choice(layer: Any, name: str, value: Any, allowed: tuple) -> str:
    if not isinstance(value, str) or value not in allowed:
        layer._fail(name, f"must be one of {allowed}", value)
    return value


def encode(
    indices: torch.Tensor,
    output_mode: str,
    depth: int,
    dtype: torch.dtype = torch.float32,
    count_weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Keras's categorical encoding of int64 ``indices`` (see the module docstring).

    Shapes: ``one_hot``: ``(..., 1) -> (..., depth)``, otherwise ``(...) -> (..., depth)``;
    ``multi_hot`` / ``count``: ``(n,) -> (depth,)``, ``(b, n) -> (b, depth)``, ``(a, n,
    c, ...) -> (a, c, ..., depth)`` (axis 1 is reduced, Keras's rule); a scalar gives
    ``(depth,)`` (``(1, depth)`` for ``one_hot``, as Keras). ``count_weights`` (``count``
    only, shaped like ``indices``) adds each element's weight instead of 1.
    """
    if output_mode == "int":
        return indices
    if indices.ndim == 0:
        indices = indices.reshape(1)
    if output_mode == "one_hot" and indices.ndim > 1 and indices.shape[-1] == 1:
        indices = indices.squeeze(-1)
    valid = (indices >= 0) & (indices < depth)
    hot = torch.nn.functional.one_hot(torch.where(valid, indices, 0).long(), depth)
    hot = hot * valid.unsqueeze(-1)
    if output_mode == "one_hot":
        return hot.to(dtype)
    # Keras's reduction axis (numerical_utils.encode_categorical_inputs, nn.multi_hot): 1
    # when the indices have rank 2 or more, else 0.
    axis = 1 if indices.ndim > 1 else 0
    if output_mode == "multi_hot":  # any(), not amax(): an empty axis gives zeros
        return hot.any(dim=axis).to(dtype)
    if count_weights is not None:
        return (hot.to(count_weights.dtype) * count_weights.unsqueeze(-1)).sum(dim=axis)
    return hot.sum(dim=axis).to(dtype)


FLOAT_OUTPUTS = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
}
INT_OUTPUTS = {"int32": torch.int32, "int64": torch.int64}


def output_dtype(layer: Any, dtype: Any, int_output: bool, ints_allowed: bool = False) -> str:
    """A feature layer's ``dtype`` argument (Keras's: the dtype of what it returns).

    ``int_output``: the layer returns indices (``output_mode="int"``): ``"int32"`` or
    ``"int64"`` (default ``"int64"``). Otherwise a float name (default ``"float32"``), or
    with ``ints_allowed`` also an int name (CategoryEncoding's one-hot as ``int32``).
    Keras 3's serialized ``DTypePolicy`` of such a name (what its configs hold) reads as
    the name (``dtype_policy.keras_dtype_name``), and a mixed policy its compute dtype
    (``"mixed_float16"`` -> ``"float16"``), the dtype of Keras's output.
    """
    given, dtype = dtype, keras_dtype_name(dtype)  # Keras 3 configs: a serialized policy
    if isinstance(dtype, str) and dtype in ("mixed_float16", "mixed_bfloat16") and not int_output:
        dtype = dtype.removeprefix("mixed_")  # Keras's output: the policy's compute dtype
    if dtype is None:
        return "int64" if int_output else "float32"
    allowed = tuple(INT_OUTPUTS) if int_output else tuple(FLOAT_OUTPUTS)
    if ints_allowed and not int_output:
        allowed += tuple(INT_OUTPUTS)
    if not isinstance(dtype, str) or dtype not in allowed:
        what = "with output_mode='int' " if int_output else ""
        layer._fail("dtype", f"{what}must be one of {allowed} or None", given)
    return dtype


def torch_dtype(name: str) -> torch.dtype:
    return {**FLOAT_OUTPUTS, **INT_OUTPUTS}[name]


def encoded_dtype(output_mode: str) -> torch.dtype:
    """int64 indices in ``int`` mode; float32 encodings otherwise (Keras's declared
    ``floatx``; its TensorFlow path returns int64 for lookups' one/multi-hot and counts)."""
    return torch.int64 if output_mode == "int" else torch.float32


def is_tracing() -> bool:
    """True under ``torch.export`` / ``torch.compile``: data-dependent checks are skipped."""
    return torch.compiler.is_compiling()


# ----------------------------------------------------------------- vocabularies
def pack_strings(tokens: list[str], encoding: str = "utf-8") -> tuple[torch.Tensor, torch.Tensor]:
    """Strings as two buffers: their concatenated bytes (uint8) and their end offsets
    (int64). Exact for any text (newlines, NUL, any code point), unlike one-per-line files."""
    encoded = [t.encode(encoding) for t in tokens]
    data = np.frombuffer(b"".join(encoded), dtype=np.uint8).copy()
    ends = np.cumsum([len(e) for e in encoded], dtype=np.int64)
    return torch.from_numpy(data), torch.from_numpy(ends)


def unpack_strings(data: torch.Tensor, ends: torch.Tensor, encoding: str = "utf-8") -> list[str]:
    raw = data.cpu().numpy().tobytes()
    starts = [0, *ends.tolist()[:-1]]
    return [raw[s:e].decode(encoding) for s, e in zip(starts, ends.tolist())]


def resize_buffers_from(module: torch.nn.Module, state_dict: dict, prefix: str, names) -> None:
    """Give ``module``'s buffers the shapes of a checkpoint's before it is loaded: state
    learnt by ``adapt`` (a vocabulary, boundaries) has no fixed size."""
    for name in names:
        key = prefix + name
        if key in state_dict and isinstance(state_dict[key], torch.Tensor):
            old = getattr(module, name)
            setattr(module, name, torch.empty_like(state_dict[key], dtype=old.dtype))


# ---------------------------------------------------------------------- adapt
def adapt_batches(
    data: Any, batch_size: int | None, layer_name: str
) -> tuple[Iterator, int | None]:
    """The batches ``adapt`` reads from ``data``, and how many when known.

    A numpy array, torch tensor, list or tuple is one batch unless ``batch_size`` cuts it
    along its first axis (Keras's ``adapt`` of an array reads it whole); anything else
    iterable (a ``datapipe.Dataset``, a generator) is read element by element, taking the
    first component of tuple/list elements (``(features, label)``).
    """
    if isinstance(data, (np.ndarray, torch.Tensor, list, tuple)):
        if batch_size is None:
            return iter([data]), 1
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"{layer_name}.adapt: batch_size must be a positive int or None")
        n = len(data)
        starts = range(0, n, batch_size)
        return (data[s : s + batch_size] for s in starts), len(starts)
    if isinstance(data, (str, bytes)) or not isinstance(data, Iterable):
        raise ValueError(
            f"{layer_name}.adapt: data must be an array, tensor, list or an iterable "
            f"(a datapipe Dataset); got {type(data).__name__}"
        )
    total = None
    try:
        total = len(data)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        pass

    def first(element: Any) -> Any:
        return element[0] if isinstance(element, tuple) else element

    return (first(e) for e in data), total


def run_adapt(layer: Any, data: Any, batch_size, steps, progress, update) -> int:
    """Call ``update(batch)`` for each batch of ``data`` (at most ``steps``) under a tqdm
    bar (``datapipe._progress``); returns the number of batches read."""
    from datapipe._progress import progress_bar

    name = type(layer).__name__
    steps = check_int(layer, "steps", steps, 1, optional=True)
    batches, total = adapt_batches(data, batch_size, name)
    if steps is not None:
        total = steps if total is None else min(total, steps)
    count = 0
    with progress_bar(
        total=total, desc=f"{name}.adapt", unit="batch", enabled=progress, delay=2.0
    ) as bar:
        # islice: the batch after the last step is never read (a pipeline may be costly
        # or endless), as Keras's adapt(steps=) stops.
        for batch in itertools.islice(batches, steps):
            update(batch)
            count += 1
            bar.update(1)
    return count


def is_empty(batch: Any) -> bool:
    """True for an adapt batch with no values: an empty list/tuple, array or tensor."""
    if isinstance(batch, (list, tuple)):
        return len(batch) == 0
    if isinstance(batch, torch.Tensor):
        return batch.numel() == 0
    return isinstance(batch, np.ndarray) and batch.size == 0


def decode(layer: Any, value: bytes, encoding: str, what: str) -> str:
    """``value`` as text; bytes that are not valid ``encoding`` raise naming the layer."""
    try:
        return value.decode(encoding)
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{type(layer).__name__}: {what} holds bytes that are not valid {encoding} "
            f"({e.reason}); got {value!r}"
        ) from None


def to_numpy(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def finite_floats(layer: Any, name: str, values: Any) -> list[float]:
    out = [float(v) for v in values]
    if not all(math.isfinite(v) for v in out):
        layer._fail(name, "must be finite numbers", values)
    return out
