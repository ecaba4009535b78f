"""``batch``: stack consecutive elements (``tf.data.Dataset.batch``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from datapipe._batching import stack
from datapipe._functions import raise_pending
from datapipe._iterator import OpIterator
from datapipe._positions import error_from_state, error_to_state
from datapipe._spec import batched_spec
from datapipe._validate import check_bool, check_int, check_optional_bool
from datapipe.dataset_ops import (
    INFINITE_CARDINALITY,
    UNKNOWN_CARDINALITY,
    Dataset,
)
from datapipe.ops.map import validate_parallelism
from datapipe.parallel import policies
from datapipe.parallel.request import StageRequest


def batched_cardinality(n: int, batch_size: int, drop_remainder: bool) -> int:
    """Batches of ``batch_size`` from ``n`` elements (the last one shorter unless
    ``drop_remainder``); infinite and unknown cardinalities stay as they are."""
    if n in (INFINITE_CARDINALITY, UNKNOWN_CARDINALITY):
        return n
    return n // batch_size if drop_remainder else -(-n // batch_size)


class BatchDataset(Dataset):
    """Batches of ``batch_size`` consecutive elements, each component stacked on a new
    leading dimension (numpy -> ``np.stack``, torch -> ``torch.stack``).

    Args:
        batch_size: elements per batch (>= 1).
        drop_remainder: drop a final batch smaller than ``batch_size``; then the batch
            dimension of ``element_spec`` is known.
        num_parallel_calls, deterministic: parallel stacking (``AUTOTUNE`` accepted).

    Raises:
        ValueError: ``batch_size`` < 1.
        BatchShapeError (at iteration): elements of different shapes; names the element
            index and both shapes, and suggests ``padded_batch``.

    Example:
        >>> import datapipe as dp
        >>> for batch in dp.range(7).batch(3):
        ...     print(batch, batch.dtype)
        [0 1 2] int64
        [3 4 5] int64
        [6] int64
        >>> [b.shape for b in dp.range(7).batch(3, drop_remainder=True)]
        [(3,), (3,)]
    """

    _name = "batch"
    commutes_with_shard = True
    keeps_random_access = True

    def __init__(
        self,
        input_ds: Dataset,
        batch_size: int,
        drop_remainder: bool = False,
        num_parallel_calls: int | None = None,
        deterministic: bool | None = None,
    ):
        super().__init__(input_ds)
        self._batch_size = check_int("batch", "batch_size", batch_size, minimum=1)
        self._drop_remainder = check_bool("batch", "drop_remainder", drop_remainder)
        self._stage_request = StageRequest(
            policies.MAP,
            parallelism=validate_parallelism("batch", num_parallel_calls),
            deterministic=check_optional_bool("batch", "deterministic", deterministic),
        )

    @property
    def element_spec(self) -> Any:
        dim = self._batch_size if self._drop_remainder else None
        return batched_spec(self._inputs[0].element_spec, dim)

    def cardinality(self) -> int:
        return batched_cardinality(
            self._inputs[0].cardinality(), self._batch_size, self._drop_remainder
        )

    def _make_random_access(self, ctx):
        return BatchAccess(
            self._inputs[0]._make_random_access(ctx),
            self._batch_size,
            self._drop_remainder,
            lambda part, start: stack(part, "batch", start),
        )

    def _make_iterator(self, ctx, epoch):
        from datapipe._identity import (
            IdentifiedIterator,
            Unpaired,
            carries_ids,
            identity_base_of,
            tracked,
        )
        from datapipe.parallel.plan import plan_stage

        inner = ctx.make(self._inputs[0], epoch)
        # Identities carried from below (datapipe._identity): each element travels with its
        # own, and a batch takes its first element's.
        paired = tracked(ctx) and identity_base_of(inner) is None and carries_ids(inner)
        if paired:
            inner = IdentifiedIterator(inner, "batch")
        plan = plan_stage(self.stage_request, ctx, self._inputs[0])
        it: OpIterator
        if plan is not None:
            from datapipe.parallel.batch import parallel_batch_iterator

            it = parallel_batch_iterator(inner, self._batch_size, self._drop_remainder, plan,
                                         ctx, paired)  # fmt: skip
        else:
            make = stack_identified if paired else None
            it = BatchIterator(inner, self._batch_size, self._drop_remainder, make)
        return Unpaired(it, "batch") if paired else it


def stack_identified(part: list, start: int) -> tuple[int, Any]:
    """A batch of ``(identity, element)`` pairs: ``(its first element's identity, the
    stacked elements)`` (``datapipe._identity``)."""
    return part[0][0], stack([x for _, x in part], "batch", start)


class BatchAccess:
    """Random access to batches (``ds[i]`` of ``batch``, ``padded_batch``,
    ``ragged_batch``): batch ``i`` is ``make(inner[i*b : min((i+1)*b, n)], i*b)``, the
    input elements it holds read with one ``get_many`` call, so it equals the ``i``-th
    batch that iteration (``BatchIterator``, same ``make``) builds.

    Args:
        inner: the input's random access (length ``n``).
        batch_size: ``b``.
        drop_remainder: leave out a last batch shorter than ``b``.
        make: ``make(elements, start_index) -> batch`` (the op's stacking or padding).
    """

    def __init__(
        self,
        inner: Any,
        batch_size: int,
        drop_remainder: bool,
        make: Callable[[list, int], Any],
    ):
        self.inner, self.b, self.make = inner, batch_size, make
        self.n = batched_cardinality(len(inner), batch_size, drop_remainder)

    def __len__(self) -> int:
        return self.n

    def get_many(self, indices: Sequence[int], epoch: tuple) -> list:
        total, b = len(self.inner), self.b
        out = []
        for i in indices:
            start = int(i) * b
            out.append(
                self.make(self.inner.get_many(range(start, min(start + b, total)), epoch), start)
            )
        return out


class BatchIterator(OpIterator):
    """Pulls ``n * batch_size`` input elements per ``next_chunk(n)`` and stacks them.

    A batch that fails to build (``make`` raised) is raised after the good batches before
    it; the input elements after it are kept (``leftover``, part of the state), so no
    good batch is lost and iteration may continue past the failure (``ignore_errors``).

    Args:
        make: ``make(elements, start_index) -> batch``; ``stack`` by default
            (``padded_batch`` passes its padding function).
    """

    op_name = "batch"

    def __init__(
        self,
        inner: OpIterator,
        batch_size: int,
        drop_remainder: bool,
        make: Callable[[list, int], Any] | None = None,
        op_name: str = "batch",
    ):
        super().__init__([inner])
        self.inner, self.b, self.drop = inner, batch_size, drop_remainder
        self.make = make or (lambda part, start: stack(part, op_name, start))
        self.op_name = op_name
        self.count = 0  # input elements consumed into batches (built or failed)
        self.done = False  # the input has ended
        self.leftover: list = []  # input elements pulled but not yet batched
        self.pending: BaseException | None = None

    def _pull(self, need: int) -> list:
        """Up to ``need`` input elements (fewer at the end, or when an input error ended
        the pull: ``pending``), read into ``leftover`` and left there until ``next_chunk``
        commits the batches it built: an interrupt anywhere in between leaves them in the
        state (each read goes straight into ``leftover`` in one statement)."""
        while len(self.leftover) < need and not self.done:
            have = len(self.leftover)
            try:
                self.leftover = self.leftover + self.inner.next_chunk(need - have)
            except Exception as e:  # noqa: BLE001 - the full batches before it come first
                if have < self.b:
                    raise
                self.pending = e
                break
            if len(self.leftover) == have:
                self.done = True
        return self.leftover[:need]

    def next_chunk(self, n: int) -> list:
        raise_pending(self)
        b = self.b
        elems = self._pull(n * b)
        out: list = []
        used = 0  # elements of ``elems`` in built (or dropped) batches
        for s in range(0, len(elems), b):
            part = elems[s : s + b]
            if len(part) < b and self.pending is not None:  # an input error ended this pull
                break
            if len(part) < b and self.drop:  # only the input's last, short batch
                used += len(part)
                break
            try:
                batch = self.make(part, self.count + s)
            except Exception as e:  # noqa: BLE001 - delivered after the good batches
                # One statement commits the batches before it, the failing one, and the
                # failure (raised now when nothing good came before it).
                end = s + len(part)
                self.count, self.leftover, self.pending = self.count + end, self.leftover[end:], e
                del e
                if not out:
                    raise_pending(self)
                return out
            out.append(batch)
            used = s + len(part)
        # The commit: its last statement before the return (an interrupt before it leaves
        # every element in ``leftover``).
        self.count, self.leftover = self.count + used, self.leftover[used:]
        return out

    def identity_base(self) -> tuple[int, int] | None:
        """A batch's identity (what draws in a map above key by, ``datapipe._identity``):
        its first element's where the input's are linear, batch ``k`` starting at input
        element ``k * batch_size`` (distinct batches, distinct first elements)."""
        from datapipe._identity import identity_base_of

        base = identity_base_of(self.inner)
        if base is None:
            return None
        return (base[0] * self.b, base[1])

    def get_state(self) -> dict:
        return {
            "count": self.count,
            "done": self.done,
            "leftover": list(self.leftover),
            "pending_error": error_to_state(self.pending),
            "input": self.inner.get_state(),
        }

    def set_state(self, state: dict) -> None:
        self.count, self.done = int(state["count"]), bool(state["done"])
        self.leftover = list(state.get("leftover", []))
        self.pending = error_from_state(state.get("pending_error"), self.op_name)
        self.inner.set_state(state["input"])
