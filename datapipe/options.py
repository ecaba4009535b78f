"""``Options``: pipeline-wide settings, with tf.data's names (``tf.data.Options``).

Options are attached with ``Dataset.with_options`` and merged at ``iter()`` time over the
whole graph: a field set later (closer to the output) wins over one set earlier; a field
left ``None`` means "not set" and falls back to the default documented on the field.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from datapipe._validate import check_optional_bool, check_optional_int


class AutoShardPolicy(enum.Enum):
    """How ``iter()`` shards a pipeline across workers (``tf.data.experimental.AutoShardPolicy``).

    OFF: no sharding. FILE: each worker reads only its own files (or Parquet row groups).
    DATA: each worker gets every ``num_workers``-th element (of the input, computed only for
    its own elements where the ops allow; of the output of ``interleave``/``flat_map``).
    AUTO: FILE when every source has at least as many files as workers, else DATA.
    See ``datapipe.distribute.auto_shard``.
    """

    OFF = "OFF"
    AUTO = "AUTO"
    FILE = "FILE"
    DATA = "DATA"


class _Merge:
    """Field-wise merge: values set (not None) in ``other`` win.

    Setting an attribute that is not a field raises ``AttributeError`` with the closest
    field name (``Options().determinstic = False`` would otherwise be silently ignored),
    and fields with a known type are checked when set (see ``_CHECKS``).
    """

    __dataclass_fields__: ClassVar[dict[str, Any]]  # every subclass is a dataclass

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):  # the library's own bookkeeping, not an option
            object.__setattr__(self, name, value)
            return
        if self.__dict__.get("_read_only"):
            raise ValueError(
                f"{type(self).__name__}: these are a dataset's options (Dataset.options), "
                f"which are read-only; setting {name!r} here would change nothing. Build "
                "an Options and apply it with ds.with_options(options)"
            )
        names = [f.name for f in dataclasses.fields(self)]
        cls = type(self).__name__
        if name not in names:
            raise _no_option(cls, name, names)
        check = _CHECKS.get((cls, name))
        object.__setattr__(self, name, value if check is None else check(cls, name, value))

    def read_only(self) -> Any:
        """This object, and its option groups, made read-only (``Dataset.options``: a
        merged copy, which tf.data also refuses to mutate). Returns ``self``."""
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, _Merge):
                value.read_only()
        object.__setattr__(self, "_read_only", True)
        return self

    def __getattr__(self, name: str) -> Any:
        # Only reached for names that are not fields: reading a misspelt or a tf.data-only
        # option (``Options().experimental_distribute``) names the right one.
        if name.startswith("_"):  # copy/pickle probe dunders; not an option
            raise AttributeError(name)
        raise _no_option(type(self).__name__, name, [f.name for f in dataclasses.fields(self)])

    def merge(self, other: Any) -> Any:
        kwargs = {}
        for f in dataclasses.fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if isinstance(mine, _Merge):
                kwargs[f.name] = mine.merge(theirs)
            else:
                kwargs[f.name] = theirs if theirs is not None else mine
        return type(self)(**kwargs)


# tf.data.Options' experimental_* attributes (TF 1.15 to 2.21): datapipe's name for each, or
# why there is none. Read or set, each names its replacement instead of a bare
# AttributeError (a port from tf.data meets these first).
_TF_EXPERIMENTAL: dict[str, tuple[str | None, str]] = {
    "experimental_deterministic": ("deterministic", "tf.data's deprecated alias"),
    "experimental_distribute": ("distribute", "a DistributeOptions"),
    "experimental_threading": ("threading", "a ThreadingOptions"),
    "experimental_stats": ("stats", "a StatsOptions"),
    "experimental_optimization": (
        None,
        "datapipe has no optimization options: its graph rewrites (auto-sharding, shard and "
        "skip moved below element-wise ops) always run",
    ),
    "experimental_slack": (
        None,
        "no prefetch slack: AUTOTUNE sizes the prefetch buffers (Options.autotune)",
    ),
    "experimental_external_state_policy": (
        None,
        "a checkpoint holds iterator positions only (state_dict()), never a function's state",
    ),
    "experimental_stateful_whitelist": (
        None,
        "a checkpoint holds iterator positions only (state_dict()), never a function's state",
    ),
    "experimental_symbolic_checkpoint": (
        None,
        "checkpoints are always positions (state_dict(): a few integers for arrays)",
    ),
    "experimental_warm_start": (
        None,
        "no warm start: parallel stages and prefetch start at iter()",
    ),
    "experimental_service": (
        None,
        "the service is an op: ds.apply(dp.service.distribute(processing_mode, service))",
    ),
}


def _no_option(cls: str, name: str, names: list[str]) -> AttributeError:
    """The error for an option ``cls`` lacks: tf.data's name for one of ours, the closest
    field, or the list of fields."""
    if cls == "Options" and name in _TF_EXPERIMENTAL:
        ours, note = _TF_EXPERIMENTAL[name]
        if ours is not None:
            hint = f"tf.data's {name} is {ours!r} here ({note}): did you mean {ours!r}?"
        else:
            hint = f"tf.data's {name} has no equivalent: {note}"
        return AttributeError(f"{cls} has no option {name!r}; {hint}")
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"its options are {names}"
    return AttributeError(f"{cls} has no option {name!r}; {hint}")


@dataclass
class ThreadingOptions(_Merge):
    """Where parallel ops run (tf.data's ``threading`` options, plus worker processes).

    ``private_threadpool_size``: most threads one parallel op may use (default 64).
    ``max_intra_op_parallelism``: threads a single user function may use inside itself:
    torch's and OpenCV's intra-op threads in worker processes (default 1, as torch's
    ``DataLoader`` workers run torch); the tuner multiplies a worker's CPU demand by it.
    Worker *threads* leave both libraries' settings alone: they are process-wide, so
    changing them from a stage would also change the training step's torch. Instead, with
    ``num_parallel_calls=AUTOTUNE``, threads that compute yet fill fewer cores than there
    are of them (the GIL, or intra-op threads competing with them) get a trial of worker
    processes, which run those libraries on ``max_intra_op_parallelism`` threads; no
    thread count needs setting by hand (``docs/architecture.md``, "Executors": the
    measurements behind this choice, ``benchmarks/bench_own_data.py``).
    ``executor``: where a parallel ``map`` / ``random_map`` that names no ``executor`` runs:
    ``"thread"`` (worker threads: work that releases the GIL — numpy, Pillow, torch, I/O),
    ``"process"`` (worker processes: pure-Python work that holds the GIL), or None (default:
    threads for a fixed ``num_parallel_calls``; with ``AUTOTUNE`` the tuner measures and
    picks inline, threads or processes per stage).
    ``process_start_method``: how worker processes start: ``"fork"``, ``"spawn"`` or
    ``"forkserver"`` (``multiprocessing``'s names). Default: ``"fork"`` where forking is
    safe, else ``"forkserver"``. A forked worker inherits an OpenMP or intra-op thread pool
    (torch's) that started in the parent as threads that do not exist in it, and its first
    parallel region waits for ever; a worker that runs torch on one intra-op thread (the
    default ``max_intra_op_parallelism``) never enters it. So it is ``"forkserver"`` when
    ``max_intra_op_parallelism > 1`` and such a pool may have started: native threads
    started in the process after datapipe was imported, or torch was imported before
    datapipe. A stage's ``start_method`` / ``start_reason`` say which was used and why
    (logged once as a warning). With forkserver, as with spawn, each worker imports the main
    module: guard a script with ``if __name__ == "__main__":``. AUTOTUNE tries worker
    processes only where they would fork (or where this option is set).
    """

    private_threadpool_size: int | None = None
    max_intra_op_parallelism: int | None = None
    executor: str | None = None
    process_start_method: str | None = None


@dataclass
class AutotuneOptions(_Merge):
    """``enabled`` (default True); ``cpu_budget``: cores the tuner may fill (default: cores
    available to the process); ``ram_budget``: bytes all buffers may hold (default: half
    of available memory; elements a stage's input buffers count once, handed over, not
    copied. Elements are sized from the first result of each stage, and a stage holding
    nothing may take one element over the budget while a consumer waits for it, so that a
    budget smaller than one element cannot stall the pipeline)."""

    enabled: bool | None = None
    cpu_budget: int | None = None
    ram_budget: int | None = None


@dataclass
class DistributeOptions(_Merge):
    """Worker context and auto-sharding (see ``datapipe.distribute``).

    ``auto_shard_policy`` (default AUTO); ``num_workers`` / ``worker_index``: this
    process's place among the processes, set together; it beats the process group and the
    launcher's environment (torch ``DataLoader`` workers still split the process's share);
    ``uneven``: ``"drop"`` (default), ``"pad"`` or ``"allow"`` — how workers with unequal
    shares are evened out (see ``datapipe.distribute.auto_shard``).
    """

    auto_shard_policy: AutoShardPolicy | None = None
    num_workers: int | None = None
    worker_index: int | None = None
    uneven: str | None = None


@dataclass
class StatsOptions(_Merge):
    """``enabled``: record per-stage statistics (default False; ``Dataset.profile`` turns
    it on for its own run)."""

    enabled: bool | None = None


@dataclass
class Options(_Merge):
    """Pipeline options (``tf.data.Options``).

    Args:
        seed: global seed; per-op seeds derive from it and the op's position in the graph.
            ``None`` (default): each random op draws its own entropy once, when first
            used (one order per pipeline object, as tf.data's; ``datapipe._context``).
        deterministic: whether parallel ops keep the sequential order (default True).
        threading, autotune, distribute, stats: nested option groups.

    Example:
        >>> import datapipe as dp
        >>> ds = dp.range(5).shuffle(5).with_options(dp.Options(seed=7))
        >>> list(ds) == list(ds.with_options(dp.Options(seed=7)))
        True
    """

    seed: int | None = None
    deterministic: bool | None = None
    threading: ThreadingOptions = field(default_factory=ThreadingOptions)
    autotune: AutotuneOptions = field(default_factory=AutotuneOptions)
    distribute: DistributeOptions = field(default_factory=DistributeOptions)
    stats: StatsOptions = field(default_factory=StatsOptions)


def _group(kind: type) -> Callable[[str, str, Any], Any]:
    def check(cls: str, name: str, value: Any) -> Any:
        if not isinstance(value, kind):
            raise TypeError(f"{cls}: {name} must be a {kind.__name__}, got {type(value).__name__}")
        return value

    return check


def _int(minimum: int | None) -> Callable[[str, str, Any], Any]:
    return lambda cls, name, v: check_optional_int(cls, name, v, minimum=minimum)


def _one_of(choices: Callable[[], list[str]]) -> Callable[[str, str, Any], Any]:
    """None or one of ``choices()`` (a typo here silently ran threads, or failed deep in
    ``multiprocessing`` at ``iter()``)."""

    def check(cls: str, name: str, value: Any) -> Any:
        allowed = choices()
        if value is not None and value not in allowed:
            close = difflib.get_close_matches(str(value), allowed, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"{cls}: {name} must be one of {allowed} or None, got {value!r}{hint}")
        return value

    return check


def _executors() -> list[str]:
    from datapipe.parallel.executors import names

    return names()


def _start_methods() -> list[str]:
    import multiprocessing

    return multiprocessing.get_all_start_methods()


# (class, field) -> check(class, field, value) -> value, run whenever the field is set.
# The distribute fields are checked where the worker context is resolved (at iter()).
_CHECKS: dict[tuple[str, str], Callable[[str, str, Any], Any]] = {
    ("Options", "seed"): _int(None),
    ("Options", "deterministic"): check_optional_bool,
    ("Options", "threading"): _group(ThreadingOptions),
    ("Options", "autotune"): _group(AutotuneOptions),
    ("Options", "distribute"): _group(DistributeOptions),
    ("Options", "stats"): _group(StatsOptions),
    ("ThreadingOptions", "private_threadpool_size"): _int(1),
    ("ThreadingOptions", "max_intra_op_parallelism"): _int(1),
    ("ThreadingOptions", "executor"): _one_of(_executors),
    ("ThreadingOptions", "process_start_method"): _one_of(_start_methods),
    ("AutotuneOptions", "enabled"): check_optional_bool,
    ("AutotuneOptions", "cpu_budget"): _int(1),
    ("AutotuneOptions", "ram_budget"): _int(0),
    ("StatsOptions", "enabled"): check_optional_bool,
}
