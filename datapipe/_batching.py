"""Stacking elements into batches and splitting batches, for every batching op."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from datapipe import _structure as nest
from datapipe._spec import is_dataset, is_torch
from datapipe.errors import BatchShapeError


def _shape(x: Any) -> tuple:
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def _mismatch(op: str, values: list, start_index: int, path: str) -> BatchShapeError:
    first = _shape(values[0])
    for j, v in enumerate(values):
        if _shape(v) != first:
            where = "" if path == "element" else f" in component {path}"
            return BatchShapeError(
                f"{op}: cannot stack element {start_index + j} of shape {_shape(v)} with element "
                f"{start_index} of shape {first}{where}. Make the shapes equal first (resize "
                "images with preprocessing.Resizing or image_size=...), or use padded_batch() "
                "to pad them to a common shape."
            )
    return BatchShapeError(f"{op}: cannot stack the elements starting at {start_index}")


def as_numpy(x: Any) -> np.ndarray:
    """``np.asarray(x)`` for a list or Python value, but text and bytes become ``object``
    arrays of ``str``/``bytes``: numpy's fixed-width ``U``/``S`` would drop trailing NULs;
    and a list of Datasets an ``object`` array of them (tf.data's tensor of datasets):
    numpy would iterate each into an array."""
    if isinstance(x, (list, tuple)) and x and all(is_dataset(v) for v in x):
        return object_array(list(x))
    arr = np.asarray(x)
    if arr.dtype.kind in "US" and not isinstance(x, np.ndarray):
        return np.array(x, dtype=object)
    return arr


# Where batches stacked on this thread go: ``alloc(shape, dtype) -> buffer or None`` (set
# by ``prefetch_to_device`` on its thread while it reads its input, so that a batch is
# assembled in pinned host memory instead of being copied there), or None: new memory.
class _Target(threading.local):
    alloc: Callable[[tuple, Any], Any] | None = None  # a class default: no AttributeError


_target = _Target()


def read_with_alloc(alloc: Callable[[tuple, Any], Any], read: Callable[[], Any]) -> Any:
    """``read()`` with the batches stacked on this thread meanwhile put in ``alloc``'s
    buffers (numpy arrays for numpy components, tensors for torch components)."""
    previous, _target.alloc = _target.alloc, alloc
    try:
        return read()
    finally:
        _target.alloc = previous


def _stack_into(values: list, v0: Any, alloc: Callable[[tuple, Any], Any], torch: Any) -> Any:
    """``values`` stacked into a buffer from ``alloc``, or None (mixed dtypes would be
    promoted by a plain stack: those take the plain path)."""
    dtype = v0.dtype
    if any(getattr(v, "dtype", None) != dtype for v in values):
        return None
    try:
        out = alloc((len(values), *v0.shape), dtype)
    except (RuntimeError, MemoryError):  # no pinned memory to be had: a plain stack
        return None
    if out is None:
        return None
    if torch is not None:
        return torch.stack(values, out=out)
    return np.stack(values, out=out)


def object_array(values: list) -> np.ndarray:
    """A 1-D ``object`` array holding ``values`` themselves (never their contents: numpy
    would iterate a Dataset, a list or an array put in with one assignment)."""
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def stack_leaf(values: list, op: str, start_index: int, path: str = "element") -> Any:
    """Stack one component's values: torch -> torch.stack, Datasets -> an object array
    of them (tf.data batches ``DatasetSpec`` components: ``unbatch`` gives them back),
    else numpy."""
    v0 = values[0]
    if is_dataset(v0):
        return object_array(values)
    if v0 is None and all(v is None for v in values):
        return None  # a None component stays None (tf.data's NoneTensor)
    alloc = _target.alloc
    try:
        if is_torch(v0):
            import torch

            if alloc is not None and v0.device.type == "cpu":
                out = _stack_into(values, v0, alloc, torch)
                if out is not None:
                    return out
            return torch.stack(values)
        if alloc is not None and isinstance(v0, (np.ndarray, np.generic)):
            if v0.dtype.kind in "biufc":  # numeric arrays and numpy scalars
                out = _stack_into(values, v0, alloc, None)
                if out is not None:
                    return out
        if isinstance(v0, np.ndarray):
            return np.stack(values)
        if isinstance(v0, (str, bytes)):
            # object, not "<U"/"S": numpy's fixed-width bytes would drop trailing NULs.
            return np.array(values, dtype=object)
        return np.array(values)
    except (RuntimeError, ValueError) as e:
        raise _mismatch(op, values, start_index, path) from e


def _structure(x: Any) -> str:
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k!r}: {_structure(x[k])}" for k in sorted(x)) + "}"
    if isinstance(x, tuple):
        return "(" + ", ".join(_structure(v) for v in x) + (",)" if len(x) == 1 else ")")
    return type(x).__name__


def _describe(x: Any) -> str:
    text = _structure(x)
    return text if len(text) <= 160 else text[:157] + "..."


def _check_structures(elements: list, op: str, start_index: int) -> None:
    """Elements of one batch must nest the same containers with the same keys: stacking by
    leaf position would otherwise silently merge or drop components."""
    first = elements[0]
    types = set(map(type, elements))  # C-level passes: this runs on every batch
    if len(types) == 1:
        t = type(first)
        if not issubclass(t, (tuple, dict)):
            return
        if t is tuple and len(set(map(len, elements))) == 1:
            inner = set(map(type, itertools.chain.from_iterable(elements)))
            if not any(issubclass(k, (tuple, dict)) for k in inner):
                return  # flat plain tuples of one length: the common case
    nested = nest.is_nested(first)
    for j, e in enumerate(elements):
        if (nest.is_nested(e) != nested) or (nested and not nest.same_structure(first, e)):
            raise BatchShapeError(
                f"{op}: element {start_index + j} has structure {_describe(e)} but element "
                f"{start_index} has {_describe(first)}; every element of a batch needs the "
                "same structure (the same tuple lengths and dict keys)"
            )


def stack(elements: list, op: str, start_index: int) -> Any:
    """Stack a list of same-structure elements into one batched element.

    Raises:
        BatchShapeError: elements with different structures (names both elements), or
            components of different shapes (names both shapes and suggests fixes).
    """
    _check_structures(elements, op, start_index)
    first = elements[0]
    if not nest.is_nested(first):
        return stack_leaf(elements, op, start_index)
    paths = [p for p, _ in nest.flatten_with_paths(first)]
    columns = list(zip(*[nest.flatten(e) for e in elements]))
    return nest.pack_as(
        first, [stack_leaf(list(c), op, start_index, p) for c, p in zip(columns, paths)]
    )


def batch_size_of(batch: Any, op: str) -> int:
    leaves = [x for x in nest.flatten(batch) if x is not None]  # None stays None in a row
    if not leaves:
        raise ValueError(f"{op}: cannot unbatch an element with no component but None")
    sizes = {int(_shape(x)[0]) if len(_shape(x)) else -1 for x in leaves}
    if -1 in sizes:
        raise ValueError(f"{op}: cannot unbatch a scalar component")
    if len(sizes) != 1:
        raise ValueError(f"{op}: components have different batch sizes {sorted(sizes)}")
    return sizes.pop()


def split(batch: Any, op: str) -> list:
    """Inverse of ``stack``: the list of elements of a batched element."""
    n = batch_size_of(batch, op)
    if not nest.is_nested(batch):
        return list(batch)
    cols = [[None] * n if x is None else list(x) for x in nest.flatten(batch)]
    return [nest.pack_as(batch, [c[i] for c in cols]) for i in range(n)]
