"""The worker context: which of how many workers this process (or loader worker) is.

Resolution order (first match wins for the *process* part):

1. an explicit ``Options.distribute`` setting (``num_workers`` and ``worker_index``);
2. an initialised ``torch.distributed`` process group (``get_rank()`` / ``get_world_size()``);
3. the launcher's environment: ``RANK`` / ``WORLD_SIZE`` (torchrun; ``LOCAL_RANK`` /
   ``LOCAL_WORLD_SIZE`` are validated too), else ``SLURM_PROCID`` / ``SLURM_NTASKS``;
4. otherwise a single process (index 0 of 1).

Torch's ``DataLoader`` worker info (``torch.utils.data.get_worker_info()``) then splits
each process's share among its loader workers, so ranks x loader workers form one index
space: ``index = process_index * loader_workers + loader_worker_id`` and
``count = process_count * loader_workers``.

Malformed or contradictory settings raise ``WorkerContextError`` at once (nothing waits on
a timeout), naming each variable and its value.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

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
            ``"env:torchrun"``, ``"env:slurm"`` or ``"default"``.
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


def process_from_env(env: Mapping[str, str] | None = None) -> tuple[int, int, str] | None:
    """``(rank, world_size, source)`` from torchrun's or Slurm's variables, or None.

    Raises:
        WorkerContextError: a variable is not an integer, only one of a pair is set,
            ``WORLD_SIZE < 1``, ``RANK >= WORLD_SIZE``, ``LOCAL_RANK >= LOCAL_WORLD_SIZE``
            or ``LOCAL_WORLD_SIZE > WORLD_SIZE`` (each names the variables and values).
    """
    env = os.environ if env is None else env
    torchrun = _pair_from_env(env, "RANK", "WORLD_SIZE")
    local = _parse_int(env, "LOCAL_RANK"), _parse_int(env, "LOCAL_WORLD_SIZE")
    if local[0] is not None and local[1] is not None:
        _check_pair("LOCAL_RANK", local[0], "LOCAL_WORLD_SIZE", local[1])
        if torchrun is not None and local[1] > torchrun[1]:
            raise WorkerContextError(
                f"LOCAL_WORLD_SIZE={local[1]} is larger than WORLD_SIZE={torchrun[1]}"
            )
    if torchrun is not None:
        return torchrun[0], torchrun[1], "env:torchrun"
    slurm = _pair_from_env(env, "SLURM_PROCID", "SLURM_NTASKS")
    if slurm is not None:
        return slurm[0], slurm[1], "env:slurm"
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
        WorkerContextError: malformed options or environment, or an environment that
            disagrees with the initialised process group.
    """
    explicit = _explicit(options or Options())
    if explicit is not None:
        return explicit[0], explicit[1], "options"
    from_env = process_from_env(env)  # validated even when the process group wins
    group = _process_group()
    if group is not None:
        if from_env is not None and from_env[2] == "env:torchrun" and from_env[:2] != group:
            raise WorkerContextError(
                f"environment RANK={from_env[0]}, WORLD_SIZE={from_env[1]} disagrees with the "
                f"initialised torch.distributed process group (rank {group[0]} of {group[1]})"
            )
        return group[0], group[1], "torch.distributed"
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
