"""``scan``: a running state threaded through the elements (``tf.data.Dataset.scan``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from datapipe import _structure as nest
from datapipe._functions import ElementwiseIterator, as_element
from datapipe._iterator import OpIterator
from datapipe.dataset import Dataset, UnaryDataset
from datapipe.errors import annotate
from datapipe.ops.map import first_element_spec


class ScanDataset(UnaryDataset):
    """Elements ``output_i`` where ``(state_{i+1}, output_i) = scan_func(state_i, x_i)``
    and ``state_0 = initial_state`` (tf.data's ``scan``).

    Args:
        initial_state: a value or nested structure (tuple/dict) of values.
        scan_func: ``scan_func(state, element) -> (new_state, output_element)``; the
            element is passed as one argument even when it is a tuple (tf.data's rule for
            scan). ``new_state`` must have the structure of ``initial_state``.

    Raises (at iteration):
        PipelineError: ``scan_func`` raised, did not return a pair, or returned a state of
            another structure; names ``scan`` and the element's index. Outputs before it
            were delivered.

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


class ScanIterator(ElementwiseIterator):
    op_name = "scan"

    def __init__(self, inner: OpIterator, initial_state: Any, func: Callable):
        super().__init__(inner)
        self.func = func
        self.initial_state = initial_state
        self.state = initial_state

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
        self.state = new_state
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
        self.count += len(chunk)
        return out

    def get_state(self) -> dict:
        return {"scan_state": self.state, **super().get_state()}

    def set_state(self, state: dict) -> None:
        self.state = state["scan_state"]
        super().set_state(state)
