"""Test-only ops: a slow source and a buffered stage that implements the gauge protocol."""

from __future__ import annotations

import time
from typing import Any

from datapipe._iterator import OpIterator
from datapipe.dataset_ops import Dataset


class SlowSource(Dataset):
    """``n`` int elements, taking ``delay`` seconds per element produced (``sleep(delay *
    k)`` per chunk of ``k``: ``time.sleep``, or a fake clock's)."""

    _name = "slow_source"

    def __init__(self, n: int, delay: float, sleep: Any = time.sleep):
        super().__init__()
        self._n, self._delay, self._sleep = n, delay, sleep

    @property
    def element_spec(self) -> Any:
        return None

    def cardinality(self) -> int:
        return self._n

    def _make_iterator(self, ctx, epoch):
        return _SlowIterator(self._n, self._delay, self._sleep)


class _SlowIterator(OpIterator):
    op_name = "slow_source"

    def __init__(self, n: int, delay: float, sleep: Any):
        super().__init__()
        self.n, self.delay, self.sleep, self.i = n, delay, sleep, 0

    def next_chunk(self, n: int) -> list:
        k = min(n, self.n - self.i)
        self.sleep(self.delay * k)
        out = list(range(self.i, self.i + k))
        self.i += k
        return out

    def get_state(self) -> dict:
        return {"i": self.i}

    def set_state(self, state: dict) -> None:
        self.i = int(state["i"])


class Gauged(Dataset):
    """Elements unchanged; its iterator reports gauges as a buffered parallel stage would:
    call k (0-based) sees ``buffer_fill = k % 3``, ``buffer_size = 4``,
    ``parallelism = 2``, ``busy_s = 0.5``, and records one AUTOTUNE event when built."""

    _name = "gauged"

    def __init__(self, input_ds: Dataset):
        super().__init__(input_ds)

    @property
    def element_spec(self) -> Any:
        return self._inputs[0].element_spec

    def _make_iterator(self, ctx, epoch):
        return GaugedIterator(ctx.make(self._inputs[0], epoch))


class GaugedIterator(OpIterator):
    op_name = "gauged"

    def __init__(self, inner: OpIterator):
        super().__init__([inner])
        self.inner = inner
        self.calls = 0
        self.autotune_events = [(time.perf_counter(), "parallelism", 1, 2)]

    def stats_gauges(self) -> dict:
        return {
            "buffer_fill": self.calls % 3,
            "buffer_size": 4,
            "parallelism": 2,
            "busy_s": 0.5,
        }

    def next_chunk(self, n: int) -> list:
        self.calls += 1
        return self.inner.next_chunk(n)

    def get_state(self) -> dict:
        return {"calls": self.calls, "input": self.inner.get_state()}

    def set_state(self, state: dict) -> None:
        self.calls = int(state["calls"])
        self.inner.set_state(state["input"])
