"""``Dataset``: an immutable description of an input pipeline (tf.data's model).

Each transformation returns a new node that holds its inputs and arguments; nothing runs
until ``iter(ds)``, which applies the graph rewrites of ``REWRITES`` in order (auto-sharding,
then pushing ``shard``/``skip`` below element-wise ops) and builds one iterator per node.
The methods here are thin: each builds the node of one op module under ``datapipe/ops`` or
``datapipe/sources``.

Facts about an op that the rewrites need are *traits*: class attributes of its node class
(``elementwise``, ``commutes_with_shard``, ``expands``, ``uses_randomness``,
``keys_draws``, ``keeps_random_access``, ``selects_indices``, ``repeats_input``,
``aligns_inputs``, ``uses_service``, ``no_read_ahead``), documented on ``Dataset`` (the
iteration context reads ``uses_randomness`` and ``keys_draws`` for seeds); an op whose
trait depends on its arguments sets it on the instance in ``__init__``.
``datapipe._op_table`` lists the ops and their traits from the classes. An op that may run
as a parallel stage also declares its ``stage_request`` (docs/architecture.md, "The stage
request").
"""

from __future__ import annotations

import builtins
import functools
import itertools
import os
import threading
import types
from collections.abc import Callable, Sequence
from collections.abc import Iterator as PyIterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar

from datapipe._context import IterContext, merged_options
from datapipe._iterator import Iterator, OpIterator
from datapipe._random_access import RandomAccess, RandomAccessIterator
from datapipe.options import Options

if TYPE_CHECKING:  # torch's IterableDataset: imported with the method, not the package
    from datapipe.distribute.torch_dataset import TorchIterableDataset
    from datapipe.parallel.request import StageRequest

INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2
AUTOTUNE = -1

# Elements tried by element_spec inference before the first one's error is raised.
_SPEC_ATTEMPTS = 16

# The graph rewrites applied at iter() time, in order: fn(root, ctx) -> root. A rewrite
# returns ``root`` itself when it changes nothing, copies the nodes it changes (with
# ``datapipe._rewrites.replace_inputs``, so copies keep their original's seeds) and never
# mutates the user's graph. ``datapipe._rewrites`` installs the push-down of index ops;
# ``datapipe.distribute`` puts auto-sharding first.
REWRITES: list[Callable[[Dataset, IterContext], Dataset]] = []

_RAW = threading.local()
_INFER = threading.local()


def inferring_spec() -> bool:
    """Whether this thread is computing a first element for ``element_spec`` inference
    (``Dataset._first_element``): an op that would hand its input to a service
    (``distribute``) then runs it here instead, so inference never starts or joins a job."""
    return getattr(_INFER, "depth", 0) > 0


@contextmanager
def raw_cardinality() -> PyIterator[None]:
    """Within this block (on this thread) ``cardinality()`` is the graph's own count, not
    the worker's view of it (the rewrites and the ops' own cardinality rules use it)."""
    _RAW.depth = getattr(_RAW, "depth", 0) + 1
    try:
        yield
    finally:
        _RAW.depth -= 1


def _worker_view(own: Callable[[Dataset], int]) -> Callable[[Dataset], int]:
    """``cardinality`` as the public sees it: under an active worker context, the count of
    the graph this worker iterates (auto-sharded, evened out); else the op's own rule."""

    @functools.wraps(own)
    def cardinality(self: Dataset) -> int:
        if getattr(_RAW, "depth", 0) or "_origin" in self.__dict__:
            return own(self)  # inside another count, or a node of an already-built graph
        with raw_cardinality():
            view = _rewritten(self)
            return own(self) if view is self else view.cardinality()

    cardinality.worker_view = True  # type: ignore[attr-defined]
    return cardinality


def _rewritten(root: Dataset) -> Dataset:
    """``root`` after the rewrites (what ``iter()`` would run), without side effects."""
    ctx = IterContext.for_graph(root, seed=0)
    ctx.dry_run = True
    for rewrite in REWRITES:
        root = rewrite(root, ctx)
    return root


class Dataset:
    """A lazy, immutable pipeline description.

    Subclasses (one per op) set ``_inputs`` and implement ``element_spec``,
    ``cardinality()`` and ``_make_iterator(ctx, epoch)``; those that keep random access
    implement ``_make_random_access(ctx)``. A subclass's ``cardinality()`` is its own rule;
    the public method wraps it so that, under an active worker context, it is the count of
    this worker's share (what ``iter()`` yields here).

    Traits (class attributes the graph rewrites read; False unless an op says otherwise):

    - ``elementwise``: one output element per input element, in order, computed from that
      element alone (``map``, ``random_map``, ``prefetch``, ``to_torch``, ``with_options``);
      index ops (``shard``, ``skip``, auto-sharding's shard points) move below such ops.
    - ``commutes_with_shard``: giving each worker a share of the input instead of the
      output keeps the union over workers (``map``, ``filter``, ``batch``, ``shuffle``,
      ``zip``, ...); DATA auto-sharding sinks its shard point below such ops.
    - ``expands``: one input element may become several output elements (``interleave``,
      ``flat_map``, ``unbatch``); a shard point below one cannot even out element counts.
    - ``uses_randomness``: draws random numbers, seeded through the ``IterContext``
      (``shuffle``, ``random_map``, ``global_shuffle``, ``sample_from_datasets``).
    - ``keys_draws``: calls a function per element inside a stage whose random layers draw
      by the element's position (``map``, ``random_map``); such ops are counted apart from
      ``uses_randomness`` for their keys (datapipe/_draws.py), so other ops' seeds stay.
    - ``keeps_random_access``: has random access when every input has (``map``, ``batch``,
      ``take``, ``zip``).
    - ``selects_indices``: keeps some input indices (``shard``, ``skip``); moved below
      ``elementwise`` random-access ops where ``_passes_below(node)`` allows.
    - ``repeats_input``: reads its input more than once per epoch (``repeat``); elastic
      resume cannot split a pool read below one.
    - ``aligns_inputs``: pairs its inputs' elements by position (``zip``); a shard point
      below it passes only ``elementwise`` ops, so the pairs stay the same.
    - ``uses_service``: hands its input to a preprocessing service whose dispatcher splits it
      among workers and consumers (``datapipe.service.distribute``); auto-sharding leaves
      a pipeline with such an op alone, as it does one with an explicit ``shard()``.
    - ``no_read_ahead``: a source that must not be asked for an element before the consumer
      needs it (``from_generator``: its generator may wait for the consumer), unless a
      stage that computes ahead by design sits between them (``parallel.plan``).

    An op that may run as a parallel stage sets its ``stage_request`` (a
    ``datapipe.parallel.request.StageRequest``: its policy, parallelism, order, executor,
    buffer size, whether processes are allowed) when it is built; the planner, replay,
    auto-sharding and statistics read it (None: the op never runs as a stage).

    Every method checks its arguments when it builds the node, not when the pipeline first
    runs: a wrong type raises ``TypeError`` (``take("a")``, ``batch(2.0)``, a flag that is
    not a bool; numpy integers are accepted), a wrong value ``ValueError``; both name the
    op and the argument (``datapipe._validate``).

    Example:
        >>> import datapipe as dp
        >>> ds = dp.range(10).map(lambda x: x * 2).filter(lambda x: x % 3 == 0).batch(2)
        >>> [b.tolist() for b in ds]
        [[0, 6], [12, 18]]
    """

    _name = "dataset"
    _inputs: tuple[Dataset, ...] = ()
    _options: Options | None = None
    _origin: Dataset  # on the copies graph rewrites make (_rewrites.copy_node)

    elementwise: ClassVar[bool] = False
    commutes_with_shard: ClassVar[bool] = False
    expands: ClassVar[bool] = False
    uses_randomness: bool = False  # an op may set it per instance (first_fit_pack)
    keys_draws: ClassVar[bool] = False
    keeps_random_access: ClassVar[bool] = False
    selects_indices: ClassVar[bool] = False
    repeats_input: ClassVar[bool] = False
    aligns_inputs: ClassVar[bool] = False
    uses_service: ClassVar[bool] = False
    no_read_ahead: ClassVar[bool] = False
    _stage_request: StageRequest | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("cardinality")
        if own is not None and not getattr(own, "worker_view", False):
            cls.cardinality = _worker_view(own)  # type: ignore[method-assign,assignment]

    def __init__(self, *inputs: Dataset):
        for x in inputs:
            if not isinstance(x, Dataset):
                raise TypeError(f"{self._name}: expected a Dataset input, got {type(x).__name__}")
        self._inputs = tuple(inputs)
        self._iterations = itertools.count()

    # ---- description -------------------------------------------------------------------
    @property
    def element_spec(self) -> Any:
        """Nested structure of ``TensorSpec`` describing one element."""
        raise NotImplementedError

    def cardinality(self) -> int:
        """Number of elements, or ``INFINITE_CARDINALITY`` (-1) / ``UNKNOWN_CARDINALITY`` (-2).

        Under an active worker context (see ``datapipe.distribute``) this is the number of
        elements ``iter()`` yields on this worker: its auto-sharded share, evened out by
        ``Options.distribute.uneven``. ``len(ds)`` is the same number.

        Example:
            >>> import datapipe as dp
            >>> dp.range(10).cardinality(), dp.range(10).batch(4).cardinality()
            (10, 3)
            >>> dp.range(10).filter(lambda x: x > 5).cardinality() == dp.UNKNOWN_CARDINALITY
            True
            >>> dp.range(3).repeat().cardinality() == dp.INFINITE_CARDINALITY
            True
        """
        return UNKNOWN_CARDINALITY

    @property
    def stage_request(self) -> StageRequest | None:
        """What this op asks of the parallel engine when it runs as a stage (its policy,
        ``num_parallel_calls``, ``deterministic``, ``executor``, buffer size, whether its
        function may run in worker processes: ``datapipe.parallel.request.StageRequest``),
        or None for an op that never does. Set from the op's arguments when it is built."""
        return self._stage_request

    @property
    def op_seed(self) -> int | None:
        """The op's own ``seed`` argument (None: derived from the global seed)."""
        return self.__dict__.get("_seed")

    def __len__(self) -> int:
        # A DistributedSampler (or Accelerate) asking: one owner of sharding (issue 32).
        from datapipe._random_access import note_outer_sharder, sharded_by_sampler
        from datapipe.distribute.context import outer_sharder

        note_outer_sharder(self, outer_sharder())
        with sharded_by_sampler(self):
            n = self.cardinality()
        if n == INFINITE_CARDINALITY:
            raise TypeError(f"{self._name}: the dataset is infinite")
        if n == UNKNOWN_CARDINALITY:
            raise TypeError(f"{self._name}: the dataset's length is unknown; use cardinality()")
        return n

    def __bool__(self) -> bool:
        # As tf.data: always true, so `if ds:` never calls __len__ (which raises when the
        # cardinality is infinite or unknown).
        return True

    def __getitem__(self, index: int | slice) -> Any:
        """Element ``index`` of a pipeline that keeps random access (Grain's
        ``MapDataset``, torch's map-style datasets): sources that know their length
        (``from_tensor_slices``, ``range``, file lists, ...) through ``map``,
        ``random_map``, ``global_shuffle``, ``batch``, ``padded_batch``, ``ragged_batch``,
        ``shard``, ``skip``, ``take``, ``zip``, ``concatenate``, ``enumerate``, finite
        ``repeat``.

        ``index`` is an integer in ``[-len(ds), len(ds))`` (negative counts from the end,
        as for a list). A slice returns a **list** of the elements it selects (read in one
        batched access; any step), not a Dataset: for a lazy slice use ``skip``/``take``.
        Element ``i`` is the one the first ``iter()`` of the dataset yields at position
        ``i`` (epoch 0): ``[ds[i] for i in range(len(ds))] == list(ds)`` on a fresh
        pipeline, with seeds (op seeds or ``Options.seed``) or without (each random op
        then draws its entropy once, and iteration and ``ds[i]`` share it; see
        ``datapipe._context``). Under a worker context the indices cover
        this rank's share, as ``len(ds)`` and ``iter()`` do, and are not split further
        among a DataLoader's workers (its sampler does that).

        As a torch map-style dataset: ``torch.utils.data.DataLoader(ds, batch_size=...,
        shuffle=True, num_workers=...)`` reads it through ``len(ds)`` and
        ``__getitems__`` (one batched read per batch); the sampler's shuffling works. A
        ``DistributedSampler`` over ``ds`` (the one Lightning injects too) shards it
        instead of auto-sharding: it calls ``len(ds)`` when it is built, and from then on
        ``len(ds)`` and ``ds[i]`` of that object cover the whole dataset (one owner of
        sharding). Accelerate's ``prepare`` over it is refused (``AutoShardError``,
        naming ``AutoShardPolicy.OFF`` or ``as_torch_dataset()`` as the fix).

        Raises:
            RandomAccessError (a TypeError): an op of the pipeline does not keep random
                access; names that op.
            IndexError: ``index`` out of range. TypeError: not an integer or slice.
            PipelineError: computing the element failed.

        Example:
            >>> import datapipe as dp
            >>> ds = dp.range(10).map(lambda x: x * x).batch(3)
            >>> len(ds), ds[1].tolist(), ds[-1].tolist()
            (4, [9, 16, 25], [81])
            >>> [b.tolist() for b in ds[1:3]]
            [[9, 16, 25], [36, 49, 64]]
        """
        from datapipe._random_access import get_item

        return get_item(self, index)

    def __getitems__(self, indices: Sequence[int]) -> list:
        """The elements at ``indices``, in one batched read (torch's ``DataLoader`` calls
        it with a batch's indices). Same rules and errors as ``ds[i]``."""
        from datapipe._random_access import get_items

        return get_items(self, indices)

    @property
    def options(self) -> Options:
        """The merged options of this dataset's graph (read-only: setting one raises
        ``ValueError``, as tf.data's; use ``with_options`` to change them)."""
        return merged_options(self).read_only()

    # ---- random access -----------------------------------------------------------------
    def _random_access_breaker(self) -> str | None:
        """Name of the op that makes this chain lose random access, or None when it has it
        (``keeps_random_access`` ops have it when every input has)."""
        if not self.keeps_random_access:
            return self._name
        for d in self._inputs:
            breaker = d._random_access_breaker()
            if breaker is not None:
                return breaker
        return None

    def _passes_below(self, node: Dataset) -> bool:
        """For ``selects_indices`` ops: may this op move below the element-wise ``node``?"""
        return True

    def _for_worker(self, key: tuple) -> Dataset:
        """This node as worker ``key`` runs it above a shard point (per-op protocol: a
        ``cache`` returns a copy with a store of that worker's own)."""
        return self

    def _make_random_access(self, ctx: IterContext) -> RandomAccess:
        raise NotImplementedError

    def _ra_iterator(self, ctx: IterContext, epoch: tuple) -> OpIterator:
        return RandomAccessIterator(self._make_random_access(ctx), epoch, self._name)

    # ---- running -----------------------------------------------------------------------
    def _make_iterator(self, ctx: IterContext, epoch: tuple) -> OpIterator:
        raise NotImplementedError

    def _build_chain(
        self, epoch: tuple, seed: int | None = None, resume: Any = None
    ) -> tuple[IterContext, OpIterator]:
        """Apply ``REWRITES`` and build the iterator chain for ``epoch``. ``seed`` (the
        global seed of a checkpoint) overrides ``Options.seed``; ``resume`` (a checkpoint's
        shard point shares, ``datapipe.distribute.elastic.ResumePlan``) is read by the
        auto-shard rewrite and the shard points built while it is active."""
        ctx = IterContext.for_graph(self, seed)
        ctx.resume = resume
        _RAW.depth = getattr(_RAW, "depth", 0) + 1  # raw_cardinality(), inlined: per iter()
        try:
            root = self
            for rewrite in REWRITES:
                root = rewrite(root, ctx)
            ctx.root = root
            return ctx, ctx.make(root, epoch)
        finally:
            _RAW.depth -= 1

    def _build_iterator(self, epoch: tuple) -> Iterator:
        ctx, root = self._build_chain(epoch)
        return Iterator(root, epoch, self, ctx)

    def __iter__(self) -> Iterator:
        # Each iter() is a new epoch, so reshuffle_each_iteration reshuffles on a re-iteration
        # of the same Dataset object while staying reproducible from the seed.
        return self._build_iterator((next(self._iterations),))

    def _continue_after_epoch(self, epoch: int) -> None:
        """Make the next ``iter()`` epoch ``epoch + 1``: a restored iterator state carries
        its epoch (``Iterator.load_state_dict``), and the pass after it reshuffles as the
        run that saved it would have."""
        self._iterations = itertools.count(int(epoch) + 1)

    def as_numpy_iterator(self) -> Iterator:
        """Alias of ``iter(self)`` for tf.data users: elements are already numpy here
        unless the source holds torch tensors.

        Example:
            >>> import datapipe as dp
            >>> [int(x) for x in dp.range(3).as_numpy_iterator()]
            [0, 1, 2]
        """
        return iter(self)

    def _first_element(self) -> Any:
        """The first element that can be computed, or None when empty (for
        ``element_spec`` inference). Elements whose computation fails are passed over (a
        few, then the first error is raised), so a bad first record does not stop a
        ``map(decode).ignore_errors()`` pipeline from being built. Never auto-sharded: every
        worker infers the same spec, whatever its share; never run by a service (see
        ``inferring_spec``)."""
        from datapipe.options import AutoShardPolicy, DistributeOptions

        off = Options(distribute=DistributeOptions(auto_shard_policy=AutoShardPolicy.OFF))
        _INFER.depth = getattr(_INFER, "depth", 0) + 1
        try:
            return self._first_of(iter(self.with_options(off)))
        finally:
            _INFER.depth -= 1

    def _first_of(self, it: Iterator) -> Any:
        from datapipe._functions import raise_pending
        from datapipe.errors import PipelineError

        # The first error is kept on `held`, never in a local: a local would make
        # error -> traceback -> this frame -> error a cycle, keeping the pipeline and its
        # threads alive until a gc run (see datapipe._functions.raise_pending).
        held = types.SimpleNamespace(error=None)
        try:
            for _ in builtins.range(_SPEC_ATTEMPTS):
                try:
                    first = next(it)
                except StopIteration:
                    break
                except PipelineError as e:
                    held.error = held.error or e
                    continue
                held.error = None
                return first
        finally:
            it.close()
        raise_pending(held, "error")
        return None

    def take_all(self) -> list:
        """All elements in a list (handy in tests and small pipelines).

        Example:
            >>> import datapipe as dp
            >>> dp.range(3).map(lambda x: x * 2).take_all()
            [np.int64(0), np.int64(2), np.int64(4)]
        """
        return list(self)

    # ---- sources as static methods -----------------------------------------------------
    @staticmethod
    def from_tensor_slices(tensors: Any) -> Dataset:
        from datapipe.sources.tensor_slices import TensorSlicesDataset

        return TensorSlicesDataset(tensors)

    @staticmethod
    def from_tensors(tensors: Any) -> Dataset:
        from datapipe.sources.tensors import TensorsDataset

        return TensorsDataset(tensors)

    @staticmethod
    def range(*args: int, dtype: Any = "int64") -> Dataset:
        from datapipe.sources.range import RangeDataset

        return RangeDataset(*args, dtype=dtype)

    @staticmethod
    def from_generator(
        generator: Callable[..., Any],
        output_types: Any = None,
        output_shapes: Any = None,
        args: tuple | None = None,
        output_signature: Any = None,
        name: str | None = None,
    ) -> Dataset:
        from datapipe.sources.generator import GeneratorDataset, resolve_signature

        signature = resolve_signature(output_types, output_shapes, output_signature)
        return GeneratorDataset(generator, signature, () if args is None else args)

    @staticmethod
    def list_files(
        file_pattern: Any, shuffle: bool | None = None, seed: int | None = None
    ) -> Dataset:
        # Upward import, the facade's op builder: tf.data spells it as a static method too.
        from datapipe.io.files import list_files

        return list_files(file_pattern, shuffle=shuffle, seed=seed)

    @staticmethod
    def counter(start: int = 0, step: int = 1, dtype: Any = "int64") -> Dataset:
        from datapipe.sources.counter import CounterDataset

        return CounterDataset(start, step, dtype)

    @staticmethod
    def random(seed: int | None = None, rerandomize_each_iteration: bool | None = None) -> Dataset:
        from datapipe.sources.random import RandomDataset

        return RandomDataset(seed, rerandomize_each_iteration)

    @staticmethod
    def zip(*datasets: Any) -> Dataset:
        from datapipe.ops.zip import ZipDataset

        return ZipDataset(*datasets)

    @staticmethod
    def sample_from_datasets(
        datasets: Sequence[Dataset],
        weights: Sequence[float] | None = None,
        seed: int | None = None,
        stop_on_empty_dataset: bool = False,
        rerandomize_each_iteration: bool = False,
    ) -> Dataset:
        from datapipe.ops.sample_from_datasets import SampleFromDatasets

        return SampleFromDatasets(
            datasets, weights, seed, stop_on_empty_dataset, rerandomize_each_iteration
        )

    @staticmethod
    def choose_from_datasets(
        datasets: Sequence[Dataset], choice_dataset: Dataset, stop_on_empty_dataset: bool = True
    ) -> Dataset:
        from datapipe.ops.choose_from_datasets import ChooseFromDatasets

        return ChooseFromDatasets(datasets, choice_dataset, stop_on_empty_dataset)

    # ---- transformations ---------------------------------------------------------------
    def map(
        self,
        map_func: Callable,
        num_parallel_calls: int | None = None,
        deterministic: bool | None = None,
        name: str | None = None,
        executor: str | None = None,
        key: Callable | None = None,
    ) -> Dataset:
        from datapipe.ops.map import MapDataset

        return MapDataset(self, map_func, num_parallel_calls, deterministic, name, executor,
                          key=key)  # fmt: skip

    def random_map(
        self,
        map_func: Callable,
        seed: int | None = None,
        num_parallel_calls: int | None = None,
        deterministic: bool | None = None,
        executor: str | None = None,
        key: Callable | None = None,
    ) -> Dataset:
        from datapipe.ops.random_map import RandomMapDataset

        return RandomMapDataset(self, map_func, seed, num_parallel_calls, deterministic, executor,
                                key=key)  # fmt: skip

    def filter(self, predicate: Callable) -> Dataset:
        from datapipe.ops.filter import FilterDataset

        return FilterDataset(self, predicate)

    def flat_map(self, map_func: Callable) -> Dataset:
        from datapipe.ops.flat_map import FlatMapDataset

        return FlatMapDataset(self, map_func)

    def interleave(
        self,
        map_func: Callable,
        cycle_length: int | None = None,
        block_length: int = 1,
        num_parallel_calls: int | None = None,
        deterministic: bool | None = None,
    ) -> Dataset:
        from datapipe.ops.interleave import InterleaveDataset

        return InterleaveDataset(
            self, map_func, cycle_length, block_length, num_parallel_calls, deterministic
        )

    def batch(
        self,
        batch_size: int,
        drop_remainder: bool = False,
        num_parallel_calls: int | None = None,
        deterministic: bool | None = None,
    ) -> Dataset:
        from datapipe.ops.batch import BatchDataset

        return BatchDataset(self, batch_size, drop_remainder, num_parallel_calls, deterministic)

    def padded_batch(
        self,
        batch_size: int,
        padded_shapes: Any = None,
        padding_values: Any = None,
        drop_remainder: bool = False,
    ) -> Dataset:
        from datapipe.ops.padded_batch import PaddedBatchDataset

        return PaddedBatchDataset(self, batch_size, padded_shapes, padding_values, drop_remainder)

    def ragged_batch(self, batch_size: int, drop_remainder: bool = False) -> Dataset:
        from datapipe.ops.ragged_batch import RaggedBatchDataset

        return RaggedBatchDataset(self, batch_size, drop_remainder)

    def rebatch(self, batch_size: int | Sequence[int], drop_remainder: bool = False) -> Dataset:
        from datapipe.ops.rebatch import RebatchDataset

        return RebatchDataset(self, batch_size, drop_remainder)

    def bucket_by_sequence_length(
        self,
        element_length_func: Callable,
        bucket_boundaries: Sequence[int],
        bucket_batch_sizes: Sequence[int],
        padded_shapes: Any = None,
        padding_values: Any = None,
        pad_to_bucket_boundary: bool = False,
        no_padding: bool = False,
        drop_remainder: bool = False,
    ) -> Dataset:
        from datapipe.ops.bucket_by_sequence_length import BucketBySequenceLengthDataset

        return BucketBySequenceLengthDataset(
            self, element_length_func, bucket_boundaries, bucket_batch_sizes, padded_shapes,
            padding_values, pad_to_bucket_boundary, no_padding, drop_remainder,
        )  # fmt: skip

    def group_by_window(
        self,
        key_func: Callable,
        reduce_func: Callable,
        window_size: int | None = None,
        window_size_func: Callable | None = None,
    ) -> Dataset:
        from datapipe.ops.group_by_window import GroupByWindowDataset

        return GroupByWindowDataset(self, key_func, reduce_func, window_size, window_size_func)

    def rejection_resample(
        self,
        class_func: Callable,
        target_dist: Any,
        initial_dist: Any = None,
        seed: int | None = None,
    ) -> Dataset:
        from datapipe.ops.rejection_resample import RejectionResampleDataset

        return RejectionResampleDataset(self, class_func, target_dist, initial_dist, seed)

    def first_fit_pack(
        self,
        length_struct: dict,
        num_packing_bins: int,
        shuffle_bins: bool = True,
        seed: int | None = None,
        meta_features: Sequence[str] = (),
        pack_alignment_struct: dict | None = None,
        padding_struct: dict | None = None,
        max_sequences_per_bin: int | None = None,
    ) -> Dataset:
        from datapipe.ops.first_fit_pack import FirstFitPackDataset

        return FirstFitPackDataset(
            self, length_struct, num_packing_bins, shuffle_bins, seed, meta_features,
            pack_alignment_struct, padding_struct, max_sequences_per_bin,
        )  # fmt: skip

    def assert_cardinality(self, expected_cardinality: int) -> Dataset:
        from datapipe.ops.assert_cardinality import AssertCardinalityDataset

        return AssertCardinalityDataset(self, expected_cardinality)

    def reduce(self, initial_state: Any, reduce_func: Callable) -> Any:
        from datapipe.ops.reduce import reduce_dataset

        return reduce_dataset(self, initial_state, reduce_func)

    def get_single_element(self) -> Any:
        from datapipe.ops.get_single_element import get_single_element

        return get_single_element(self)

    def unbatch(self) -> Dataset:
        from datapipe.ops.unbatch import UnbatchDataset

        return UnbatchDataset(self)

    def shuffle(
        self, buffer_size: int, seed: int | None = None, reshuffle_each_iteration: bool = True
    ) -> Dataset:
        from datapipe.ops.shuffle import ShuffleDataset

        return ShuffleDataset(self, buffer_size, seed, reshuffle_each_iteration)

    def global_shuffle(
        self, seed: int | None = None, reshuffle_each_iteration: bool = True
    ) -> Dataset:
        from datapipe.ops.global_shuffle import GlobalShuffleDataset

        return GlobalShuffleDataset(self, seed, reshuffle_each_iteration)

    def repeat(self, count: int | None = None) -> Dataset:
        from datapipe.ops.repeat import RepeatDataset

        return RepeatDataset(self, count)

    def take(self, count: int) -> Dataset:
        from datapipe.ops.take import TakeDataset

        return TakeDataset(self, count)

    def skip(self, count: int) -> Dataset:
        from datapipe.ops.skip import SkipDataset

        return SkipDataset(self, count)

    def enumerate(self, start: int = 0) -> Dataset:
        from datapipe.ops.enumerate import EnumerateDataset

        return EnumerateDataset(self, start)

    def cache(self, filename: str = "") -> Dataset:
        if not isinstance(filename, (str, os.PathLike)):
            raise TypeError(
                f"cache: filename must be a str or os.PathLike, got {type(filename).__name__}"
            )
        if filename:
            from datapipe.io.file_cache import FileCacheDataset

            return FileCacheDataset(self, filename)
        from datapipe.ops.cache import CacheDataset

        return CacheDataset(self)

    def shard(self, num_shards: int, index: int) -> Dataset:
        from datapipe.ops.shard import ShardDataset

        return ShardDataset(self, num_shards, index)

    def scan(self, initial_state: Any, scan_func: Callable) -> Dataset:
        from datapipe.ops.scan import ScanDataset

        return ScanDataset(self, initial_state, scan_func)

    def take_while(self, predicate: Callable) -> Dataset:
        from datapipe.ops.take_while import TakeWhileDataset

        return TakeWhileDataset(self, predicate)

    def unique(self) -> Dataset:
        from datapipe.ops.unique import UniqueDataset

        return UniqueDataset(self)

    def window(
        self, size: int, shift: int | None = None, stride: int = 1, drop_remainder: bool = False
    ) -> Dataset:
        from datapipe.ops.window import WindowDataset

        return WindowDataset(self, size, shift, stride, drop_remainder)

    def concatenate(self, dataset: Dataset) -> Dataset:
        from datapipe.ops.concatenate import ConcatenateDataset

        return ConcatenateDataset(self, dataset)

    def apply(self, transformation_func: Callable[[Dataset], Dataset]) -> Dataset:
        """``transformation_func(self)``, which must return a Dataset (``tf.data`` semantics).

        Example:
            >>> import datapipe as dp
            >>> def middle(ds):
            ...     return ds.skip(2).take(2)
            >>> [int(x) for x in dp.range(6).apply(middle)]
            [2, 3]
        """
        out = transformation_func(self)
        if not isinstance(out, Dataset):
            raise TypeError(
                f"apply: transformation_func must return a Dataset, got {type(out).__name__}"
            )
        return out

    def prefetch(self, buffer_size: int | None = AUTOTUNE) -> Dataset:
        from datapipe.ops.prefetch import PrefetchDataset

        return PrefetchDataset(self, buffer_size)

    def prefetch_to_device(self, device: Any, buffer_size: int = AUTOTUNE) -> Dataset:
        from datapipe.ops.prefetch_to_device import PrefetchToDeviceDataset

        return PrefetchToDeviceDataset(self, device, buffer_size)

    def ignore_errors(self, log_warning: bool = False) -> Dataset:
        from datapipe.ops.ignore_errors import IgnoreErrorsDataset

        return IgnoreErrorsDataset(self, log_warning)

    def to_torch(self, device: Any = None) -> Dataset:
        if device is not None:  # on a device: prefetch_to_device(device) converts too
            return self.prefetch_to_device(device)
        from datapipe.ops.to_torch import ToTorchDataset

        return ToTorchDataset(self)

    def snapshot(
        self,
        path: str | os.PathLike,
        compression: str | None = "AUTO",
        reader_func: Callable[[Dataset], Dataset] | None = None,
        shard_func: Callable[..., Any] | None = None,
        name: str | None = None,
    ) -> Dataset:
        from datapipe.ops.snapshot import SnapshotDataset

        return SnapshotDataset(self, path, compression, reader_func, shard_func, name)

    def with_options(self, options: Options) -> Dataset:
        from datapipe.ops.with_options import OptionsDataset

        return OptionsDataset(self, options)

    # ---- files, distribution, statistics (see datapipe.io / .distribute / .stats) -------
    def save(self, path: str, compression: str | None = None, progress: bool | None = None) -> None:
        from datapipe.io.save import save_dataset

        save_dataset(self, path, compression, progress)

    @staticmethod
    def load(path: str) -> Dataset:
        from datapipe.io.save import load_dataset

        return load_dataset(path)

    def as_torch_dataset(self) -> TorchIterableDataset:
        """This pipeline as a ``torch.utils.data.IterableDataset`` for a ``DataLoader``.

        Returns a ``datapipe.TorchIterableDataset``: each loader worker (and each
        distributed rank) reads its own share through auto-sharding, unless Accelerate's
        ``prepare`` shards it (then datapipe steps aside); each new pass is the next epoch
        without a ``set_epoch`` call (``set_epoch`` still sets it); a ``DataLoader``'s
        ``len()`` over it is exact; ``spawn``/``forkserver`` loader workers take lambdas;
        ``state_dict()`` / ``load_state_dict()`` checkpoint the position exactly (elastic
        across world sizes). Its class docstring has the details and an example.
        Imports torch (this method's module does not, so ``import datapipe`` stays light).

        Example:
            >>> import datapipe as dp, torch
            >>> list(torch.utils.data.DataLoader(dp.range(4).as_torch_dataset(), batch_size=2))
            [tensor([0, 1]), tensor([2, 3])]
        """
        from datapipe.distribute.torch_dataset import TorchIterableDataset

        return TorchIterableDataset(self)

    def profile(
        self,
        num_elements: int | None = None,
        seconds: float | None = None,
        trace_path: str | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run with per-stage statistics; a ``ProfileReport`` (table, verdict, JSON). See
        ``datapipe.stats.profile`` for ``kwargs`` (``step_fn``, ``progress``, ``rank``).

        Example:
            >>> import datapipe as dp
            >>> report = dp.range(100).map(lambda x: x + 1).profile()
            >>> report.elements
            100
        """
        from datapipe.stats.profile import profile

        return profile(
            self, num_elements=num_elements, seconds=seconds, trace_path=trace_path, **kwargs
        )

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._name} element_spec={self.element_spec!r}>"


Dataset.cardinality = _worker_view(Dataset.cardinality)  # type: ignore[method-assign,assignment]


class UnaryDataset(Dataset):
    """Base of one-input ops whose element spec and cardinality are the input's (subclasses
    override what they change). Random access is lost, as in ``Dataset``, unless a
    subclass keeps it (see ``RandomAccessUnaryDataset``)."""

    @property
    def element_spec(self) -> Any:
        return self._inputs[0].element_spec

    def cardinality(self) -> int:
        return self._inputs[0].cardinality()


class RandomAccessUnaryDataset(UnaryDataset):
    """A ``UnaryDataset`` that also keeps its input's random access: it has random access
    when the input has, and by default reads the input's elements unchanged."""

    keeps_random_access = True

    def _make_random_access(self, ctx: IterContext) -> RandomAccess:
        return self._inputs[0]._make_random_access(ctx)


# The push-down of index ops is the last rewrite (auto-sharding inserts itself first).
from datapipe import _rewrites  # noqa: E402,F401
