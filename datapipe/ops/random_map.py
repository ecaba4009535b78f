"""``random_map``: a map whose function also gets a random generator, reproducible per
element (Grain's ``RandomMapTransform``; tf.data users write ``map`` with stateless ops)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from datapipe import _draws
from datapipe._draws import element_rng
from datapipe._functions import ReturnsElement
from datapipe._identity import (
    LOST,
    ByIdentity,
    IdentifiedIterator,
    Unpaired,
    access_plan,
    draw_plan,
)
from datapipe._iterator import OpIterator
from datapipe._validate import check_seed
from datapipe.dataset_ops import Dataset, RandomAccessUnaryDataset
from datapipe.ops.map import (
    MapAccess,
    MapIterator,
    check_key,
    first_element_spec,
    map_request,
)


class RandomCall:
    """``f(element, rng)`` for element ``index`` (``f(*element, rng)`` for a plain tuple,
    tf.data's convention). Called with ``(index, element)``; picklable when ``f`` is.
    ``stage_draws``: the key random layers that ``f`` calls without ``generator`` draw
    from (``datapipe._draws``)."""

    def __init__(self, func: Callable, key: np.ndarray, base: tuple[int, int] | None = None,
                 stage_draws: Any = None):  # fmt: skip
        self.func, self.key, self.stage_draws = func, key, stage_draws
        # (stride, offset): the stream index -> the index in the random-access source, when
        # a shard (explicit or auto-sharding's) sits below; draws then don't depend on it.
        self.stride, self.offset = base if base is not None else (1, 0)

    def __call__(self, index: Any, element: Any) -> Any:
        draws = self.stage_draws
        if draws is not None and draws.refusal is not None and _draws.position() is None:
            # no identity on this worker (datapipe._identity): the index would repeat
            raise _draws.DrawKeyError(draws.refusal)
        rng = element_rng(self.key, self.offset + self.stride * int(index))
        if type(element) is tuple:
            return self.func(*element, rng)
        return self.func(element, rng)


class RandomMapDataset(RandomAccessUnaryDataset):
    """Elements ``map_func(x, rng)``, where ``rng`` is a ``numpy.random.Generator`` that
    depends only on (seed, element index, epoch).

    Args:
        map_func: ``f(element, rng)``; with a plain-tuple element ``f(*element, rng)``, as
            ``map`` unpacks tuples. Must not keep ``rng`` after returning (the generator
            object is re-keyed for the next element of the same thread).
        seed: op seed; default derives from ``Options.seed`` and the op's position.
        num_parallel_calls: None (sequential), a positive int, or ``AUTOTUNE``. Results are
            identical for every value: each element's generator depends on its index, not
            on which thread or in which order it runs.
        deterministic: keep input order with parallel calls (default: ``Options``).
        executor: ``"thread"``, ``"process"`` or None, as for ``map``; the values drawn
            are the same for every executor.
        key: a function of the element (called as ``map_func`` is, without ``rng``)
            returning a unique ``int``, ``str`` or ``bytes``: the identity to draw by.

    The index is the element's identity (``datapipe._identity``; docs/architecture.md,
    "The element's identity"): ``key(element)`` when ``key`` is given; else its index in
    the random-access source below (through ``shard``, ``skip``, ``take``, ``map`` and
    auto-sharding), carried through ``shuffle`` buffers and streaming shards (the
    element's pre-shuffle identity); else its position in a stream that nothing below
    shards. So the draws do not depend on how the data is sharded among ranks and
    DataLoader workers, and equal the single-process pipeline's for the same element,
    both when iterating and when indexing (``ds[i]``). Each epoch (each ``iter()``, each
    ``repeat`` pass) draws anew, reproducibly from the seed. Random layers that
    ``map_func`` calls without ``generator=rng`` draw by the same identity (from a key of
    their own: ``rng`` is left alone; docs/architecture.md, "Draws in a stage").

    Raises (at iteration):
        PipelineError: ``map_func`` raised; names the op and the element's index. Its
            cause is a ``DrawKeyError`` naming ``key=`` where the elements have no
            identity on this worker (e.g. a ``filter`` of a rank's share).

    Keeps random access.

    Example:
        >>> import datapipe as dp
        >>> def jitter(x, rng):
        ...     return x + rng.integers(0, 100)
        >>> first = [int(x) for x in dp.range(4).random_map(jitter, seed=5)]
        >>> first == [int(x) for x in dp.range(4).random_map(jitter, seed=5, num_parallel_calls=2)]
        True
    """

    _name = "random_map"
    elementwise = True
    commutes_with_shard = True
    uses_randomness = True
    keys_draws = True

    def __init__(
        self,
        input_ds: Dataset,
        map_func: Callable,
        seed: int | None = None,
        num_parallel_calls: int | None = None,
        deterministic: bool | None = None,
        executor: str | None = None,
        key: Callable | None = None,
    ):
        super().__init__(input_ds)
        if not callable(map_func):
            raise TypeError(f"random_map: map_func must be callable, got {type(map_func).__name__}")
        self._key = check_key("random_map", key)
        self._func = ReturnsElement(map_func)  # a returned list is a tuple, as in map
        self._seed = seed
        check_seed("random_map", seed)
        self._stage_request = map_request("random_map", num_parallel_calls, deterministic,
                                         executor)  # fmt: skip
        self._spec_cache: Any = None

    @property
    def element_spec(self) -> Any:
        return first_element_spec(self)

    def _seed_key(self, ctx: Any, epoch: tuple) -> np.ndarray:
        return ctx.seed_sequence(self, epoch).generate_state(2, np.uint64)

    def _call(self, ctx: Any, epoch: tuple, base: tuple[int, int] | None,
              why: str | None = None) -> Callable:  # fmt: skip
        """The function of ``epoch``: ``map_func`` with its element's generator, and the
        draw key of the random layers it calls (both keyed by the same identity;
        ``why``: the refusal where the elements have none, ``datapipe._identity``)."""
        draws = ctx.stage_draws(self, epoch, base)
        draws.refusal = why
        # with key=, the generator is keyed by the key's identity as it comes (ByIdentity)
        fn = RandomCall(self._func, self._seed_key(ctx, epoch), None if self._key else base,
                        draws)  # fmt: skip
        return fn if self._key is None else ByIdentity(fn, self._key, indexed=True)

    def _make_random_access(self, ctx):
        inner = self._inputs[0]._make_random_access(ctx)
        # Keyed on the source index through shard/skip/take/map below, as the iterator
        # path is (``datapipe._identity``): element i draws the same either way.
        base, _, why = access_plan(self, inner)

        def keyed(epoch: tuple) -> Callable:
            return self._call(ctx, epoch, base, why)

        return MapAccess(inner, self._func, self._name, keyed=keyed, indexed=True)

    def _make_iterator(self, ctx, epoch):
        from datapipe.parallel.plan import plan_stage

        inner = ctx.make(self._inputs[0], epoch)
        mode, base, why = draw_plan(self, inner, self._key)
        # pairs: each element sets its identity; one without (LOST) refuses to draw
        fn = self._call(ctx, epoch, base, f"random_map: {LOST}" if mode == "pairs" else why)
        if mode == "pairs":  # the identities travel with the elements through the stage
            inner, fn = IdentifiedIterator(inner, self._name), ByIdentity(fn, indexed=True)
        plan = plan_stage(self.stage_request, ctx, self._inputs[0])
        it: OpIterator
        if plan is not None:
            from datapipe.parallel.stage import StageIterator

            # indexed=True: the workers call fn(index in the input stream, element).
            it = StageIterator(inner, plan, ctx, self._name, fn, indexed=True,
                               pool_key=id(self))  # fmt: skip
        else:
            it = MapIterator(IndexedIterator(inner), fn, self._name)
        return Unpaired(it, self._name) if mode == "pairs" else it


class IndexedIterator(OpIterator):
    """``(index, element)`` pairs: the index each element's generator is keyed by."""

    op_name = "random_map"

    def __init__(self, inner: OpIterator):
        super().__init__([inner])
        self.inner, self.count = inner, 0

    def next_chunk(self, n: int) -> list:
        chunk = self.inner.next_chunk(n)
        start, self.count = self.count, self.count + len(chunk)
        return list(zip(range(start, self.count), chunk))

    def index_base(self) -> tuple[int, int] | None:
        # As the parallel path (stage.StageIterator): a random_map above keys on it too.
        return self.inner.index_base()

    def get_state(self) -> dict:
        return {"count": self.count, "input": self.inner.get_state()}

    def set_state(self, state: dict) -> None:
        self.count = int(state["count"])
        self.inner.set_state(state["input"])
