"""``from_generator``: elements from a Python generator (``tf.data.Dataset.from_generator``)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from datapipe import _structure as nest
from datapipe._functions import raise_pending
from datapipe._iterator import OpIterator
from datapipe._positions import error_from_state, error_to_state
from datapipe._spec import TensorSpec, dtype_name, is_torch_dtype, shapes_compatible
from datapipe.dataset_ops import UNKNOWN_CARDINALITY, Dataset
from datapipe.errors import annotate


class GeneratorDataset(Dataset):
    """Elements yielded by ``generator(*args)``, checked against ``output_signature``.

    ``Dataset.from_generator(generator, output_types=None, output_shapes=None, args=None,
    output_signature=None, name=None)`` has tf.data's signature and argument order.

    Args:
        generator: a callable returning an iterable (a generator function, or a class
            with ``__iter__``). It is called anew for every iteration of the dataset (each
            ``iter()``, each ``repeat`` pass), as in tf.data.
        output_signature: nested structure (tuple, namedtuple, dict) of ``TensorSpec``, one
            per component of an element. Also accepted in ``output_types``' place (the
            second positional argument): ``from_generator(gen, TensorSpec((), "int64"))``.
        output_types, output_shapes: tf.data's deprecated spelling of the signature, for
            existing code: a nested structure of dtypes (numpy names or dtypes, torch
            dtypes, or ``tf.DType``) and, matching it, of shapes (tuples with None for
            unknown sizes, ``tf.TensorShape``, or None for an unknown rank; default: every
            shape unknown). Each use emits a ``DeprecationWarning`` naming
            ``output_signature``, as tf.data's ``deprecated_args`` warns.
        args: positional arguments passed to ``generator`` on each call (None: none).
        name: accepted for tf.data's signature; unused.

    Each yielded value is converted leaf-wise as tf.data does: ``numpy.asarray(value,
    dtype=spec.dtype)`` (a ``torch.as_tensor`` for torch dtypes), so ``1.5`` with an int64
    spec becomes ``1``; 0-d results become numpy scalars; ``object`` specs (strings) keep
    the value as yielded.

    Raises:
        TypeError: at construction, ``generator`` is not callable, ``output_signature``
            holds something other than ``TensorSpec``, neither it nor ``output_types`` is
            given, it is given with ``output_types`` / ``output_shapes`` (tf.data's
            messages), or ``output_shapes`` does not match ``output_types``.
        PipelineError (at iteration): an element does not match the signature (wrong
            structure, a value that can't be converted, a shape mismatch); names the
            element index, the component and the expected vs yielded spec. Errors raised
            by the generator itself are annotated the same way.

    Cardinality is unknown; no random access. The iterator's state is the number of
    elements consumed: ``set_state`` *replays* the generator (calls it again and skips
    that many elements), so restoring costs as much as producing them, and is exact only
    if the generator yields the same sequence each call.

    Example:
        >>> import datapipe as dp
        >>> def gen():
        ...     for i in range(3):
        ...         yield i, [i] * 2
        >>> sig = (dp.TensorSpec((), "int64"), dp.TensorSpec((2,), "float32"))
        >>> [(int(a), b.tolist()) for a, b in dp.from_generator(gen, sig)]
        [(0, [0.0, 0.0]), (1, [1.0, 1.0]), (2, [2.0, 2.0])]
    """

    _name = "from_generator"
    # The generator may wait on the consumer (a queue the training loop fills): without a
    # buffer the user asked for, no element is requested before it is needed.
    no_read_ahead = True

    def __init__(self, generator: Callable[..., Any], output_signature: Any, args: tuple = ()):
        super().__init__()
        if not callable(generator):
            raise TypeError(
                f"from_generator: generator must be callable, got {type(generator).__name__}"
            )
        for path, leaf in nest.flatten_with_paths(output_signature):
            if not isinstance(leaf, TensorSpec):
                raise TypeError(
                    f"from_generator: output_signature component {path} must be a "
                    f"datapipe.TensorSpec, got {type(leaf).__name__}"
                )
        self._generator = generator
        self._signature = output_signature
        self._args = tuple(args) if isinstance(args, (tuple, list)) else (args,)

    @property
    def element_spec(self) -> Any:
        return self._signature

    def cardinality(self) -> int:
        return UNKNOWN_CARDINALITY

    def _make_iterator(self, ctx, epoch):
        return GeneratorIterator(self._generator, self._args, self._signature)


def resolve_signature(output_types: Any, output_shapes: Any, output_signature: Any) -> Any:
    """tf.data's ``from_generator`` argument rules: ``output_signature``, or the deprecated
    ``output_types`` (+ ``output_shapes``) made into one (see ``GeneratorDataset``)."""
    if output_signature is None and _is_signature(output_types) and output_shapes is None:
        return output_types  # from_generator(gen, signature): the signature, positionally
    if output_signature is not None:
        for given, what in ((output_types, "output_types"), (output_shapes, "output_shapes")):
            if given is not None:
                raise TypeError(
                    f"from_generator: the `{what}` argument can not be used together with "
                    "the `output_signature` argument"
                )
        return output_signature
    if output_types is None:
        raise TypeError(
            "from_generator: to specify the output signature you need to provide either the "
            "`output_signature` argument or the `output_types` argument"
        )
    warnings.warn(
        "from_generator: output_types and output_shapes are deprecated (as in tf.data); use "
        "output_signature=..., a nested structure of datapipe.TensorSpec",
        DeprecationWarning,
        stacklevel=3,
    )
    return _signature_from(output_types, output_shapes, "element")


def _is_signature(x: Any) -> bool:
    # Any TensorSpec: a signature (GeneratorDataset names a leaf that is not one).
    return any(isinstance(v, TensorSpec) for v in nest.flatten(x))


def _signature_from(types: Any, shapes: Any, path: str) -> Any:
    """``TensorSpec``s of ``types``' structure, each with the shape found at its place in
    ``shapes`` (tf.nest's ``map_structure_up_to(output_types, ...)``: below a leaf of
    ``types``, ``shapes`` is one shape). Lists in ``types`` nest, as in tf.nest."""
    if isinstance(types, list):
        types = tuple(types)
    if not nest.is_nested(types):
        return TensorSpec(_shape(shapes, path), _dtype(types, path))
    if shapes is not None and not isinstance(shapes, (tuple, list, dict)):
        raise TypeError(
            f"from_generator: output_shapes at {path} must match output_types' structure "
            f"({types!r}), got {shapes!r}"
        )
    keys = list(types) if isinstance(types, dict) else list(range(len(types)))
    if shapes is not None:
        fits = set(shapes) == set(keys) if isinstance(shapes, dict) else len(shapes) == len(keys)
        if not fits:
            raise TypeError(
                f"from_generator: output_shapes at {path} must match output_types' structure "
                f"({types!r}), got {shapes!r}"
            )
    parts = [
        _signature_from(types[k], None if shapes is None else shapes[k], f"{path}[{k!r}]")
        for k in keys
    ]
    if isinstance(types, dict):
        return type(types)(zip(keys, parts))
    return type(types)(*parts) if nest.is_namedtuple(types) else tuple(parts)


def _dtype(t: Any, path: str) -> Any:
    """A numpy or torch dtype from a dtype-like (``tf.DType`` has ``as_numpy_dtype``)."""
    if is_torch_dtype(t):
        return t
    numpy_type = getattr(t, "as_numpy_dtype", None)
    try:
        return np.dtype(numpy_type if numpy_type is not None else t)
    except TypeError as e:
        raise TypeError(f"from_generator: output_types at {path}: not a dtype: {t!r}") from e


def _shape(s: Any, path: str) -> tuple | None:
    """A ``TensorSpec`` shape from a shape-like (None: unknown rank; ``tf.TensorShape``)."""
    if s is None:
        return None
    if hasattr(s, "as_list") and hasattr(s, "rank"):  # tf.TensorShape
        return None if s.rank is None else tuple(s.as_list())
    if isinstance(s, (tuple, list)) or type(s).__name__ == "Size":
        dims = tuple(s)
        if all(d is None or (isinstance(d, (int, np.integer)) and d >= 0) for d in dims):
            return tuple(None if d is None else int(d) for d in dims)
    raise TypeError(
        f"from_generator: output_shapes at {path}: not a shape (a tuple of ints and None, or "
        f"None): {s!r}"
    )


def _convert_leaf(value: Any, spec: TensorSpec, path: str) -> Any:
    """tf.data's conversion of one yielded component, then its shape check."""
    try:
        if is_torch_dtype(spec.dtype):
            import torch

            out: Any = torch.as_tensor(value, dtype=spec.dtype)
            shape = tuple(out.shape)
        elif spec.dtype == np.dtype(object):
            if isinstance(value, (str, bytes)):
                return value
            out = np.asarray(value, dtype=object)
            shape = out.shape
        else:
            out = np.asarray(value, dtype=spec.dtype)
            shape = out.shape
    except (TypeError, ValueError, RuntimeError) as e:
        raise TypeError(
            f"component {path}: expected {spec}, got a value that can't be converted to "
            f"{dtype_name(spec.dtype)}: {value!r} ({e})"
        ) from e
    if not shapes_compatible(spec.shape, shape):
        raise TypeError(
            f"component {path}: expected shape {spec.shape} ({spec}), got shape {shape}"
        )
    if isinstance(out, np.ndarray) and out.ndim == 0 and out.dtype != np.dtype(object):
        return out[()]
    return out


def check_element(value: Any, signature: Any) -> Any:
    """``value`` converted to ``signature`` (nested ``TensorSpec``); TypeError on mismatch.
    The structure is matched down to the signature's leaves (tf.data's
    ``nest.flatten_up_to``): below a leaf, a tuple or list is that component's value."""
    parts = nest.flatten_up_to(signature, value)
    if parts is None:
        raise TypeError(
            f"the element's structure does not match output_signature: expected "
            f"{signature!r}, got {value!r}"
        )
    if not nest.is_nested(signature):
        return _convert_leaf(value, signature, "element")
    paths = nest.flatten_with_paths(signature)
    leaves = [_convert_leaf(v, s, p) for (p, s), v in zip(paths, parts)]
    return nest.pack_as(signature, leaves)


class GeneratorIterator(OpIterator):
    """Pulls from ``generator(*args)``; state is the number of elements consumed."""

    op_name = "from_generator"

    def __init__(self, generator: Callable[..., Any], args: tuple, signature: Any):
        super().__init__()
        self.generator, self.args, self.signature = generator, args, signature
        self.it: Iterator | None = None
        self.count = 0
        self.done = False
        self.pending: BaseException | None = None  # raised after the good elements before it

    def _open(self) -> Iterator:
        if self.it is None:
            try:
                self.it = iter(self.generator(*self.args))
            except Exception as e:  # noqa: BLE001 - located and re-raised
                raise annotate(self.op_name, None, e) from e
        return self.it

    def next_chunk(self, n: int) -> list:
        raise_pending(self)
        if self.done:
            return []
        it, out = self._open(), list[Any]()
        for _ in range(n):
            try:
                value = next(it)
            except StopIteration:
                self.done = True
                self._close_generator()  # at its end, as tf.data: the generator is let go
                break
            except Exception as e:  # noqa: BLE001 - generator failed at this element
                self.done = True
                return self._fail(out, e)
            try:
                out.append(check_element(value, self.signature))
            except TypeError as e:
                self.count += 1  # the bad element was consumed; iteration may go on past it
                return self._fail(out, e, self.count - 1)
            self.count += 1
        return out

    def _fail(self, out: list, e: Exception, index: int | None = None) -> list:
        self.pending = annotate(self.op_name, self.count if index is None else index, e)
        if not out:
            raise_pending(self)
        return out

    def get_state(self) -> dict:
        state: dict[str, Any] = {"count": self.count, "done": self.done}
        if self.pending is not None:
            state["pending_error"] = error_to_state(self.pending)
        return state

    def set_state(self, state: dict) -> None:
        self._close_generator()
        self.count, self.done, self.pending = 0, False, None
        target = int(state["count"])
        it = self._open()
        while self.count < target:  # replay: the generator holds no seekable position
            try:
                next(it)
            except StopIteration:
                self.done = True
                break
            self.count += 1
        self.done = self.done or bool(state["done"])
        self.pending = error_from_state(state.get("pending_error"), self.op_name)

    def _close_generator(self) -> None:
        close = getattr(self.it, "close", None)
        if close is not None:
            close()
        self.it = None

    def close(self) -> None:
        if not self.closed:
            self._close_generator()
        super().close()
