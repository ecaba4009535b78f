"""``prefetch``: overlap producing elements with consuming them (``tf.data`` semantics)."""

from __future__ import annotations

from datapipe._iterator import OpIterator
from datapipe.dataset import AUTOTUNE, Dataset, RandomAccessUnaryDataset


class PrefetchDataset(RandomAccessUnaryDataset):
    """Elements unchanged; a background thread keeps up to ``buffer_size`` elements ready.

    Args:
        buffer_size: elements to keep ready (>= 0), or ``AUTOTUNE`` (the tuner sizes it
            within ``Options.autotune.ram_budget``). 0 disables prefetching.
    """

    _name = "prefetch"
    elementwise = True
    commutes_with_shard = True

    def __init__(self, input_ds: Dataset, buffer_size: int = AUTOTUNE):
        super().__init__(input_ds)
        b = int(buffer_size)
        if b != AUTOTUNE and b < 0:
            raise ValueError(f"prefetch: buffer_size must be >= 0 or AUTOTUNE, got {buffer_size}")
        self._buffer_size = b

    def _make_iterator(self, ctx, epoch):
        inner = ctx.make(self._inputs[0], epoch)
        if self._buffer_size == 0:
            return inner
        try:
            from datapipe.parallel.prefetch import PrefetchIterator
        except ImportError:  # the threaded prefetcher lives in datapipe.parallel
            return PassThroughIterator(inner)
        return PrefetchIterator(inner, self._buffer_size, ctx)


class PassThroughIterator(OpIterator):
    op_name = "prefetch"

    def __init__(self, inner: OpIterator):
        super().__init__([inner])
        self.inner = inner

    def next_chunk(self, n: int) -> list:
        return self.inner.next_chunk(n)

    def index_base(self) -> tuple[int, int] | None:
        return self.inner.index_base()

    def get_state(self) -> dict:
        return self.inner.get_state()

    def set_state(self, state: dict) -> None:
        self.inner.set_state(state)
