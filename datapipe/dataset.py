"""``Dataset``: an immutable description of an input pipeline (tf.data's model).

Each transformation returns a new node that holds its inputs and arguments; nothing runs
until ``iter(ds)``, which applies graph rewrites (auto-sharding) and builds one iterator
per node. The methods here are thin: each builds the node of one op module under
``datapipe/ops`` or ``datapipe/sources``.
"""

from __future__ import annotations

import builtins
import itertools
from collections.abc import Callable, Sequence
from typing import Any

from datapipe._context import IterContext, merged_options
from datapipe._iterator import Iterator, OpIterator
from datapipe._random_access import RandomAccess, RandomAccessIterator
from datapipe.options import Options

INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2
AUTOTUNE = -1

# Elements tried by element_spec inference before the first one's error is raised.
_SPEC_ATTEMPTS = 16

# Graph rewrites applied at iter() time, in order: fn(root, options) -> root.
REWRITES: list[Callable[[Dataset, Options], Dataset]] = []


class Dataset:
    """A lazy, immutable pipeline description.

    Subclasses (one per op) set ``_inputs`` and implement ``element_spec``,
    ``cardinality()`` and ``_make_iterator(ctx, epoch)``; those that keep random access
    implement ``_make_random_access(ctx)``.

    Example:
        >>> import datapipe as dp
        >>> ds = dp.range(10).map(lambda x: x * 2).filter(lambda x: x % 3 == 0).batch(2)
        >>> [b.tolist() for b in ds]
        [[0, 6], [12, 18]]
    """

    _name = "dataset"
    _inputs: tuple[Dataset, ...] = ()
    _uses_randomness = False
    _options: Options | None = None

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
        """Number of elements, or ``INFINITE_CARDINALITY`` (-1) / ``UNKNOWN_CARDINALITY`` (-2)."""
        return UNKNOWN_CARDINALITY

    def __len__(self) -> int:
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

    @property
    def options(self) -> Options:
        """The merged options of this dataset's graph."""
        return merged_options(self)

    # ---- random access -----------------------------------------------------------------
    def _random_access_breaker(self) -> str | None:
        """Name of the op that makes this chain lose random access, or None when it has it."""
        return self._name

    def _make_random_access(self, ctx: IterContext) -> RandomAccess:
        raise NotImplementedError

    def _ra_iterator(self, ctx: IterContext, epoch: tuple) -> OpIterator:
        return RandomAccessIterator(self._make_random_access(ctx), epoch, self._name)

    # ---- running -----------------------------------------------------------------------
    def _make_iterator(self, ctx: IterContext, epoch: tuple) -> OpIterator:
        raise NotImplementedError

    def _build_root(self, epoch: tuple, seed: int | None = None) -> OpIterator:
        """Apply the graph rewrites and build the iterator chain for ``epoch``; ``seed``
        (the global seed of a checkpoint) overrides ``Options.seed``. The chain's global
        seed is left on the returned iterator as ``global_seed`` for checkpoints."""
        options = merged_options(self)
        root = self
        for rewrite in REWRITES:
            root = rewrite(root, options)
        ctx = IterContext(root, options, seed)
        it = ctx.make(root, epoch)
        it.global_seed = ctx.seed
        # (index, count) of an auto-sharded graph: a checkpoint resumes only in its worker.
        it.worker_context = getattr(root, "worker_context", (0, 1))
        return it

    def _build_iterator(self, epoch: tuple) -> Iterator:
        return Iterator(self._build_root(epoch), epoch, self)

    def __iter__(self) -> Iterator:
        # Each iter() is a new epoch, so reshuffle_each_iteration reshuffles on a re-iteration
        # of the same Dataset object while staying reproducible from the seed.
        return self._build_iterator((next(self._iterations),))

    def as_numpy_iterator(self) -> Iterator:
        """Alias of ``iter(self)`` for tf.data users: elements are already numpy here
        unless the source holds torch tensors."""
        return iter(self)

    def _first_element(self) -> Any:
        """The first element that can be computed, or None when empty (for
        ``element_spec`` inference). Elements whose computation fails are passed over (a
        few, then the first error is raised), so a bad first record does not stop a
        ``map(decode).ignore_errors()`` pipeline from being built. Never auto-sharded: every
        worker infers the same spec, whatever its share."""
        from datapipe.errors import PipelineError
        from datapipe.options import AutoShardPolicy, DistributeOptions

        off = Options(distribute=DistributeOptions(auto_shard_policy=AutoShardPolicy.OFF))
        it = iter(self.with_options(off))
        first_error: PipelineError | None = None
        try:
            for _ in builtins.range(_SPEC_ATTEMPTS):
                try:
                    return next(it)
                except StopIteration:
                    break
                except PipelineError as e:
                    first_error = first_error or e
        finally:
            it.close()
        if first_error is not None:
            raise first_error
        return None

    def take_all(self) -> list:
        """All elements in a list (handy in tests and small pipelines)."""
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
        generator: Callable[[], Any], output_signature: Any, args: tuple = ()
    ) -> Dataset:
        from datapipe.sources.generator import GeneratorDataset

        return GeneratorDataset(generator, output_signature, args)

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
    ) -> Dataset:
        from datapipe.ops.map import MapDataset

        return MapDataset(self, map_func, num_parallel_calls, deterministic, name, executor)

    def random_map(
        self,
        map_func: Callable,
        seed: int | None = None,
        num_parallel_calls: int | None = None,
        deterministic: bool | None = None,
        executor: str | None = None,
    ) -> Dataset:
        from datapipe.ops.random_map import RandomMapDataset

        return RandomMapDataset(self, map_func, seed, num_parallel_calls, deterministic, executor)

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
        """``transformation_func(self)``, which must return a Dataset (``tf.data`` semantics)."""
        out = transformation_func(self)
        if not isinstance(out, Dataset):
            raise TypeError(
                f"apply: transformation_func must return a Dataset, got {type(out).__name__}"
            )
        return out

    def prefetch(self, buffer_size: int = AUTOTUNE) -> Dataset:
        from datapipe.ops.prefetch import PrefetchDataset

        return PrefetchDataset(self, buffer_size)

    def ignore_errors(self, log_warning: bool = False) -> Dataset:
        from datapipe.ops.ignore_errors import IgnoreErrorsDataset

        return IgnoreErrorsDataset(self, log_warning)

    def to_torch(self) -> Dataset:
        from datapipe.ops.to_torch import ToTorchDataset

        return ToTorchDataset(self)

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

    def as_torch_dataset(self) -> Any:
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
        ``datapipe.stats.profile`` for ``kwargs`` (``step_fn``, ``progress``, ``rank``)."""
        from datapipe.stats.profile import profile

        return profile(
            self, num_elements=num_elements, seconds=seconds, trace_path=trace_path, **kwargs
        )

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._name} element_spec={self.element_spec!r}>"


def passes_random_access(node: Dataset) -> str | None:
    """Helper for unary ops that keep random access when their input has it."""
    return node._inputs[0]._random_access_breaker()


def all_inputs_random_access(node: Dataset) -> str | None:
    """Helper for ops with several inputs (``zip``, ``concatenate``, ...) that keep random
    access when every input has it: the first input's breaker, or None."""
    for d in node._inputs:
        breaker = d._random_access_breaker()
        if breaker is not None:
            return breaker
    return None


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

    def _random_access_breaker(self) -> str | None:
        return passes_random_access(self)

    def _make_random_access(self, ctx: IterContext) -> RandomAccess:
        return self._inputs[0]._make_random_access(ctx)


_ = builtins  # `range` is shadowed in datapipe's namespace; builtins stays available here
