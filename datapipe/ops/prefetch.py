"""``prefetch``: overlap producing elements with consuming them (``tf.data`` semantics).

The stage is a buffer lane (``policies.Buffer``): one worker thread takes chunks from the
input (``pool.ChunkSizer``: growing from 1 towards a few ms of input work) and the
consumer takes elements from the oldest chunk. An input failure is kept at its position
and raised to the consumer there; the thread then goes on (the input may continue after a
failure, e.g. under ``ignore_errors``).

``buffer_size=AUTOTUNE``: the stage first runs inline (no thread) and measures what one
element of its input costs; under ``autotune.PREFETCH_INLINE_MAX_COST_S`` (a cheap input,
e.g. batches of scalars) it stays inline, as a thread hand-off would cost more than it
hides. Otherwise the producer thread starts with a buffer of 4 elements, and the tuner
doubles it while the consumer waits on an empty buffer (tf.data's prefetch autotuning), up
to 1024, and never past the pipeline's RAM budget.

State (``parallel/replay.py``): the input's state before the oldest chunk not fully
consumed and how many of its elements were consumed; a restore replays the input from
there (recomputing the buffered elements rather than storing them). Above a
nondeterministic stage the buffered elements themselves are stored.
"""

from __future__ import annotations

from datapipe._validate import check_int
from datapipe.dataset_ops import AUTOTUNE, Dataset, RandomAccessUnaryDataset
from datapipe.parallel import policies
from datapipe.parallel.request import StageRequest


class PrefetchDataset(RandomAccessUnaryDataset):
    """Elements unchanged; a background thread keeps up to ``buffer_size`` elements ready.

    Args:
        buffer_size: elements to keep ready (>= 0), or ``AUTOTUNE`` (the tuner sizes it
            within ``Options.autotune.ram_budget``; ``None`` means ``AUTOTUNE``, as in
            tf.data). 0 disables prefetching.

    Example:
        >>> import datapipe as dp
        >>> ds = dp.range(5).map(lambda x: x * x).prefetch(dp.AUTOTUNE)
        >>> [int(x) for x in ds]
        [0, 1, 4, 9, 16]
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
        self._stage_request = StageRequest(policies.BUFFER, buffer_size=self._buffer_size)

    def _make_iterator(self, ctx, epoch):
        from datapipe.parallel.plan import plan_stage

        inner = ctx.make(self._inputs[0], epoch)
        plan = plan_stage(self.stage_request, ctx, self._inputs[0])
        if plan is None:
            return inner
        from datapipe._identity import (
            IdentifiedIterator,
            Unpaired,
            carries_ids,
            identity_base_of,
            tracked,
        )
        from datapipe.parallel.stage import StageIterator

        # Identities carried from below travel with the elements (datapipe._identity).
        if tracked(ctx) and identity_base_of(inner) is None and carries_ids(inner):
            paired = IdentifiedIterator(inner, "prefetch")
            stage = StageIterator(paired, plan, ctx, "prefetch", error_index=_no_index)
            return Unpaired(stage, "prefetch")
        # A buffer lane: no transform. Its input's failures are not prefetch's own (no
        # index of its own to name them by).
        return StageIterator(inner, plan, ctx, "prefetch", error_index=_no_index)


def _no_index(i: int) -> None:
    return None
