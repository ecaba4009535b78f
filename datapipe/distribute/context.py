"""The worker context: which of how many workers this process (or loader worker) is.

Resolution order (first match wins for the *process* part):

1. an explicit ``Options.distribute`` setting (``num_workers`` and ``worker_index``);
2. an initialised ``torch.distributed`` process group (``get_rank()`` / ``get_world_size()``).
   Torchrun, Lightning (every strategy: ``ddp``, ``ddp_spawn``, ``ddp_fork``, ...) and
   Accelerate all set one up before the first batch; it is the truth, so the launcher's
   environment variables beside it are not read at all (Lightning's ``ddp`` launcher, for
   one, sets ``WORLD_SIZE`` without ``RANK``);
3. the launcher's environment, read in this order:

   - ``RANK`` / ``WORLD_SIZE`` (torchrun, ``accelerate launch``; ``LOCAL_RANK`` /
     ``LOCAL_WORLD_SIZE`` are validated too): source ``"env:torchrun"``;
   - ``WORLD_SIZE`` with ``LOCAL_RANK`` and no ``RANK`` (Lightning's ``ddp`` subprocess
     launcher before its group exists): rank ``NODE_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK``
     (``NODE_RANK`` 0 or unset: ``LOCAL_RANK``): source ``"env:lightning"``;
   - ``SLURM_PROCID`` / ``SLURM_NTASKS``: source ``"env:slurm"``;
   - ``OMPI_COMM_WORLD_RANK`` / ``_SIZE``, ``PMI_RANK`` / ``PMI_SIZE`` or
     ``MV2_COMM_WORLD_RANK`` / ``_SIZE`` (MPI launchers, as Accelerate reads them for
     multi-CPU runs): source ``"env:mpi"``;
4. otherwise a single process (index 0 of 1).

Torch's ``DataLoader`` worker info (``torch.utils.data.get_worker_info()``) then splits
each process's share among its loader workers, so ranks x loader workers form one index
space: ``index = process_index * loader_workers + loader_worker_id`` and
``count = process_count * loader_workers``.

Malformed or contradictory settings raise ``WorkerContextError`` at once (nothing waits on
a timeout), naming each variable and its value, unless a process group answers first.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from datapipe.errors import WorkerContextError
from datapipe.options import Options


@dataclass(frozen=True)
class WorkerContext:
    """Where this worker sits among all workers reading one pipeline.

    Attributes:
        index: this worker's index in ``[0, count)``.
        count: total number of workers (processes x DataLoader workers).
        process_index / process_count: the process-level part (rank, world size).
        loader_index / loader_count: the DataLoader worker part (0 / 1 outside a loader).
        source: where the process part came from: ``"options"``, ``"torch.distributed"``,
            ``"env:torchrun"``, ``"env:lightning"``, ``"env:slurm"``, ``"env:mpi"`` or
            ``"default"``.
    """

    index: int
    count: int
    process_index: int = 0
    process_count: int = 1
    loader_index: int = 0
    loader_count: int = 1
    source: str = "default"


def _parse_int(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name)
    if raw is None:
        return None
    try:
        return int(raw.strip())
    except ValueError:
        raise WorkerContextError(f"environment variable {name}={raw!r} is not an integer") from None


def _check_pair(rank_name: str, rank: int, size_name: str, size: int) -> None:
    if size < 1:
        raise WorkerContextError(f"{size_name}={size} must be >= 1 ({rank_name}={rank})")
    if not 0 <= rank < size:
        raise WorkerContextError(
            f"{rank_name}={rank} must be in [0, {size_name}) but {size_name}={size}"
        )


def _pair_from_env(
    env: Mapping[str, str], rank_name: str, size_name: str
) -> tuple[int, int] | None:
    rank, size = _parse_int(env, rank_name), _parse_int(env, size_name)
    if rank is None and size is None:
        return None
    if rank is None or size is None:
        missing, present = (rank_name, size_name) if rank is None else (size_name, rank_name)
        raise WorkerContextError(
            f"environment variable {present}={env[present]!r} is set but {missing} is not; "
            "set both or neither"
        )
    _check_pair(rank_name, rank, size_name, size)
    return rank, size


_MPI_PAIRS = (
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("PMI_RANK", "PMI_SIZE"),
    ("MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE"),
)


def _lightning_rank(env: Mapping[str, str], world: int) -> int:
    """The global rank Lightning's ``ddp`` subprocess launcher gives a process that has
    ``WORLD_SIZE`` and ``LOCAL_RANK`` but no ``RANK`` (it sets ``NODE_RANK`` too)."""
    local = _parse_int(env, "LOCAL_RANK")
    assert local is not None
    node = _parse_int(env, "NODE_RANK") or _parse_int(env, "GROUP_RANK") or 0
    per_node = _parse_int(env, "LOCAL_WORLD_SIZE")
    if node and per_node is None:
        raise WorkerContextError(
            f"environment variable NODE_RANK={node} with LOCAL_RANK={local} and "
            f"WORLD_SIZE={world} but no RANK or LOCAL_WORLD_SIZE: the global rank is "
            "unknown; set RANK, or initialise torch.distributed before iterating"
        )
    rank = node * (per_node or 0) + local
    _check_pair("RANK (NODE_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK)", rank, "WORLD_SIZE", world)
    return rank


def _torchrun_or_lightning(env: Mapping[str, str]) -> tuple[int, int, str] | None:
    if "RANK" not in env and "WORLD_SIZE" in env and "LOCAL_RANK" in env:
        world = _parse_int(env, "WORLD_SIZE")
        assert world is not None
        if world < 1:
            raise WorkerContextError(f"WORLD_SIZE={world} must be >= 1")
        return _lightning_rank(env, world), world, "env:lightning"
    torchrun = _pair_from_env(env, "RANK", "WORLD_SIZE")
    return None if torchrun is None else (torchrun[0], torchrun[1], "env:torchrun")


def process_from_env(env: Mapping[str, str] | None = None) -> tuple[int, int, str] | None:
    """``(rank, world_size, source)`` from a launcher's variables, or None (the module
    docstring lists them in the order they are read).

    Raises:
        WorkerContextError: a variable is not an integer, only one of a pair is set,
            ``WORLD_SIZE < 1``, ``RANK >= WORLD_SIZE``, ``LOCAL_RANK >= LOCAL_WORLD_SIZE``
            or ``LOCAL_WORLD_SIZE > WORLD_SIZE`` (each names the variables and values).

    Example:
        >>> process_from_env({"WORLD_SIZE": "2", "LOCAL_RANK": "1", "NODE_RANK": "0"})
        (1, 2, 'env:lightning')
        >>> process_from_env({"PMI_RANK": "0", "PMI_SIZE": "4"})
        (0, 4, 'env:mpi')
    """
    env = os.environ if env is None else env
    local = _parse_int(env, "LOCAL_RANK"), _parse_int(env, "LOCAL_WORLD_SIZE")
    world = _parse_int(env, "WORLD_SIZE")
    if local[0] is not None and local[1] is not None:
        _check_pair("LOCAL_RANK", local[0], "LOCAL_WORLD_SIZE", local[1])
        if world is not None and local[1] > world:
            raise WorkerContextError(
                f"LOCAL_WORLD_SIZE={local[1]} is larger than WORLD_SIZE={world}"
            )
    found = _torchrun_or_lightning(env)
    if found is not None:
        return found
    slurm = _pair_from_env(env, "SLURM_PROCID", "SLURM_NTASKS")
    if slurm is not None:
        return slurm[0], slurm[1], "env:slurm"
    for rank_name, size_name in _MPI_PAIRS:
        mpi = _pair_from_env(env, rank_name, size_name)
        if mpi is not None:
            return mpi[0], mpi[1], "env:mpi"
    return None


def _process_group() -> tuple[int, int] | None:
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return int(dist.get_rank()), int(dist.get_world_size())


def _explicit(options: Options) -> tuple[int, int] | None:
    d = options.distribute
    n, i = d.num_workers, d.worker_index
    if n is None and i is None:
        return None
    if n is None or i is None:
        raise WorkerContextError(
            "Options.distribute.num_workers and Options.distribute.worker_index must be set "
            f"together, got num_workers={n!r}, worker_index={i!r}"
        )
    if int(n) < 1 or not 0 <= int(i) < int(n):
        raise WorkerContextError(
            "Options.distribute.worker_index must be in [0, num_workers), got "
            f"num_workers={n!r}, worker_index={i!r}"
        )
    return int(i), int(n)


def resolve_process(
    options: Options | None = None, env: Mapping[str, str] | None = None
) -> tuple[int, int, str]:
    """The process part of the context: ``(index, count, source)`` (see the module doc).

    Raises:
        WorkerContextError: malformed options, or (without an initialised process
            group) a malformed environment.
    """
    explicit = _explicit(options or Options())
    if explicit is not None:
        return explicit[0], explicit[1], "options"
    if getattr(_LOCAL, "whole", 0):
        return 0, 1, "sampler"  # another owner shards by rank (whole_index_space)
    # A live group is what the training stack really runs on: the launcher's variables
    # beside it may be partial (Lightning's ddp sets WORLD_SIZE without RANK) and are not
    # read, so nothing in them can fail an iteration the group already answers.
    group = _process_group()
    if group is not None:
        return group[0], group[1], "torch.distributed"
    from_env = process_from_env(env)
    if from_env is not None:
        return from_env
    return 0, 1, "default"


_LOCAL = threading.local()


@contextmanager
def process_level() -> Iterator[None]:
    """Within this block (on this thread) DataLoader workers do not split the context:
    ``ds[i]`` of a map-style dataset reads the process's view in every loader worker,
    since the DataLoader's sampler hands the indices out to its workers itself."""
    _LOCAL.depth = getattr(_LOCAL, "depth", 0) + 1
    try:
        yield
    finally:
        _LOCAL.depth -= 1


def _loader_worker() -> tuple[int, int]:
    if getattr(_LOCAL, "depth", 0):
        return 0, 1
    data = sys.modules.get("torch.utils.data")
    info = data.get_worker_info() if data is not None else None
    if info is None:
        return 0, 1
    return int(info.id), int(info.num_workers)


def resolve_worker_context(
    options: Options | None = None, env: Mapping[str, str] | None = None
) -> WorkerContext:
    """This worker's ``WorkerContext`` under ``options`` (see the module docstring).

    Raises:
        WorkerContextError: malformed or contradictory settings; the message names each
            variable and its value.

    Example:
        >>> import datapipe as dp
        >>> opts = dp.Options(distribute=dp.DistributeOptions(num_workers=4, worker_index=1))
        >>> resolve_worker_context(opts, env={})
        WorkerContext(index=1, count=4, process_index=1, process_count=4, loader_index=0, \
loader_count=1, source='options')
        >>> resolve_worker_context(env={"RANK": "1", "WORLD_SIZE": "1"})
        Traceback (most recent call last):
        ...
        datapipe.errors.WorkerContextError: RANK=1 must be in [0, WORLD_SIZE) \
but WORLD_SIZE=1
    """
    p_index, p_count, source = resolve_process(options, env)
    l_index, l_count = _loader_worker()
    return WorkerContext(
        index=p_index * l_count + l_index,
        count=p_count * l_count,
        process_index=p_index,
        process_count=p_count,
        loader_index=l_index,
        loader_count=l_count,
        source=source,
    )


# ---- another owner of sharding ----------------------------------------------------------
# A sampler or a wrapper that shards by rank itself (torch's DistributedSampler, the one
# Lightning injects, Accelerate's prepare) must not meet datapipe's own auto-sharding too:
# each would take half of the other's half. datapipe sees them only through the calls they
# make on its objects (len(dataset), set_epoch, iter), so it looks at the caller's frames.
_OUTER_SHARDERS = {
    ("torch.utils.data.distributed", "DistributedSampler"),
    ("accelerate.data_loader", "IterableDatasetShard"),
    ("accelerate.data_loader", "DataLoaderDispatcher"),
    ("accelerate.data_loader", "BatchSamplerShard"),
    ("accelerate.data_loader", "DataLoaderShard"),
}


def outer_sharder(depth: int = 12) -> str | None:
    """The name (``"DistributedSampler"``, ``"accelerate.IterableDatasetShard"``, ...) of a
    sharding sampler or loader among the ``depth`` callers of the caller, or None. Only
    classes torch and Accelerate define count (subclasses included, as Lightning's
    ``DistributedSamplerWrapper``)."""
    frame: Any = sys._getframe(2)
    for _ in range(depth):
        if frame is None:
            return None
        obj = frame.f_locals.get("self")
        if obj is not None:
            for cls in type(obj).__mro__:
                if (cls.__module__, cls.__name__) in _OUTER_SHARDERS:
                    prefix = "" if cls.__module__.startswith("torch") else "accelerate."
                    return prefix + cls.__name__
        frame = frame.f_back
    return None


@contextmanager
def whole_index_space() -> Iterator[None]:
    """Within this block (on this thread) the process part is ``(0, 1)``: a sampler that
    shards by rank itself reads the whole dataset, not this rank's auto-sharded share."""
    _LOCAL.whole = getattr(_LOCAL, "whole", 0) + 1
    try:
        yield
    finally:
        _LOCAL.whole -= 1


def accelerate_owner(dataset: object) -> str | None:
    """``"accelerate.DataLoaderDispatcher"`` or ``"accelerate.IterableDatasetShard"`` when a
    loader Accelerate's ``prepare`` made over ``dataset`` is being iterated, else None.

    Accelerate registers the loader it starts iterating (``GradientState``) before that
    loader starts its workers, so this answers in the parent (the pickling for spawn and
    forkserver workers) and in forked workers (a copy of the parent's memory) alike."""
    state = sys.modules.get("accelerate.state")
    shared = getattr(getattr(state, "GradientState", None), "_shared_state", None)
    if not shared:
        return None
    for ref in shared.get("_dataloader_references_ref") or ():
        loader = ref() if ref is not None else None
        inner = getattr(loader, "dataset", None) if loader is not None else None
        if inner is dataset and type(loader).__name__ == "DataLoaderDispatcher":
            return "accelerate.DataLoaderDispatcher"
        if type(inner).__name__ == "IterableDatasetShard" and inner.dataset is dataset:  # type: ignore[union-attr]
            return "accelerate.IterableDatasetShard"
    return None
