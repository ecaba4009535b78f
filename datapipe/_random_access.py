"""Random access: datasets that know their length and can fetch element i directly.

Sources such as arrays, ``range`` and file lists can; ops such as ``map``, ``shard``,
``take``, ``skip``, finite ``repeat``, ``batch``, ``zip`` and ``global_shuffle`` keep the
ability (Grain's map-style datasets). Streaming ops (buffer ``shuffle``, ``filter``,
``interleave``, generators) lose it. ``global_shuffle`` relies on it, and a source iterator
over it needs only an integer of state. ``Dataset.__getitem__`` (``ds[i]``) and
``__getitems__`` expose it (``get_item`` / ``get_items`` below).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from datapipe._functions import raise_pending
from datapipe._iterator import OpIterator
from datapipe._positions import error_from_state, error_to_state


class RandomAccess:
    """Length plus fetch-by-index for one ``iter()`` (seeds are already resolved).

    ``get_many(indices, epoch)`` returns the elements at ``indices`` (a ``range`` for the
    contiguous fast path, or a list of ints) in that order; ``epoch`` is the tuple that
    random ops mix into their seeds.
    """

    def __len__(self) -> int:
        raise NotImplementedError

    def get_many(self, indices: Sequence[int], epoch: tuple) -> list:
        raise NotImplementedError


def get_grouped(
    indices: Sequence[int],
    locate: Callable[[int], tuple[Hashable, int]],
    fetch: Callable[[Hashable, list[int]], list],
) -> list:
    """The elements at ``indices`` of an access made of parts (``concatenate``'s inputs,
    ``repeat``'s repetitions): ``locate(i)`` is ``(part, index within the part)``, and each
    run of consecutive indices in one part is read with one ``fetch(part, indices)`` call,
    so the parts see batched reads. Elements come back in the order of ``indices``."""
    out: list = []
    run: list[int] = []
    run_part = None
    for i in indices:
        part, j = locate(int(i))
        if part != run_part and run:
            out.extend(fetch(run_part, run))
            run = []
        run_part = part
        run.append(j)
    if run:
        out.extend(fetch(run_part, run))
    return out


class RandomAccessIterator(OpIterator):
    """Reads a ``RandomAccess`` in index order; state is one integer."""

    def __init__(self, ra: RandomAccess, epoch: tuple, op_name: str):
        super().__init__()
        self.ra, self.epoch, self.op_name = ra, epoch, op_name
        self.index = 0
        self.length = len(ra)
        self.pending: BaseException | None = None
        # Source indices that are not linear in the requested ones (a shuffling file
        # list's, an auto-sharding share's after an elastic resume): the identities a
        # map above draws by (datapipe._identity), per chunk.
        linear = hasattr(ra, "index_base")
        self._ids_of = None if linear else getattr(ra, "identities", None)
        self._last: Any = None

    def next_chunk(self, n: int) -> list:
        raise_pending(self)
        start = self.index
        stop = min(self.index + n, self.length)
        if stop <= self.index:
            return []
        try:
            out = self.ra.get_many(range(self.index, stop), self.epoch)
        except Exception:  # noqa: BLE001 - located below
            out = self._one_by_one(stop)
        else:
            self.index = stop
        if self._ids_of is not None:  # the delivered elements: the first len(out) asked
            self._last = self._ids_of(range(start, start + len(out)), self.epoch)
        return out

    def carries_ids(self) -> bool:
        return self._ids_of is not None

    def last_ids(self) -> Any:
        return self._last

    def _one_by_one(self, stop: int) -> list:
        """After a failed chunk: deliver the good elements before the failing one, then its
        error, and move past it (so ``ignore_errors`` continues instead of retrying it)."""
        out: list = []
        for i in range(self.index, stop):
            try:
                out.extend(self.ra.get_many(range(i, i + 1), self.epoch))
            except Exception as e:  # noqa: BLE001 - delivered after the good elements
                self.index = i + 1
                if not out:
                    raise
                self.pending = e
                return out
        self.index = stop
        return out

    def index_base(self) -> tuple[int, int] | None:
        # A view such as shard's maps its indices onto the source's: it says so itself.
        return getattr(self.ra, "index_base", None if self._ids_of is not None else (1, 0))

    def get_state(self) -> dict:
        if self.pending is None:  # the usual case: the state is one integer
            return {"index": self.index}
        return {"index": self.index, "pending_error": error_to_state(self.pending)}

    def set_state(self, state: dict) -> None:
        self.index = int(state["index"])
        self.pending = error_from_state(state.get("pending_error"), self.op_name)


# ---- public random access: ds[i] ------------------------------------------------------------
# ``ds[i]`` reads element i of the epoch the first ``iter()`` reads (epoch (0,)): the same
# seeds, so ``[ds[i] for i in range(len(ds))] == list(ds)`` on a fresh seeded pipeline.
FIRST_EPOCH = (0,)


def _view(dataset: Any) -> RandomAccess:
    """The ``RandomAccess`` ``dataset[i]`` reads: the graph after the ``iter()``-time
    rewrites for this process (auto-sharding for its rank, not split among DataLoader
    workers; not the push-down of index ops, an iterator optimisation), built once per
    worker context and kept on the dataset. Its seeds are the ones ``iter()`` draws
    (without an op seed or ``Options.seed``: the ops' own entropy, ``datapipe._context``)."""
    from datapipe._context import IterContext
    from datapipe._rewrites import push_index_ops
    from datapipe.dataset_ops import REWRITES, raw_cardinality
    from datapipe.distribute.context import process_level, resolve_worker_context
    from datapipe.errors import RandomAccessError

    with process_level(), sharded_by_sampler(dataset):
        worker = resolve_worker_context(dataset.options)
        key = (worker.index, worker.count)
        cached = dataset.__dict__.get("_ra_view")
        if cached is not None and cached[0] == key:
            return cached[1]
        breaker = dataset._random_access_breaker()
        if breaker is not None:
            raise RandomAccessError(
                f"dataset[index]: the pipeline lost random access at op '{breaker}'; iterate "
                f"it instead (for x in ds), or index before '{breaker}' (map, random_map, "
                "global_shuffle, batch, padded_batch, ragged_batch, shard, skip, take, zip, "
                "concatenate, enumerate and finite repeat keep random access)"
            )
        ctx = IterContext.for_graph(dataset)
        ctx.dry_run = True  # no logging and no per-worker caches: nothing is iterated
        with raw_cardinality():
            root = dataset
            for rewrite in REWRITES:
                # The push-down of shard/skip only lets iterators compute fewer elements;
                # read by index, random_map keys its draws on its own input's index.
                if rewrite is not push_index_ops:
                    root = rewrite(root, ctx)
            ctx.root = root
            ra = root._make_random_access(ctx)
    dataset.__dict__["_ra_view"] = (key, ra)
    return ra


def _position(i: Any, n: int) -> int:
    if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
        raise TypeError(f"dataset indices must be integers or slices, not {type(i).__name__}")
    j = int(i) + n if int(i) < 0 else int(i)
    if not 0 <= j < n:
        raise IndexError(f"dataset index {int(i)} out of range for {n} elements")
    return j


def get_item(dataset: Any, index: Any) -> Any:
    """``dataset[index]``: see ``Dataset.__getitem__``."""
    ra = _view(dataset)
    n = len(ra)
    if isinstance(index, slice):
        positions = range(n)[index]
        if not positions:
            return []
        if positions.step != 1:  # range fast paths expect step 1
            return ra.get_many(list(positions), FIRST_EPOCH)
        return ra.get_many(positions, FIRST_EPOCH)
    return ra.get_many(range(_position(index, n), _position(index, n) + 1), FIRST_EPOCH)[0]


def get_items(dataset: Any, indices: Sequence[Any]) -> list:
    """``dataset.__getitems__(indices)``: the elements at ``indices`` in one read (torch's
    ``DataLoader`` calls it with each batch's indices)."""
    ra = _view(dataset)
    n = len(ra)
    return ra.get_many([_position(i, n) for i in indices], FIRST_EPOCH)


# ---- another owner of sharding: a DistributedSampler over ds ---------------------------------
def note_outer_sharder(dataset: Any, name: str | None) -> None:
    """``len(dataset)`` was called by ``name`` (``context.outer_sharder``): a sampler or
    loader that hands each rank its own indices. A ``DistributedSampler`` (torch's, the
    one Lightning injects) calls ``len`` when it is built, before any loader worker starts:
    datapipe steps aside, and this object's ``len``/``ds[i]`` cover the whole dataset from
    then on (in the workers too: the mark is in its ``__dict__``). Accelerate's ``prepare``
    reads ``len`` only once its loader's workers may already run with the rank's view, so
    it is refused with the fix. Nothing happens when datapipe would not shard by rank."""
    from datapipe.distribute.auto_shard import AutoShardPolicy
    from datapipe.distribute.context import resolve_process
    from datapipe.errors import AutoShardError

    if name is None or dataset.__dict__.get("_sampler_shards"):
        return
    options = dataset.options
    if options.distribute.auto_shard_policy == AutoShardPolicy.OFF:
        return
    if resolve_process(options)[1] == 1:
        return
    if not name.startswith("accelerate."):
        dataset.__dict__["_sampler_shards"] = name
        dataset.__dict__.pop("_ra_view", None)
        return
    raise AutoShardError(
        f"{name} (Accelerate's prepare) shards this map-style Dataset's indices by rank, "
        "and datapipe's auto-sharding already gives each rank its share: pass "
        "ds.with_options(dp.Options(distribute=dp.DistributeOptions(auto_shard_policy="
        "dp.AutoShardPolicy.OFF))) to the DataLoader, or hand Accelerate "
        "ds.as_torch_dataset() (datapipe then steps aside)"
    )


def sharded_by_sampler(dataset: Any) -> Any:
    """The context in which ``dataset``'s length and elements are read: the whole index
    space when a sampler shards it (``note_outer_sharder``), else nothing changes."""
    from contextlib import nullcontext

    from datapipe.distribute.context import whole_index_space

    return whole_index_space() if dataset.__dict__.get("_sampler_shards") else nullcontext()
