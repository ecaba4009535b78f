"""``distribute``: move the pipeline before it onto a preprocessing service
(``tf.data.experimental.service.distribute``'s shape, Ray's actors underneath)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from datapipe._context import IterContext, walk
from datapipe.dataset_ops import (
    INFINITE_CARDINALITY,
    UNKNOWN_CARDINALITY,
    Dataset,
    inferring_spec,
    raw_cardinality,
)
from datapipe.options import AutoShardPolicy, DistributeOptions, Options
from datapipe.service.layout import INFINITE, Layout, ParallelSlots, PoolSplits
from datapipe.service.ray_service import RayService

MODES = ("distributed_epoch", "parallel_epochs")
# Default outstanding reply requests per worker per consumer (tf.data's
# max_outstanding_requests): the prefetch, and the bound on what a consumer buffers.
DEFAULT_OUTSTANDING = 4
# Default split size of a random-access pool: about 8 splits per worker (enough for the
# dispatcher to balance uneven workers), between MIN_SPLIT and MAX_SPLIT indices. A split
# holds at least one full reply (worker.REPLY_MIN_ELEMENTS): the consumer's CPU per reply
# (~1.4 ms) is then spread over >= 512 elements (< 3 us each), and the dispatcher's calls
# (~0.7 ms each, one per split) stay below its ~1,450 calls/s up to ~1,000 workers of
# 200-us elements (benchmarks/sim_service_scale.py, issue 25).
SPLITS_PER_WORKER = 8
MIN_SPLIT = 512
MAX_SPLIT = 10_000
INFINITE_SPLIT = 1_000


def auto_split_size(n: int, workers: int, elementwise: bool = True) -> int:
    """The default split size of a pool of ``n`` positions on ``workers`` workers:
    ``ceil(n / (8 * workers))``, raised towards ``MIN_SPLIT`` as long as every worker
    still gets two splits (``ceil(n / (2 * workers))``) when each position is one element
    (``elementwise``; a position that expands, a file read by ``interleave``, is not
    raised), at most ``MAX_SPLIT``."""
    size = math.ceil(n / (SPLITS_PER_WORKER * workers))
    floor = min(MIN_SPLIT, math.ceil(n / (2 * workers))) if elementwise else 1
    return max(1, min(MAX_SPLIT, max(size, floor)))


def distribute(
    processing_mode: str,
    service: RayService,
    job_name: str | None = None,
    consumer_index: int | None = None,
    num_consumers: int | None = None,
    max_outstanding_requests: int | None = None,
) -> Callable[[Dataset], Dataset]:
    """A transformation (for ``Dataset.apply``) that runs the pipeline before it on a
    service's workers and streams the elements back; the ops after it run here.

    ``ds.apply(distribute("distributed_epoch", RayService(num_workers=4)))`` is the one-line
    change: the part of ``ds`` built so far runs on 4 Ray worker actors.

    Semantics (tf.data service's, ``tf.data.experimental.service.distribute``):

    - ``"parallel_epochs"``: every worker produces the whole dataset (``num_workers``
      copies in all, each with its own epoch so seeded shuffles differ); works for any
      pipeline.
    - ``"distributed_epoch"``: the dispatcher splits the source dynamically among the
      workers -- ranges of indices of a random-access input (``from_tensor_slices``,
      ``range``, ``list_files``, ``global_shuffle`` with a seed) or files / row groups of a
      file source: the pools auto-sharding would split (``datapipe.service.layout``) -- and
      one iteration delivers every element exactly once to the consumers in total, even
      when a worker dies mid-epoch (its splits resume on another worker from the last
      element that reached the consumer). The ops before ``distribute`` run once per
      split: a ``batch`` or ``shuffle`` there sees one split at a time (choose
      ``split_size`` a multiple of the batch size, or batch after ``distribute``), and a
      ``repeat`` there is refused (repeat after ``distribute``: each iteration is a job).
    - ``job_name``: consumers (iterators, in any process on the cluster) that use the same
      service, job name and iteration share one job instead of each reading its own;
      first come, first served, or with ``consumer_index`` / ``num_consumers`` (e.g. DDP
      ranks) a strict round-robin: consumer ``c`` reads splits ``c, c + n, ...``, cut so
      that all consumers get the same number of source elements (evened out as
      ``Options.distribute.uneven`` says); in ``parallel_epochs`` consumer ``c`` reads its
      round-robin share of every worker's copy. A job name must not be reused by another
      training job on the same service: a consumer that joins a finished job gets an
      empty iteration (tf.data's rule).
    - Backpressure: each consumer keeps at most ``max_outstanding_requests`` requests per
      worker in flight (each reply at most 4,096 elements, ~1 MiB of arrays or 20 ms of
      work), which is also its prefetch; workers compute only what was requested. Each of
      a consumer's feeds (two per worker in ``distributed_epoch``) asks for its next
      split as it starts one and, for an element-wise pipeline over one pool, opens it on
      the worker with one of those requests once the current split's rest is requested,
      so no feed waits a round trip at a split boundary.
    - Order: with ``Options.deterministic`` (default True) a single consumer takes the
      replies of its splits in a fixed rotation, so a run without worker failures is
      reproducible; with ``deterministic=False``, whichever reply is ready first (faster
      when workers differ).
    - A consumer that stops early (``close``, a ``break`` and garbage collection) gives
      its splits in progress back to the job, with the elements it had received and not
      passed on (what the ops after ``distribute`` had read ahead goes with them), so the
      job's other consumers finish them.
    - The pipeline before ``distribute`` is pickled (cloudpickle) when the op is built and
      sent to the workers once per service: lambdas and closures travel by value, functions
      of an importable module by reference (the module must be importable on the workers).
    - Checkpoints: the consumer's iterator ``state_dict()`` / ``load_state_dict()``
      (aliases ``get_state()`` / ``set_state()``) resume a job: the splits it delivered
      completely, and for each split in progress the elements it had received and not
      delivered plus the split chain's state after them. A shared first-come job resumes
      from the list of all its consumers' states (``load_state_dict([s0, s1, ...])`` in
      every consumer); with consumer indices each consumer's own state is enough.
    - Auto-sharding never shards a pipeline with ``distribute`` (trait ``uses_service``):
      the service's dispatcher is its sharding, and the part before it runs on the workers
      as one worker of one (so a launcher's ``RANK`` / ``WORLD_SIZE`` or the pipeline's own
      ``Options.distribute`` do not shard a split again).

    Args:
        processing_mode: ``"distributed_epoch"`` or ``"parallel_epochs"``.
        service: a ``RayService``.
        job_name: share one job among the consumers that name it (a non-empty str).
        consumer_index / num_consumers: this consumer's place among ``num_consumers``
            (set both, with ``job_name``), for strict round-robin reads.
        max_outstanding_requests: requests in flight per worker per consumer (default 4).

    Returns:
        A function ``Dataset -> Dataset`` (elements: the input's, ``element_spec`` the
        input's; ``cardinality()`` when it is known: ``num_workers`` times the input's in
        ``parallel_epochs``, the input's in ``distributed_epoch`` when only element-wise
        ops follow the split point, a consumer's round-robin share with indices).

    Raises:
        TypeError / ValueError: at once, for a bad argument, a pipeline that cannot be
            pickled (names the op), and in ``distributed_epoch`` a source that cannot be
            split (a generator, or a stream such as ``scan``'s that is neither random
            access nor files: use parallel_epochs), an explicit ``shard()`` or a ``repeat``
            before ``distribute``. A cluster that is
            not there raises when the pipeline first runs (see ``RayService``).
        WorkerDiedError (at iteration): a split's worker died 3 times.

    Example:
        >>> import datapipe as dp
        >>> service = dp.service.RayService(num_workers=2)
        >>> ds = dp.range(100).map(lambda x: x * 2)
        >>> ds = ds.apply(dp.service.distribute("distributed_epoch", service))
        >>> ds.cardinality()
        100
    """
    _check_args(processing_mode, service, job_name, consumer_index, num_consumers)
    outstanding = _check_outstanding(max_outstanding_requests)

    def apply(ds: Dataset) -> Dataset:
        return ServiceDataset(
            ds, processing_mode, service, job_name, consumer_index, num_consumers, outstanding
        )

    return apply


def _check_args(mode: Any, service: Any, job_name: Any, index: Any, count: Any) -> None:
    if mode not in MODES:
        raise ValueError(f"distribute: processing_mode must be one of {list(MODES)}, got {mode!r}")
    if not isinstance(service, RayService):
        raise TypeError(
            f"distribute: service must be a datapipe.service.RayService, got "
            f"{type(service).__name__}"
        )
    if job_name is not None and (not isinstance(job_name, str) or not job_name):
        raise ValueError(f"distribute: job_name must be a non-empty str or None, got {job_name!r}")
    if (index is None) != (count is None):
        raise ValueError(
            "distribute: set both consumer_index and num_consumers, or neither (got "
            f"consumer_index={index!r}, num_consumers={count!r})"
        )
    if count is None:
        return
    for arg, v in (("consumer_index", index), ("num_consumers", count)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"distribute: {arg} must be an int, got {type(v).__name__}")
    if count < 1 or not 0 <= index < count:
        raise ValueError(
            f"distribute: consumer_index must be in [0, num_consumers), got "
            f"consumer_index={index}, num_consumers={count}"
        )
    if job_name is None:
        raise ValueError(
            f"distribute: num_consumers={count} needs a job_name (the consumers share the job "
            "of that name)"
        )


def _check_outstanding(n: Any) -> int:
    if n is None:
        return DEFAULT_OUTSTANDING
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"distribute: max_outstanding_requests must be an int, got {n!r}")
    if n < 1:
        raise ValueError(f"distribute: max_outstanding_requests must be >= 1, got {n}")
    return n


@dataclass(frozen=True)
class Splitting:
    """What the pipeline before ``distribute`` looks like to the service (found when the
    node is built): the auto-shard policy that splits it (None: parallel_epochs without
    consumers), each shard point's pool size, whether only element-wise ops lie between
    the (single) shard point and ``distribute``, and whether the pool is a shuffling
    ``list_files`` (its splits are then handed out in a new random order each iteration)."""

    policy: str | None
    pools: tuple[int, ...] = ()
    units: bool = False
    elementwise: bool = False
    shuffle: bool = False


def _probe_rewrite(ds: Dataset, policy: str, index: int, count: int) -> IterContext:
    """The auto-shard rewrite of ``ds`` as worker ``index`` of ``count`` under ``policy``
    (a dry run: nothing is built)."""
    from datapipe.dataset_ops import REWRITES

    opts = Options(
        distribute=DistributeOptions(
            auto_shard_policy=AutoShardPolicy(policy), num_workers=count, worker_index=index
        )
    )
    graph = ds.with_options(opts)
    ctx = IterContext.for_graph(graph, seed=0)
    ctx.dry_run = True
    with raw_cardinality():
        root = graph
        for rewrite in REWRITES:
            root = rewrite(root, ctx)
    ctx.root = root
    return ctx


def _splitting(ds: Dataset, mode: str, num_consumers: int | None) -> Splitting:
    """See ``Splitting``; raises ``ValueError`` for what the service cannot run (module doc)."""
    from datapipe.distribute.auto_shard import _choose, _explicit_shard, policy_of

    nodes = walk(ds)
    requested = policy_of(ds.options)
    explicit = _explicit_shard(nodes)
    if mode == "parallel_epochs":
        if num_consumers is None:
            return Splitting(None)
        if requested is AutoShardPolicy.OFF or explicit is not None:
            raise ValueError(
                "distribute: parallel_epochs with num_consumers deals each worker's copy "
                "among the consumers by auto-sharding, which this pipeline turns off "
                f"({'an explicit ' + explicit._name if explicit else 'auto_shard_policy=OFF'})"
            )
        policy = requested.value
        _probe_rewrite(ds, policy, 0, num_consumers)  # FILE with too few files raises here
        return Splitting(policy)
    if requested is AutoShardPolicy.OFF:
        raise ValueError(
            "distribute: distributed_epoch splits the source among workers, but "
            "Options.distribute.auto_shard_policy is OFF (use FILE, DATA or AUTO, or "
            "parallel_epochs)"
        )
    if explicit is not None:
        raise ValueError(
            f"distribute: distributed_epoch splits the source itself; remove the explicit "
            f"'{explicit._name}' before distribute (or use parallel_epochs)"
        )
    policy = _choose(nodes, requested, 1)[0].value
    ctx = _probe_rewrite(ds, policy, 0, 1)
    return _pool_splitting(ctx, policy)


def _pool_splitting(ctx: IterContext, policy: str) -> Splitting:
    cuts = list(ctx.cut_nodes)
    if not cuts:
        raise ValueError("distribute: distributed_epoch found no source to split")
    pools = []
    for cut in cuts:
        src = cut._inputs[0]
        if cut.kind == "stream":
            raise ValueError(
                f"distribute: distributed_epoch cannot split the stream of '{src._name}' (no "
                "random access and not a file source); use parallel_epochs, or a source "
                "with random access (from_tensor_slices, range, list_files, a seeded "
                "global_shuffle) or files (TextLineDataset, Parquet, ...)"
            )
        if cut.kind == "units":
            pools.append(len(cut.units))
            continue
        with raw_cardinality():
            n = src.cardinality()
        if n == UNKNOWN_CARDINALITY:
            raise ValueError(f"distribute: the length of '{src._name}' is unknown; cannot split it")
        pools.append(INFINITE if n == INFINITE_CARDINALITY else n)
    _refuse_repeat(ctx.root)
    shuffle = any(getattr(cut, "permute", None) is not None for cut in cuts)
    units = cuts[0].kind == "units"
    return Splitting(policy, tuple(pools), units, _elementwise_above(ctx.root), shuffle)


def _refuse_repeat(root: Dataset) -> None:
    from datapipe.distribute.shard_point import _Cut

    def above_a_cut(node: Dataset) -> bool:
        return any(isinstance(n, _Cut) or above_a_cut(n) for n in node._inputs)

    for node in walk(root):
        if node.repeats_input and above_a_cut(node):
            raise ValueError(
                f"distribute: '{node._name}' before distribute would repeat every split of a "
                "distributed_epoch job; put it after distribute (each iteration of the "
                "distributed dataset is a new job)"
            )


def _elementwise_above(root: Dataset) -> bool:
    """One shard point, and only element-wise ops between it and the root."""
    from datapipe.distribute.shard_point import _Cut

    node = root
    while not isinstance(node, _Cut):
        if not node.elementwise or len(node._inputs) != 1:
            return False
        node = node._inputs[0]
    return True


def _pickle(ds: Dataset) -> bytes:
    """``ds`` pickled for the workers; ``ValueError`` naming the op that cannot be."""
    import cloudpickle

    try:
        return cloudpickle.dumps(ds)
    except Exception as e:  # noqa: BLE001 - reported with the culprit op
        culprit = ds._name
        for node in walk(ds):  # inputs first: the lowest node that fails is the culprit
            try:
                cloudpickle.dumps(node)
            except Exception:  # noqa: BLE001
                culprit = node._name
                break
        raise ValueError(
            f"distribute: the pipeline before distribute cannot be sent to the workers: "
            f"'{culprit}' does not pickle ({type(e).__name__}: {e}); build it from "
            "picklable parts (functions, arrays, file names)"
        ) from None


class ServiceDataset(Dataset):
    """The ``distribute`` op (see ``distribute``): its input runs on the service."""

    _name = "distribute"
    uses_service = True

    def __init__(
        self,
        input_ds: Dataset,
        processing_mode: str,
        service: RayService,
        job_name: str | None,
        consumer_index: int | None,
        num_consumers: int | None,
        max_outstanding_requests: int,
    ):
        super().__init__(input_ds)
        _check_args(processing_mode, service, job_name, consumer_index, num_consumers)
        self.processing_mode, self.service = processing_mode, service
        self.job_name, self.consumer_index = job_name, consumer_index
        self.num_consumers = num_consumers
        self.max_outstanding_requests = _check_outstanding(max_outstanding_requests)
        self.splitting = _splitting(input_ds, processing_mode, num_consumers)
        self.blob = _pickle(input_ds)
        self.blob_key = hashlib.sha1(self.blob).hexdigest()
        # What consumers of one job must agree on (pickles may differ between processes).
        names = "/".join(n._name for n in walk(input_ds))
        self.fingerprint = hashlib.sha1(f"{processing_mode}|{names}".encode()).hexdigest()

    @property
    def element_spec(self) -> Any:
        return self._inputs[0].element_spec

    def layout(self) -> Layout:
        """How a new job of this node is cut into splits (``datapipe.service.layout``)."""
        k = self.service.num_workers
        if self.processing_mode == "parallel_epochs":
            return ParallelSlots(k, self.num_consumers)
        from datapipe.distribute.auto_shard import uneven_of

        size = self.service.split_size
        if size is None:
            n = INFINITE if INFINITE in self.splitting.pools else max(self.splitting.pools)
            if self.splitting.units:
                size = 1
            elif n == INFINITE:
                size = INFINITE_SPLIT
            else:
                size = auto_split_size(n, k, self.splitting.elementwise)
        uneven = uneven_of(self.options)
        return PoolSplits(
            self.splitting.pools, size, self.num_consumers, uneven, self.splitting.shuffle
        )

    def cardinality(self) -> int:
        n = self._inputs[0].cardinality()
        if n in (INFINITE_CARDINALITY, UNKNOWN_CARDINALITY):
            return n
        if self.processing_mode == "parallel_epochs":
            return n * self.service.num_workers if self.job_name is None else UNKNOWN_CARDINALITY
        if not self.splitting.elementwise or len(self.splitting.pools) != 1:
            return UNKNOWN_CARDINALITY
        if self.num_consumers is None:
            return n if self.job_name is None else UNKNOWN_CARDINALITY
        from datapipe.distribute.auto_shard import uneven_of
        from datapipe.distribute.share import split_counts

        sizes = split_counts(n, self.num_consumers, "allow")
        uneven = uneven_of(self.options)  # as layout() cuts the job
        if uneven == "allow":
            assert self.consumer_index is not None  # given with num_consumers (checked)
            return sizes[self.consumer_index]
        return max(sizes) if uneven == "pad" else min(sizes)

    def _make_iterator(self, ctx, epoch):
        if inferring_spec():  # element_spec inference: the first element, computed here
            return ctx.make(self._inputs[0], epoch)
        from datapipe.service.consumer import ServiceIterator

        return ServiceIterator(self, ctx, epoch)
