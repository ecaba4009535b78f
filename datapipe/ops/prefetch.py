"""``prefetch``: overlap producing elements with consuming them (``tf.data`` semantics)."""

from __future__ import annotations

from datapipe._validate import check_int
from datapipe.dataset import AUTOTUNE, Dataset, RandomAccessUnaryDataset


class PrefetchDataset(RandomAccessUnaryDataset):
    """Elements unchanged; a background thread keeps up to ``buffer_size`` elements ready.

    Args:
        buffer_size: elements to keep ready (>= 0), or ``AUTOTUNE`` (the tuner sizes it
            within ``Options.autotune.ram_budget``; ``None`` means ``AUTOTUNE``, as in
            tf.data). 0 disables prefetching.
    """

    _name = "prefetch"
    elementwise = True
    commutes_with_shard = True

    def __init__(self, input_ds: Dataset, buffer_size: int | None = AUTOTUNE):
        super().__init__(input_ds)
        if buffer_size is None:
            buffer_size = AUTOTUNE
        self._buffer_size = check_int(
            "prefetch", "buffer_size", buffer_size, 0, (AUTOTUNE,), ">= 0 or AUTOTUNE"
        )

    def _make_iterator(self, ctx, epoch):
        from datapipe.parallel.plan import decide

        inner = ctx.make(self._inputs[0], epoch)
        plan = decide(self, ctx)
        if plan is None:
            return inner
        from datapipe.parallel.prefetch import PrefetchIterator

        return PrefetchIterator(inner, plan, ctx)
