"""``TensorSpec``: the static description of one component of an element.

Semantics follow ``tf.TensorSpec``: a shape whose unknown dimensions are ``None`` (or an
unknown rank, ``shape=None``) and a dtype. The dtype is the element's own kind of dtype:
a ``numpy.dtype`` for numpy/Python values, a ``torch.dtype`` for torch tensors, because
elements keep their array type through the pipeline.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from datapipe import _structure as nest

# torch is a runtime dependency, but describing numpy data never needs it, and importing it
# costs ~2 s and ~200 MB: `import datapipe` leaves it out. A value can only be a torch
# tensor (or dtype) once something imported torch, so the checks below look in sys.modules
# (getattr: a torch still being imported by another thread has no Tensor class yet).

Shape = tuple  # tuple[int | None, ...] or None for unknown rank


class SeenDim(int):
    """A dimension size seen in one element, not declared or derived: the spec of an op
    whose function is not traced (``map``, ``flat_map``, ``scan``, ...) is inferred from
    its first element, and each size there is a ``SeenDim``. It reads as the ``int`` it is
    (``repr``, ``==``, arithmetic), but static facts treat it as unknown, as tf.data's
    traced spec would have it wherever the size depends on the values: a build-time check
    never fails on it (``padded_batch(padded_shapes=...)`` smaller than the first element:
    later elements may fit), and nothing is derived from it (``unbatch``'s cardinality).
    ``static_dim`` is the test."""

    __slots__ = ()


def static_dim(d: Any) -> int | None:
    """``d`` when it is a known size (declared or derived), None when unknown or only seen
    in one element (``SeenDim``)."""
    return None if d is None or isinstance(d, SeenDim) else int(d)


@dataclass(frozen=True)
class TensorSpec:
    """Shape and dtype of one component of a dataset element.

    Args:
        shape: tuple of ``int`` or ``None`` per dimension (``None`` = unknown size), or
            ``None`` for an unknown rank.
        dtype: a ``numpy.dtype`` (numpy or Python values) or a ``torch.dtype`` (tensors).
            Strings and ``numpy.dtype`` arguments are normalised with ``numpy.dtype``; text
            and bytes dtypes of any width (``<U5``, ``S3``) become ``object``.
        name: optional component name, kept for parity with ``tf.TensorSpec``.

    Example:
        >>> TensorSpec((None, 3), "float32")
        TensorSpec(shape=(None, 3), dtype=float32)
    """

    shape: Shape | None
    dtype: Any
    name: str | None = None

    def __post_init__(self) -> None:
        if self.shape is not None:
            dims = tuple(d if d is None or isinstance(d, SeenDim) else int(d) for d in self.shape)
            object.__setattr__(self, "shape", dims)
        if not is_torch_dtype(self.dtype):
            dt = np.dtype(self.dtype)
            # Strings of any width are one kind of value (tf.string): spec them as object.
            object.__setattr__(self, "dtype", np.dtype(object) if dt.kind in "US" else dt)

    def __repr__(self) -> str:
        return f"TensorSpec(shape={self.shape}, dtype={dtype_name(self.dtype)})"

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def is_compatible_with(self, value_or_spec: Any) -> bool:
        """True when ``value_or_spec`` (a value or a spec) fits this spec's shape and dtype."""
        other = value_or_spec if isinstance(value_or_spec, TensorSpec) else spec_of(value_or_spec)
        if dtype_name(other.dtype) != dtype_name(self.dtype):
            return False
        return shapes_compatible(self.shape, other.shape)

    def to_json(self) -> dict:
        out: dict[str, Any] = {
            "shape": None
            if self.shape is None
            else [None if d is None else int(d) for d in self.shape],
            "dtype": dtype_name(self.dtype),
            "torch": is_torch_dtype(self.dtype),
        }
        seen = [i for i, d in enumerate(self.shape or ()) if isinstance(d, SeenDim)]
        if seen:  # sizes seen in one element stay only seen (see SeenDim)
            out["seen"] = seen
        return out

    @staticmethod
    def from_json(d: dict) -> TensorSpec:
        if d.get("unknown"):
            return UnknownSpec()
        if d.get("none"):
            return NoneSpec()
        if d.get("torch"):
            import torch

            dtype = getattr(torch, d["dtype"])
        else:
            dtype = np.dtype(d["dtype"])
        shape = None if d["shape"] is None else list(d["shape"])
        for i in d.get("seen", ()):
            shape[i] = SeenDim(shape[i])  # type: ignore[index]
        return TensorSpec(None if shape is None else tuple(shape), dtype)


@dataclass(frozen=True)
class UnknownSpec(TensorSpec):
    """The spec of a dataset whose spec is inferred from an element (``map``, ``flat_map``,
    ``interleave``, ``scan``: their functions are not traced, unlike tf.data's) when there
    was no element to infer it from: its input is empty (everything filtered out, an empty
    shard or file list). Any structure, shape and dtype: it merges with any other spec
    (``concatenate``, ``sample_from_datasets``) and passes every build-time check, so a
    valid pipeline does not fail to build because one of its inputs is empty.
    """

    shape: Shape | None = None
    dtype: Any = np.dtype(object)

    def __repr__(self) -> str:
        return "UnknownSpec()"

    def to_json(self) -> dict:
        return {**super().to_json(), "unknown": True}


@dataclass(frozen=True)
class NoneSpec(TensorSpec):
    """The spec of a ``None`` component (tf.data's ``NoneTensorSpec``): ``batch``,
    ``padded_batch`` and ``unbatch`` pass it through as ``None``."""

    shape: Shape | None = ()
    dtype: Any = np.dtype(object)

    def __repr__(self) -> str:
        return "NoneSpec()"

    def to_json(self) -> dict:
        return {**super().to_json(), "none": True}


def is_torch_dtype(dtype: Any) -> bool:
    torch_dtype = getattr(sys.modules.get("torch"), "dtype", None)
    return torch_dtype is not None and isinstance(dtype, torch_dtype)


def dtype_name(dtype: Any) -> str:
    if is_torch_dtype(dtype):
        return str(dtype).replace("torch.", "")
    return np.dtype(dtype).name


def is_torch(x: Any) -> bool:
    tensor = getattr(sys.modules.get("torch"), "Tensor", None)
    return tensor is not None and isinstance(x, tensor)


@dataclass(frozen=True)
class DatasetSpec:
    """Spec of a component whose value is itself a ``Dataset`` (``tf.data.DatasetSpec``),
    as in the elements of ``window``. ``shape``/``dtype`` let code that walks specs treat
    it as a scalar object."""

    element_spec: Any
    shape: tuple = ()
    dtype: Any = np.dtype(object)

    def __repr__(self) -> str:
        shape = f", shape={self.shape}" if self.shape else ""
        return f"DatasetSpec({self.element_spec!r}{shape})"


def is_dataset(x: Any) -> bool:
    """Whether ``x`` is a ``Dataset`` (this module cannot import the class)."""
    return hasattr(x, "_make_iterator") and hasattr(x, "element_spec")


def array_spec(arr: np.ndarray, shape: tuple) -> TensorSpec | DatasetSpec:
    """Spec of values of ``shape`` taken from ``arr``: a ``DatasetSpec`` for an object
    array of Datasets (``from_tensors([ds, ...])``, a batch of datasets), else a
    ``TensorSpec`` of ``arr``'s dtype."""
    if arr.dtype == object and arr.size and is_dataset(arr.flat[0]):
        return DatasetSpec(arr.flat[0].element_spec, tuple(shape))
    return TensorSpec(tuple(shape), arr.dtype)


def leaf_spec(x: Any) -> TensorSpec | DatasetSpec:
    """Spec of one leaf value (array, tensor, scalar, str, bytes, or a Dataset)."""
    if is_dataset(x):
        return DatasetSpec(x.element_spec)
    if x is None:
        return NoneSpec()
    if is_torch(x):
        return TensorSpec(tuple(x.shape), x.dtype)
    if isinstance(x, np.ndarray):
        return array_spec(x, x.shape)
    if isinstance(x, np.generic):
        return TensorSpec(x.shape, x.dtype)
    if isinstance(x, (str, bytes)):
        return TensorSpec((), np.dtype(object))
    arr = np.asarray(x)
    return TensorSpec(arr.shape, arr.dtype)


def spec_of(element: Any) -> Any:
    """The nested ``TensorSpec`` structure of one element."""
    return nest.map_structure(leaf_spec, element)


def seen_spec(spec: Any) -> Any:
    """``spec`` with every size a ``SeenDim``: the spec of an op inferred from one of its
    elements (``spec_of(first)``, a first sub-dataset's spec), whose sizes other elements
    need not share."""

    def one(s: Any) -> Any:
        if isinstance(s, DatasetSpec):
            return DatasetSpec(seen_spec(s.element_spec), tuple(SeenDim(d) for d in s.shape))
        if isinstance(s, (UnknownSpec, NoneSpec)) or not isinstance(s, TensorSpec):
            return s
        if s.shape is None:
            return s
        return TensorSpec(tuple(None if d is None else SeenDim(d) for d in s.shape), s.dtype)

    return nest.map_structure(one, spec)


def shapes_compatible(a: Shape | None, b: Shape | None) -> bool:
    if a is None or b is None:
        return True
    if len(a) != len(b):
        return False
    return all(x is None or y is None or x == y for x, y in zip(a, b))


def most_specific_common_shape(a: Shape | None, b: Shape | None) -> Shape | None:
    """Shape that both ``a`` and ``b`` fit: equal dims kept (only seen, ``SeenDim``, when
    either side only saw it), differing dims become None."""
    if a is None or b is None or len(a) != len(b):
        return None

    def one(x: Any, y: Any) -> Any:
        if x != y or x is None:
            return None
        return SeenDim(x) if isinstance(x, SeenDim) or isinstance(y, SeenDim) else x

    return tuple(one(x, y) for x, y in zip(a, b))


def common_spec(a: Any, b: Any) -> Any:
    """Leaf-wise most specific spec that fits both specs; ``None`` when they can't merge
    (different structure or dtype)."""
    if isinstance(a, UnknownSpec):  # no element seen on one side: the other one's
        return b
    if isinstance(b, UnknownSpec):
        return a
    if not nest.same_structure(a, b):
        return None
    fa, fb = nest.flatten(a), nest.flatten(b)
    out = []
    for x, y in zip(fa, fb):
        if isinstance(x, UnknownSpec) or isinstance(y, UnknownSpec):
            out.append(y if isinstance(x, UnknownSpec) else x)
            continue
        if dtype_name(x.dtype) != dtype_name(y.dtype):
            return None
        out.append(TensorSpec(most_specific_common_shape(x.shape, y.shape), x.dtype))
    return nest.pack_as(a, out)


def batched_spec(spec: Any, batch_dim: int | None) -> Any:
    """Spec with a leading batch dimension of size ``batch_dim`` (None = unknown)."""

    def one(s: Any) -> Any:
        if isinstance(s, (UnknownSpec, NoneSpec)):
            return s
        if isinstance(s, DatasetSpec):  # a batch of datasets (tf.data's batched DatasetSpec)
            return DatasetSpec(s.element_spec, (batch_dim, *s.shape))
        return TensorSpec(None if s.shape is None else (batch_dim, *s.shape), s.dtype)

    return nest.map_structure(one, spec)


def unbatched_spec(spec: Any, op: str) -> Any:
    def one(s: Any) -> Any:
        if isinstance(s, (UnknownSpec, NoneSpec)):
            return s
        if s.shape is not None and len(s.shape) == 0:
            raise ValueError(
                f"{op}: cannot unbatch a scalar component {s}; every component "
                "needs a leading batch dimension"
            )
        if isinstance(s, DatasetSpec):
            return DatasetSpec(s.element_spec, s.shape[1:])
        return TensorSpec(None if s.shape is None else s.shape[1:], s.dtype)

    return nest.map_structure(one, spec)


def cast_without_loss(values: Any, dtype: np.dtype) -> np.ndarray | None:
    """``values`` as a numpy array of ``dtype``, or None when that would change a value
    beyond floating-point rounding: a fraction dropped (0.5 -> int 0), an integer out of
    range (300 -> uint8 44), a non-0/1 to bool, complex to real. Numbers to a floating
    dtype round as usual (0.1 -> float32), as ``tf.convert_to_tensor`` does."""
    try:
        arr = np.asarray(values)
        if arr.dtype == dtype:
            return arr
        if arr.dtype.kind not in "biufc":
            return None
        out = arr.astype(dtype)
    except (TypeError, ValueError, OverflowError):
        return None
    if dtype.kind in "fc" and (arr.dtype.kind != "c" or dtype.kind == "c"):
        return out
    with np.errstate(invalid="ignore"):
        return out if np.array_equal(out, arr) else None


def spec_to_json(spec: Any) -> Any:
    """JSON form of a nested spec: dict/list structure, with leaf specs as dicts."""
    if isinstance(spec, dict):
        return {"__dict__": {k: spec_to_json(v) for k, v in spec.items()}}
    if isinstance(spec, tuple):
        return {"__tuple__": [spec_to_json(v) for v in spec]}
    return spec.to_json()


def spec_from_json(d: Any) -> Any:
    if "__dict__" in d:
        return {k: spec_from_json(v) for k, v in d["__dict__"].items()}
    if "__tuple__" in d:
        return tuple(spec_from_json(v) for v in d["__tuple__"])
    return TensorSpec.from_json(d)
