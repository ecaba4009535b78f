"""``window``: sliding windows, each a (nest of) Dataset (``tf.data.Dataset.window``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from datapipe import _structure as nest
from datapipe._functions import raise_pending
from datapipe._iterator import OpIterator
from datapipe._positions import (
    Failed,
    buffer_from_state,
    buffer_to_state,
    error_from_state,
    error_to_state,
    first_failure,
)
from datapipe._spec import DatasetSpec
from datapipe._validate import check_bool, check_int
from datapipe.dataset_ops import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset
from datapipe.errors import PipelineBrokenError


def _check_positive(name: str, value: int) -> int:
    return check_int("window", name, value, minimum=1)


class WindowDataset(Dataset):
    """Windows of ``size`` elements: window ``k`` holds the input elements
    ``k * shift + j * stride`` for ``j = 0 .. size - 1`` that exist.

    As in tf.data, each output element is a *Dataset* per component: a plain element gives
    one ``Dataset``; a tuple/dict element gives a tuple/dict of Datasets, one per
    component, each holding that component's values in window order. Use ``flat_map``
    (and ``zip``) to turn windows back into tensors, e.g.
    ``ds.window(3).flat_map(lambda w: w.batch(3))``.

    Args:
        size: elements per window (>= 1).
        shift: input elements between window starts (>= 1); default ``size``.
        stride: input elements between the elements of one window (>= 1).
        drop_remainder: drop the final windows that have fewer than ``size`` elements.

    Raises:
        ValueError: ``size``, ``shift`` or ``stride`` < 1.

    ``element_spec`` holds a ``DatasetSpec`` per component. ``cardinality()`` (tf.data):
    for a known input size ``n``, ``ceil(n / shift)``, or with ``drop_remainder``
    ``(n - (size - 1) * stride - 1) // shift + 1`` (0 when ``n`` is smaller than one
    window span); infinite and unknown stay so. Keeps random access.

    Example:
        >>> import datapipe as dp
        >>> [[int(x) for x in w] for w in dp.range(7).window(3, shift=2)]
        [[0, 1, 2], [2, 3, 4], [4, 5, 6], [6]]
        >>> [b.tolist() for b in dp.range(6).window(3).flat_map(lambda w: w.batch(3))]
        [[0, 1, 2], [3, 4, 5]]
    """

    _name = "window"
    keeps_random_access = True

    def __init__(
        self,
        input_ds: Dataset,
        size: int,
        shift: int | None = None,
        stride: int = 1,
        drop_remainder: bool = False,
    ):
        super().__init__(input_ds)
        self._size = _check_positive("size", size)
        self._shift = self._size if shift is None else _check_positive("shift", shift)
        self._stride = _check_positive("stride", stride)
        self._drop_remainder = check_bool("window", "drop_remainder", drop_remainder)

    @property
    def element_spec(self) -> Any:
        return nest.map_structure(DatasetSpec, self._inputs[0].element_spec)

    def _count(self, n: int) -> int:
        if self._drop_remainder:
            span = (self._size - 1) * self._stride + 1
            return 0 if n < span else (n - span) // self._shift + 1
        return -(-n // self._shift)

    def cardinality(self) -> int:
        n = self._inputs[0].cardinality()
        if n in (INFINITE_CARDINALITY, UNKNOWN_CARDINALITY):
            return n
        return self._count(n)

    def _window(self, elements: list) -> Any:
        """The (nest of) Dataset(s) of one window's input elements."""
        specs = nest.flatten(self._inputs[0].element_spec)
        first = elements[0]
        if not nest.is_nested(first):
            return WindowComponentDataset(elements, specs[0])
        columns = list(zip(*[nest.flatten(e) for e in elements]))
        parts = [WindowComponentDataset(list(c), s) for c, s in zip(columns, specs)]
        return nest.pack_as(first, parts)

    def _make_random_access(self, ctx):
        return _WindowAccess(self, self._inputs[0]._make_random_access(ctx))

    def _make_iterator(self, ctx, epoch):
        return WindowIterator(self, ctx.make(self._inputs[0], epoch))


class WindowComponentDataset(Dataset):
    """One component of one window: a Dataset over a list of values already computed.
    Keeps random access."""

    _name = "window"
    keeps_random_access = True

    def __init__(self, values: list, spec: Any):
        super().__init__()
        self._values, self._spec = values, spec

    @property
    def element_spec(self) -> Any:
        return self._spec

    def cardinality(self) -> int:
        return len(self._values)

    def _make_random_access(self, ctx):
        return _ListAccess(self._values)

    def _make_iterator(self, ctx, epoch):
        return self._ra_iterator(ctx, epoch)


class _ListAccess:
    def __init__(self, values: list):
        self.values = values

    def __len__(self) -> int:
        return len(self.values)

    def get_many(self, indices: Sequence[int], epoch: tuple) -> list:
        if isinstance(indices, range) and indices.step == 1:
            return self.values[indices.start : indices.stop]
        return [self.values[int(i)] for i in indices]


class _WindowAccess:
    def __init__(self, node: WindowDataset, inner: Any):
        self.node, self.inner, self.n = node, inner, len(inner)

    def __len__(self) -> int:
        return self.node._count(self.n)

    def get_many(self, indices: Sequence[int], epoch: tuple) -> list:
        node, out = self.node, list[Any]()
        for w in indices:
            start = int(w) * node._shift
            stop = min(start + (node._size - 1) * node._stride + 1, self.n)
            elems = self.inner.get_many(range(start, stop, node._stride), epoch)
            out.append(node._window(elems))
        return out


class WindowIterator(OpIterator):
    """Keeps the input elements from the current window's start onwards (at most one
    window span) in ``buf``; the buffer is part of the state.

    An input element that fails keeps its position (a ``Failed`` entry): a window that
    holds it raises its error (after the good windows before it), and one that does not
    (``stride`` or ``shift`` skip it) never sees it, as in tf.data. A broken pipeline
    (``PipelineBrokenError``) is raised at once."""

    op_name = "window"

    def __init__(self, node: WindowDataset, inner: OpIterator):
        super().__init__([inner])
        self.node, self.inner = node, inner
        self.pending: BaseException | None = None
        self.buf: list = []
        self.buf_start = 0  # input index of buf[0]
        self.next_start = 0  # input index where the next window starts
        self.input_done = False
        self.done = False

    def _pull(self, k: int) -> list:
        """Up to ``k`` input positions: elements, or one ``Failed`` for a failing one."""
        try:
            return self.inner.next_chunk(k)
        except PipelineBrokenError:
            raise
        except Exception as e:  # noqa: BLE001 - kept at its position (see the class)
            return [Failed.buffered(e)]

    def _advance_to(self, start: int) -> None:
        """Drop (and, past the buffer, pull and drop) input elements before ``start``:
        no window holds them, failed ones included."""
        drop = min(start - self.buf_start, len(self.buf))
        del self.buf[:drop]
        self.buf_start += drop
        while self.buf_start < start and not self.input_done:
            got = self._pull(min(start - self.buf_start, 4096))
            if not got:
                self.input_done = True
            self.buf_start += len(got)

    def _fill_to(self, stop: int) -> None:
        """Pull until ``buf`` reaches input index ``stop`` (exclusive) or the input ends."""
        while self.buf_start + len(self.buf) < stop and not self.input_done:
            got = self._pull(stop - self.buf_start - len(self.buf))
            if not got:
                self.input_done = True
            self.buf.extend(got)

    def next_chunk(self, n: int) -> list:
        raise_pending(self)
        node, out = self.node, list[Any]()
        while len(out) < n and not self.done:
            start = self.next_start
            self._advance_to(start)
            self._fill_to(start + (node._size - 1) * node._stride + 1)
            elems = self.buf[0 : node._size * node._stride : node._stride]
            if not elems or (node._drop_remainder and len(elems) < node._size):
                # Later windows start later, so they can only be shorter: the stream ends.
                self.done = True
                break
            self.next_start += node._shift
            k = first_failure(elems)
            if k < len(elems):  # this window holds a failed element: its error, in place
                self.pending = elems[k].error
                if not out:
                    raise_pending(self)
                return out
            out.append(node._window(elems))
        return out

    def get_state(self) -> dict:
        return {
            "pending_error": error_to_state(self.pending),
            "buf": buffer_to_state(self.buf),
            "buf_start": self.buf_start,
            "next_start": self.next_start,
            "input_done": self.input_done,
            "done": self.done,
            "input": self.inner.get_state(),
        }

    def set_state(self, state: dict) -> None:
        self.pending = error_from_state(state.get("pending_error"), "window")
        self.buf = buffer_from_state(state["buf"], "window")
        self.buf_start, self.next_start = int(state["buf_start"]), int(state["next_start"])
        self.input_done, self.done = bool(state["input_done"]), bool(state["done"])
        self.inner.set_state(state["input"])
