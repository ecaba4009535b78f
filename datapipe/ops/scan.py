"""``scan``: a running state threaded through the elements (``tf.data.Dataset.scan``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from datapipe import _structure as nest
from datapipe._functions import ElementwiseIterator, as_element
from datapipe._iterator import OpIterator
from datapipe._spec import is_torch, is_torch_dtype
from datapipe.dataset_ops import Dataset, UnaryDataset
from datapipe.errors import annotate
from datapipe.ops.map import first_element_spec
from datapipe.sources.tensors import as_leaf


class ScanDataset(UnaryDataset):
    """Elements ``output_i`` where ``(state_{i+1}, output_i) = scan_func(state_i, x_i)``
    and ``state_0 = initial_state`` (tf.data's ``scan``).

    Args:
        initial_state: a value or nested structure (tuple/dict) of values; lists and
            Python numbers become numpy values, as tf.data makes them tensors (so does
            each new state).
        scan_func: ``scan_func(state, element) -> (new_state, output_element)``; the
            element is passed as one argument even when it is a tuple (tf.data's rule for
            scan). ``new_state`` must have the structure of ``initial_state``.

    Raises (at iteration):
        PipelineError: ``scan_func`` raised, did not return a pair, or returned a state of
            another structure or element types (a numpy/torch value in ``initial_state``
            fixes its dtype, a Python value its kind: int, float, ...); names ``scan`` and
            the element's index. Outputs before it were delivered.

    The running state is part of the iterator state, so a checkpoint resumes the scan
    exactly. ``element_spec`` is inferred from the first output (``scan_func`` is not
    traced); cardinality is the input's. Random access is lost (state depends on all
    earlier elements).

    Example:
        >>> import datapipe as dp
        >>> [int(x) for x in dp.range(5).scan(0, lambda s, x: (s + x, s + x))]
        [0, 1, 3, 6, 10]
    """

    _name = "scan"

    def __init__(self, input_ds: Dataset, initial_state: Any, scan_func: Callable):
        super().__init__(input_ds)
        if not callable(scan_func):
            raise TypeError(f"scan: scan_func must be callable, got {type(scan_func).__name__}")
        self._initial_state = initial_state
        self._func = scan_func
        self._spec_cache: Any = None

    @property
    def element_spec(self) -> Any:
        return first_element_spec(self)

    def _make_iterator(self, ctx, epoch):
        return ScanIterator(ctx.make(self._inputs[0], epoch), self._initial_state, self._func)


def _dtype_of(x: Any) -> Any:
    return x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype


def _state_rule(leaf: Any) -> tuple[Any, bool]:
    """(dtype, exact) for one leaf of ``initial_state``: a typed value (numpy, torch)
    declares its dtype, which the new state must keep (tf.data: "the element types for
    the new state must match the initial state"); a Python value only its kind (int,
    float, ...), since its numpy dtype is a default, not the user's choice."""
    typed = isinstance(leaf, (np.ndarray, np.generic)) or is_torch(leaf)
    return _dtype_of(leaf), typed


def _kind(dtype: Any) -> str:
    if is_torch_dtype(dtype):
        return "f" if dtype.is_floating_point else "c" if dtype.is_complex else "i"
    return np.dtype(dtype).kind


class ScanIterator(ElementwiseIterator):
    op_name = "scan"

    def __init__(self, inner: OpIterator, initial_state: Any, func: Callable):
        super().__init__(inner)
        self.func = func
        self.rules = [_state_rule(v) for v in nest.flatten(initial_state)]
        # The state is a value of tensors (tf.data): lists and Python numbers as numpy.
        self.initial_state = nest.map_structure(as_leaf, initial_state)
        self.state = self.initial_state

    def _check_state_types(self, new_state: Any) -> None:
        for (dtype, exact), v in zip(self.rules, nest.flatten(new_state)):
            got = _dtype_of(v)
            if (got != dtype) if exact else (_kind(got) != _kind(dtype)):
                raise TypeError(
                    "scan_func returned a new state whose element types do not match the "
                    f"initial state: {got} where initial_state has {dtype}"
                )

    def _step(self, x: Any) -> Any:
        result = as_element(self.func(self.state, x))  # [state, output]: a pair (tf.data)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise TypeError(
                "scan_func must return a pair (new_state, output_element), got "
                f"{type(result).__name__}"
            )
        new_state, output = result
        if not nest.same_structure(new_state, self.initial_state):
            raise TypeError(
                "scan_func returned a new state whose structure differs from initial_state"
            )
        self._check_state_types(new_state)
        self.state = nest.map_structure(as_leaf, new_state)
        return output

    def next_chunk(self, n: int) -> list:
        self._raise_pending()
        chunk = self._take(n)
        out = []
        for j, x in enumerate(chunk):
            try:
                out.append(self._step(x))
            except Exception as e:  # noqa: BLE001 - located and handed to the consumer
                # The state stays as before the failing element; the rest of the chunk is
                # kept so iteration may continue past it (ignore_errors).
                return self._fail(chunk, j, out, annotate("scan", self.count + j, e), e)
        self._commit(len(chunk))
        return out

    def get_state(self) -> dict:
        return {"scan_state": self.state, **super().get_state()}

    def set_state(self, state: dict) -> None:
        self.state = state["scan_state"]
        super().set_state(state)
