"""``group_by_window``: group elements by key, and reduce each full window of a key
(``tf.data.Dataset.group_by_window``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from datapipe._functions import call
from datapipe._iterator import OpIterator
from datapipe._spec import UnknownSpec, seen_spec
from datapipe._validate import check_optional_int
from datapipe.dataset_ops import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset
from datapipe.errors import annotate
from datapipe.ops.window import WindowComponentDataset


def as_key(value: Any, what: str) -> int:
    """A scalar integer returned by a user function (``key_func``, a bucket length)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{what} must return a scalar integer, got a bool")
    try:
        arr = np.asarray(value.cpu() if hasattr(value, "cpu") else value)
    except Exception:  # noqa: BLE001 - reported below with the value's type
        arr = np.asarray(None, dtype=object)
    if arr.shape != () or arr.dtype.kind not in "iu":
        raise TypeError(
            f"{what} must return a scalar integer, got {type(value).__name__}"
            + (f" of shape {arr.shape} and dtype {arr.dtype}" if arr.dtype != object else "")
        )
    return int(arr)


class GroupByWindowDataset(Dataset):
    """Elements grouped by ``key_func``; each time a key's group holds its window size of
    elements, ``reduce_func(key, window)`` turns it into a Dataset whose elements are
    delivered (``tf.data.Dataset.group_by_window``).

    Args:
        key_func: element (unpacked when a plain tuple, as tf.data) -> a scalar integer.
        reduce_func: ``(key, window) -> Dataset``; ``key`` is a ``numpy.int64`` and
            ``window`` a Dataset of the group's elements, in input order.
        window_size: elements per window (>= 1) for every key; or
        window_size_func: ``key -> window size`` (a positive integer), called once per key
            (the first time the key is seen). Exactly one of the two must be given.

    When the input ends, the groups that are not full are reduced too, in ascending key
    order (tf.data's order). Windows of a key are reduced in the order they fill.

    Raises:
        ValueError: both or neither of ``window_size`` / ``window_size_func``;
            ``window_size`` < 1.
        TypeError: a function argument is not callable, ``window_size`` not an integer.
        PipelineError (at iteration): ``key_func`` did not return a scalar integer,
            ``window_size_func`` returned a value < 1 ("Window size must be greater than
            zero"), ``reduce_func`` raised or did not return a Dataset; names the op and
            the input element's index (for ``reduce_func``: the count of input elements
            read when the window was reduced).

    ``element_spec`` is the Dataset ``reduce_func`` makes from the first element's window
    (``reduce_func`` is not traced). ``cardinality()`` is unknown (infinite stays
    infinite). The iterator state holds the open groups' elements, the window sizes seen,
    and the window being delivered (``reduce_func`` is called again on restore). No random
    access. Under a worker context the auto-shard point goes above this op: every worker
    groups the whole stream and keeps its share of the outputs (``reduce_func`` may depend
    on whole windows); ``bucket_by_sequence_length`` shards below itself.

    Example:
        >>> import datapipe as dp
        >>> ds = dp.range(10).group_by_window(
        ...     key_func=lambda x: x % 2, reduce_func=lambda key, w: w.batch(3), window_size=3)
        >>> [b.tolist() for b in ds]
        [[0, 2, 4], [1, 3, 5], [6, 8], [7, 9]]
    """

    _name = "group_by_window"
    expands = True  # reduce_func may return more elements than a window holds

    def __init__(
        self,
        input_ds: Dataset,
        key_func: Callable,
        reduce_func: Callable,
        window_size: int | None = None,
        window_size_func: Callable | None = None,
    ):
        super().__init__(input_ds)
        op = self._name
        for name, f in (("key_func", key_func), ("reduce_func", reduce_func)):
            if not callable(f):
                raise TypeError(f"{op}: {name} must be callable, got {type(f).__name__}")
        size = check_optional_int(op, "window_size", window_size, minimum=1)
        if (size is None) == (window_size_func is None):
            raise ValueError(f"{op}: give exactly one of window_size and window_size_func")
        if window_size_func is not None and not callable(window_size_func):
            raise TypeError(
                f"{op}: window_size_func must be callable, got {type(window_size_func).__name__}"
            )
        self._key_func, self._reduce_func = key_func, reduce_func
        self._window_size, self._window_size_func = size, window_size_func
        self._spec_cache: Any = None

    @property
    def element_spec(self) -> Any:
        if self._spec_cache is None:
            first = self._inputs[0]._first_element()
            if first is None:
                return UnknownSpec()
            try:
                window = self.reduce_window(self.key_of(first), [first])
            except Exception as e:  # noqa: BLE001 - located and re-raised
                raise annotate(self._name, 0, e) from e
            self._spec_cache = seen_spec(window.element_spec)
        return self._spec_cache

    def cardinality(self) -> int:
        n = self._inputs[0].cardinality()
        return INFINITE_CARDINALITY if n == INFINITE_CARDINALITY else UNKNOWN_CARDINALITY

    def key_of(self, x: Any) -> int:
        return as_key(call(self._key_func, x), "key_func")

    def size_of(self, key: int) -> int:
        if self._window_size_func is None:
            assert self._window_size is not None  # exactly one of them is given
            return self._window_size
        size = as_key(self._window_size_func(np.int64(key)), "window_size_func")
        if size < 1:
            raise ValueError(f"Window size must be greater than zero, but got {size}")
        return size

    def reduce_window(self, key: int, elements: list) -> Dataset:
        window = WindowComponentDataset(list(elements), self._inputs[0].element_spec)
        out = self._reduce_func(np.int64(key), window)
        if not isinstance(out, Dataset):
            raise TypeError(f"reduce_func must return a Dataset, got {type(out).__name__}")
        return out

    def _make_iterator(self, ctx, epoch):
        return GroupByWindowIterator(self, ctx.make(self._inputs[0], epoch), ctx, epoch)


class GroupByWindowIterator(OpIterator):
    """Reads the input one chunk at a time into the groups; a full group is reduced and
    its Dataset delivered before more input is read."""

    op_name = "group_by_window"

    def __init__(self, node: GroupByWindowDataset, inner: OpIterator, ctx: Any, epoch: tuple):
        super().__init__([inner])
        self.node, self.inner, self.ctx, self.epoch = node, inner, ctx, epoch
        self.groups: dict[int, list] = {}
        self.sizes: dict[int, int] = {}
        self.count = 0  # input elements read
        self.leftover: list = []  # input elements read but not yet grouped
        self.done = False
        self.flushed = 0  # windows reduced (their sub-datasets' epochs)
        self.window: tuple | None = None  # (key, elements) being delivered
        self.sub: OpIterator | None = None

    def _open(self, key: int, elements: list) -> OpIterator:
        try:
            sub = self.node.reduce_window(key, elements)
        except Exception as e:  # noqa: BLE001 - located at the window's last element
            raise annotate(self.op_name, self.count - 1, e) from e
        it = self.sub = self.ctx.make(sub, (*self.epoch, self.flushed))
        self.window = (key, elements)
        self.inputs = [self.inner, it]
        return it

    def _close_sub(self) -> None:
        if self.sub is not None:
            self.sub.close()
        self.sub, self.window = None, None
        self.inputs = [self.inner]

    def _add(self, x: Any) -> tuple | None:
        """Group ``x``; the (key, window) it completes, or None."""
        try:
            key = self.node.key_of(x)
            if key not in self.sizes:
                self.sizes[key] = self.node.size_of(key)
        except Exception as e:  # noqa: BLE001 - located and handed to the consumer
            raise annotate(self.op_name, self.count, e) from e
        finally:
            self.count += 1
        group = self.groups.setdefault(key, [])
        group.append(x)
        if len(group) < self.sizes[key]:
            return None
        del self.groups[key]
        return key, group

    def _next_window(self) -> tuple | None:
        while not self.done or self.leftover:
            if not self.leftover:
                self.leftover = self.inner.next_chunk(16)
                if not self.leftover:
                    self.done = True
                    break
            x = self.leftover.pop(0)
            full = self._add(x)
            if full is not None:
                return full
        if self.groups:  # end of input: the rest, in ascending key order
            key = min(self.groups)
            return key, self.groups.pop(key)
        return None

    def next_chunk(self, n: int) -> list:
        while True:
            sub = self.sub
            if sub is None:
                window = self._next_window()
                if window is None:
                    return []
                self.flushed += 1
                sub = self._open(*window)
            out = sub.next_chunk(n)
            if out:
                return out
            self._close_sub()

    def get_state(self) -> dict:
        return {
            "groups": [[k, list(v)] for k, v in self.groups.items()],
            "sizes": [[k, v] for k, v in self.sizes.items()],
            "count": self.count,
            "leftover": list(self.leftover),
            "done": self.done,
            "flushed": self.flushed,
            "window": None if self.window is None else [self.window[0], list(self.window[1])],
            "sub": None if self.sub is None else self.sub.get_state(),
            "input": self.inner.get_state(),
        }

    def set_state(self, state: dict) -> None:
        self._close_sub()
        self.groups = {int(k): list(v) for k, v in state["groups"]}
        self.sizes = {int(k): int(v) for k, v in state["sizes"]}
        self.count, self.done = int(state["count"]), bool(state["done"])
        self.leftover = list(state["leftover"])
        self.flushed = int(state["flushed"])
        self.inner.set_state(state["input"])
        if state["window"] is not None:
            key, elements = state["window"]
            self.flushed -= 1  # _open uses the window's own epoch
            sub = self._open(int(key), list(elements))
            self.flushed += 1
            sub.set_state(state["sub"])
