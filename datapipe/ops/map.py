"""``map``: apply a function to every element (``tf.data.Dataset.map``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from datapipe._draws import enter, leave
from datapipe._functions import (
    ElementwiseIterator,
    ReturnsElement,
    apply_chunk,
    call,
    hands_out_views,
)
from datapipe._identity import (
    LOST,
    ByIdentity,
    IdentifiedIterator,
    Unpaired,
    access_plan,
    draw_plan,
    identity_base_of,
)
from datapipe._iterator import OpIterator
from datapipe._spec import UnknownSpec, seen_spec, spec_of
from datapipe._validate import check_optional_bool, check_optional_int
from datapipe.dataset_ops import AUTOTUNE, Dataset, RandomAccessUnaryDataset
from datapipe.errors import PipelineError, annotate
from datapipe.parallel import policies
from datapipe.parallel.request import StageRequest


def validate_parallelism(op: str, num_parallel_calls: int | None) -> int | None:
    return check_optional_int(
        op,
        "num_parallel_calls",
        num_parallel_calls,
        minimum=1,
        special=(AUTOTUNE,),
        what="a positive integer or AUTOTUNE",
    )


def map_request(op: str, num_parallel_calls: int | None, deterministic: bool | None,
                executor: str | None) -> StageRequest:  # fmt: skip
    """The stage request of a map-like op (``map``, ``random_map``): its arguments checked
    (naming ``op``); its function may run in worker processes."""
    from datapipe.parallel.plan import validate_executor

    return StageRequest(
        policies.MAP,
        parallelism=validate_parallelism(op, num_parallel_calls),
        deterministic=check_optional_bool(op, "deterministic", deterministic),
        executor=validate_executor(op, executor),
        processes_allowed=True,
    )


def check_key(op: str, key: Callable | None) -> Callable | None:
    """A map-like op's ``key=`` argument (``datapipe._identity``): None or a callable.

    Raises:
        TypeError: anything else (names the op and the type).
    """
    if key is not None and not callable(key):
        raise TypeError(f"{op}: key must be a function of the element, got {type(key).__name__}")
    return key


class _InfersSpec(Protocol):
    """An op that keeps the spec it inferred from its first element."""

    _spec_cache: Any

    def _first_element(self) -> Any: ...


def first_element_spec(ds: _InfersSpec) -> Any:
    """The element spec of an op whose function can't be traced (unlike tf.data's): one
    element is computed to learn it, once (kept in ``ds._spec_cache``). An empty input has
    nothing to infer from: ``UnknownSpec()`` then (not kept), which merges with any spec —
    not the input's spec, which the function may well change."""
    if ds._spec_cache is None:
        first = ds._first_element()
        if first is None:
            return UnknownSpec()
        ds._spec_cache = seen_spec(spec_of(first))
    return ds._spec_cache


class MapDataset(RandomAccessUnaryDataset):
    """Elements ``map_func(x)`` (``map_func(*x)`` when ``x`` is a plain tuple, as tf.data).

    Args:
        map_func: function of one element; its result's structure becomes the element spec
            (tf.data's rule: a returned ``list`` is a tuple of components, a list nested
            inside it one component).
        num_parallel_calls: None (sequential), a positive int, or ``AUTOTUNE``.
        deterministic: keep input order with parallel calls (default: ``Options.deterministic``).
        name: optional name for errors and statistics.
        executor: where parallel calls run: ``"thread"`` (worker threads; for functions
            that release the GIL: numpy, Pillow, torch, I/O), ``"process"`` (worker
            processes, elements through shared memory; for pure-Python functions that
            hold the GIL; the function is sent with cloudpickle, so lambdas and closures
            work), or None (``Options.threading.executor``; by default threads, and with
            ``AUTOTUNE`` the tuner measures and picks inline, threads or processes; it
            may move the function to processes mid-iteration, but only once a reading
            of its code proves that each value it reaches -- its globals, closure,
            defaults, ``partial`` arguments, bound ``self``, the attributes it loads from
            the user's modules and classes -- is immutable (numbers, strings, bytes,
            ``None``, tuples and frozensets of them, a read-only array; a closed-over
            list, dict or set of those that the code only reads), a module, a
            library's callable, or a function, class or object that passes the same
            reading (``parallel.fork_safety``). Anything else (a generator such as
            ``np.random.default_rng(0)``, ``itertools.count()``, an open file, a
            module-level list or dict, an ``lru_cache``, an attribute it assigns) keeps the stage on
            threads, and ``iter(ds).root.process_refusal`` names it. A function known
            to be safe per process can be marked with ``datapipe.process_safe``; an
            element whose input or result cannot be pickled after that move is computed
            again in the parent, so its side effects happen twice).
            ``executor="process"`` with ``num_parallel_calls=None`` runs one worker process.
        key: a function of the element (called as ``map_func`` is) returning a unique
            ``int``, ``str`` or ``bytes`` (an id, a file name): the random layers that
            ``map_func`` calls draw by it instead of the element's identity below. Needed
            only where the input has no identity on a worker (the error says so).

    Raises:
        TypeError: ``key`` is not callable; at iteration, ``key`` returned another type.
        PipelineError (at iteration): ``map_func`` raised; names the op and the element's
            index. Elements before it were delivered. Its cause is a ``DrawKeyError`` when
            a random layer drew where the elements have no identity on this worker (a
            ``batch`` or ``filter`` of a rank's share): pass ``key``.

    Elements below that are read-only views of a source's or a cache's numpy arrays
    (``from_tensor_slices``, ``from_tensors``, ``cache``) reach ``map_func`` as writable
    copies, so an in-place op on them (numpy's, or torch's on ``torch.from_numpy(x)``,
    which shares the array's memory) never changes the source or the cache
    (docs/guides/differences.md, D-TF-28).

    A ``KeyboardInterrupt`` or ``SystemExit`` raised by ``map_func`` (or a signal handler
    on the consumer's thread) leaves the element it interrupted undelivered: the public
    iterator's ``state_dict()`` after it computes that element again on resume.

    The output spec is inferred from the first element (``map_func`` is not traced).
    Keeps random access. Random layers (``preprocessing``) that ``map_func`` calls draw by
    the element's identity and the stage's key, not by thread order or by the element's
    position on this worker: its index in the random-access source (through ``shuffle``
    buffers, ``shard`` and auto-sharding), else its position in the unsharded stream,
    else ``key``. So results are the same for any ``num_parallel_calls``, executor, run,
    resume, number of ranks or DataLoader workers, and two ranks never repeat each
    other's draws (docs/architecture.md, "Draws in a stage"; ``datapipe._identity``).

    Example:
        >>> import datapipe as dp
        >>> [int(x) for x in dp.range(5).map(lambda x: x * 10)]
        [0, 10, 20, 30, 40]
        >>> ds = dp.from_tensor_slices(([1, 2], [3, 4])).map(lambda a, b: a + b)  # tuples unpack
        >>> [int(x) for x in ds.map(lambda x: x * 2, num_parallel_calls=dp.AUTOTUNE)]
        [8, 12]
        >>> from datapipe import _draws
        >>> def position(x):
        ...     return _draws.position()  # what a random layer's draws are keyed by
        >>> [int(p) for p in dp.range(6).shuffle(6, seed=1).shard(2, 1).map(position)] == [
        ...     int(x) for x in dp.range(6).shuffle(6, seed=1).shard(2, 1)]
        True
    """

    _name = "map"
    elementwise = True
    commutes_with_shard = True
    keys_draws = True

    def __init__(
        self,
        input_ds: Dataset,
        map_func: Callable,
        num_parallel_calls: int | None = None,
        deterministic: bool | None = None,
        name: str | None = None,
        executor: str | None = None,
        key: Callable | None = None,
    ):
        super().__init__(input_ds)
        if not callable(map_func):
            raise TypeError(f"map: map_func must be callable, got {type(map_func).__name__}")
        self._key = check_key("map", key)
        self._func = ReturnsElement(map_func)  # a returned list is a tuple (tf.data)
        self._stage_request = map_request("map", num_parallel_calls, deterministic, executor)
        if name:
            self._name = name
        self._spec_cache: Any = None

    @property
    def element_spec(self) -> Any:
        return first_element_spec(self)

    def _make_random_access(self, ctx):
        inner = self._inputs[0]._make_random_access(ctx)
        # as the iterator's: the same draws (datapipe._identity)
        base, _, why = access_plan(self, inner)

        func = self._func.copying(hands_out_views(self._inputs[0]))

        def keyed(epoch: tuple) -> Callable:
            draws = ctx.stage_draws(self, epoch, base)
            draws.refusal = why
            fn = func.keyed(draws)
            return fn if self._key is None else ByIdentity(fn, self._key)

        return MapAccess(inner, self._func, self._name, keyed=keyed)

    def _make_iterator(self, ctx, epoch):
        from datapipe.parallel.plan import plan_stage

        inner = ctx.make(self._inputs[0], epoch)
        # Random layers that the function calls draw by the element's identity
        # (datapipe._identity), whatever thread or process computes it.
        # The function gets writable copies of read-only arrays (views of a source or a
        # cache) only where the graph below has such views: an in-place torch op on
        # torch.from_numpy(x) then cannot write into the source (D-TF-28).
        func = self._func.copying(hands_out_views(self._inputs[0]))
        mode, base, why = draw_plan(self, inner, self._key)
        draws = ctx.stage_draws(self, epoch, base)
        # pairs: each element sets its identity; one without (LOST) refuses to draw
        draws.refusal = f"{self._name}: {LOST}" if mode == "pairs" else why
        fn: Callable = func.keyed(draws)
        if mode == "key":
            fn = ByIdentity(fn, self._key)
        elif mode == "pairs":  # the identities travel with the elements through the stage
            inner, fn = IdentifiedIterator(inner, self._name), ByIdentity(fn)
        plan = plan_stage(self.stage_request, ctx, self._inputs[0])
        it: OpIterator
        if plan is not None:
            from datapipe.parallel.stage import StageIterator

            it = StageIterator(inner, plan, ctx, self._name, fn, pool_key=id(self))
        else:
            it = MapIterator(inner, fn, self._name)
        return Unpaired(it, self._name) if mode == "pairs" else it


class MapAccess:
    """Random access through a function of each element. ``keyed``: epoch -> the function
    for that epoch (``map``'s and ``random_map``'s carry the epoch's keys), else ``func``;
    ``indexed``: it is called ``fn(index, element)`` (``random_map``'s ``RandomCall``)."""

    def __init__(self, inner: Any, func: Callable, op: str, unpack: bool = True,
                 keyed: Callable[[tuple], Callable] | None = None,
                 indexed: bool = False):  # fmt: skip
        self.inner, self.func, self.op, self.unpack = inner, func, op, unpack
        self.keyed, self.indexed = keyed, indexed
        self._funcs: dict[tuple, Callable] = {}
        if hasattr(inner, "index_base"):  # as MapIterator.index_base: random_map keys on it
            self.index_base = inner.index_base
        # source indices that are not linear in the requested ones (datapipe._identity)
        self.identities = getattr(inner, "identities", None)

    def __len__(self) -> int:
        return len(self.inner)

    def func_for(self, epoch: tuple) -> Callable:
        """The function of ``epoch`` (made once per epoch, a few epochs kept)."""
        if self.keyed is None:
            return self.func
        fn = self._funcs.get(epoch)
        if fn is None:
            if len(self._funcs) > 8:  # keys of finished epochs (repeat passes)
                self._funcs.clear()
            fn = self._funcs[epoch] = self.keyed(epoch)
        return fn

    def get_many(self, indices: Sequence[int], epoch: tuple) -> list:
        fn = self.func_for(tuple(epoch))
        out: list = []
        ids = indices if self.identities is None else self.identities(indices, epoch)
        scope = enter(fn, out, 0, ids)  # the draws of element ids[k] (_draws)
        try:
            for i, j, x in zip(indices, ids, self.inner.get_many(indices, epoch)):
                try:
                    if self.indexed:
                        out.append(fn(int(j), x))
                    else:
                        out.append(call(fn, x) if self.unpack else fn(x))
                except Exception as e:  # noqa: BLE001 - located and re-raised
                    raise annotate(self.op, int(i), e) from e
        finally:
            leave(scope)
        return out


class MapIterator(ElementwiseIterator):
    """Sequential map over input chunks. A failure is raised after the elements before it
    are delivered; the input elements after it are kept, so iteration may continue past
    the failing element (``ignore_errors``) without losing any other."""

    def __init__(self, inner: OpIterator, func: Callable, op: str, unpack: bool = True):
        super().__init__(inner)
        self.func, self.op_name, self.unpack = func, op, unpack

    def next_chunk(self, n: int) -> list:
        self._raise_pending()
        chunk = self._take(n)  # kept in leftover until committed: see _take
        out, err = apply_chunk(self.func, chunk, self.op_name, self.count, self.unpack)
        if err is None:
            k = len(chunk)
            self._commit(k)
            return out
        try:
            return self._fail(chunk, len(out), out, self._global_index(err), None)
        finally:  # no cycle error -> traceback -> this frame -> error
            err = None

    def index_base(self) -> tuple[int, int] | None:
        return self.inner.index_base()

    def identity_base(self) -> tuple[int, int] | None:
        return identity_base_of(self.inner)  # one result per input element, in order

    def _global_index(self, err: BaseException) -> BaseException:
        """Name the element by its index in the source when this map runs on a shard of it
        (after a shard was moved below it), so the message points at the data itself."""
        base = self.inner.index_base()
        if base is None or base == (1, 0) or not isinstance(err, PipelineError):
            return err
        if err.index is None:  # no index to translate (e.g. restored from a checkpoint)
            return err
        stride, offset = base
        return annotate(self.op_name, offset + stride * err.index, err.cause, err.path)
