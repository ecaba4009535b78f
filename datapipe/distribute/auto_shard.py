"""Auto-sharding: the ``iter()``-time rewrite that gives each worker its own share.

``auto_shard(root, options)`` is appended to ``datapipe.dataset.REWRITES``. With one worker
or ``AutoShardPolicy.OFF`` the graph is unchanged. Otherwise (tf.data's policies):

FILE
    every ``FileSource`` in the graph is replaced by
    ``source.with_files(file_share(source.files, index, count))`` (every ``count``-th unit
    in sorted order, so processes that listed the files in different orders still split
    them disjointly): each worker lists and reads only its own files (or Parquet row groups
    / Arrow record batches, when those are the units).
    Fewer units than workers raises ``AutoShardError`` naming both counts.
DATA
    a ``shard(count, index)`` is inserted into the graph. Where it goes (going down from
    the output, it sinks below every op that commutes with sharding):

    - below element-wise and order-only ops (``map``, ``filter``, ``batch``, ``shuffle``,
      ``prefetch``, ``zip``, ...), so each worker maps, decodes and batches only its own
      elements (tf.data instead shards the output, so every worker computes everything);
    - but above ops whose result depends on the whole stream (``take``, ``skip``,
      ``enumerate``, ``unique``, ``scan``, ``window`` and any op not known to commute), so
      ``take(100)`` still means 100 elements in all. Those ops need the same order on every
      worker, so a random op without a seed below them raises ``AutoShardError``;
    - a shuffling ``FileSource`` (``list_files``' default, ``image_dataset_from_directory``)
      is split by its files, as under FILE: its order differs between processes;
    - on a random-access chain, above the highest seeded random op (``random_map``,
      ``global_shuffle``): their per-index randomness then uses global indices, so the
      elements each index produces do not depend on the number of workers, and a seeded
      ``global_shuffle`` is one global permutation split among workers. Unseeded random
      ops (no op seed, no ``Options.seed``) differ between workers anyway, so the shard goes
      below them, where every worker still sees a disjoint share.
AUTO (default)
    FILE when every source of the graph is a ``FileSource`` with at least ``count`` units,
    else DATA; the choice is logged once per process (logger ``datapipe.distribute``).

A ``cache`` above the shard point records only this worker's share: each worker context
(policy, uneven, index, count) gets its own in-memory store, or the file
``<filename>.<policy>-<uneven>-<index>-of-<count>``.

Even ends (``Options.distribute.uneven``), applied where each shard is cut, when the
cardinality there is known, so a DistributedDataParallel job never hangs at an epoch's end:

- ``"drop"`` (default): every worker keeps ``min`` over workers of the shard sizes; at most
  ``count - 1`` elements per shard point are skipped each epoch (the same as
  ``DistributedSampler(drop_last=True)``).
- ``"pad"``: short workers append elements from the start of their own shard (the
  unsharded input when their shard is empty) up to the largest size; at most ``count - 1``
  elements per epoch are seen twice (``DistributedSampler``'s default).
- ``"allow"``: no change; workers may yield different numbers of elements, and a
  collective op (DDP's all-reduce) then waits forever on the ranks that finished early.

Guarantee: equal *element* counts at every shard point. Per-worker *batch* counts are then
equal when the ops between the shard point and the output map elements one to one
(``map``, ``shuffle``, ``prefetch``) and batch them (``batch`` with or without
``drop_remainder``). An op with data-dependent output (``filter``, ``flat_map``) or an
unknown cardinality at the shard point (a generator, files of unknown length) voids it;
that case is logged once, and the pipeline should end in ``repeat().take(n)`` or
``batch(..., drop_remainder=True)`` after a known count.
"""

from __future__ import annotations

import copy
import itertools
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from datapipe._context import walk
from datapipe.dataset import INFINITE_CARDINALITY, REWRITES, UNKNOWN_CARDINALITY, Dataset
from datapipe.distribute.context import WorkerContext, resolve_worker_context
from datapipe.errors import DatapipeError
from datapipe.options import AutoShardPolicy, Options

logger = logging.getLogger("datapipe.distribute")

UNEVEN_CHOICES = ("drop", "pad", "allow")

# Ops through which a shard can sink: sharding their input instead of their output keeps
# the union over workers the same multiset of elements (element-wise, order-only, or
# per-input-element ops).
COMMUTES = frozenset(
    {
        "map",
        "random_map",
        "filter",
        "flat_map",
        "interleave",
        "batch",
        "padded_batch",
        "unbatch",
        "shuffle",
        "global_shuffle",
        "repeat",
        "shard",
        "cache",
        "prefetch",
        "ignore_errors",
        "to_torch",
        "with_options",
        "zip",
        "concatenate",
        "sample_from_datasets",
    }
)


class AutoShardError(DatapipeError, ValueError):
    """Auto-sharding cannot honour the requested policy (names the counts or op)."""


_logged: set[str] = set()


def _log_once(level: int, msg: str) -> None:
    if msg not in _logged:
        _logged.add(msg)
        logger.log(level, msg)


def op_kind(node: Dataset) -> str:
    """The op's class-level name (``map`` even when the user named the op)."""
    return type(node)._name


def _substitute(value: Any, mapping: dict[int, Dataset]) -> Any:
    if isinstance(value, Dataset):
        return mapping.get(id(value), value)
    if isinstance(value, dict):
        return type(value)((k, _substitute(v, mapping)) for k, v in value.items())
    if isinstance(value, tuple):
        items = [_substitute(v, mapping) for v in value]
        return type(value)(*items) if hasattr(type(value), "_fields") else type(value)(items)
    if isinstance(value, list):
        return [_substitute(v, mapping) for v in value]
    return value


def replace_inputs(node: Dataset, new_inputs: Sequence[Dataset]) -> Dataset:
    """A shallow copy of ``node`` reading ``new_inputs`` instead of its inputs.

    Nodes are immutable, so the graph is rebuilt by copying. Attributes that hold the old
    inputs (``zip``'s nested structure of datasets) are rewritten too; everything else
    (functions, arguments, caches) is shared with the original.
    """
    old = node._inputs
    if len(old) != len(new_inputs):
        raise ValueError(f"{node._name}: expected {len(old)} inputs, got {len(new_inputs)}")
    if all(a is b for a, b in zip(old, new_inputs)):
        return node
    mapping = {id(a): b for a, b in zip(old, new_inputs)}
    out = copy.copy(node)
    for key, value in vars(node).items():
        if key != "_inputs":
            setattr(out, key, _substitute(value, mapping))
    out._inputs = tuple(new_inputs)
    out._iterations = itertools.count()
    return out


def _nondeterministic_op(node: Dataset, options: Options) -> Dataset | None:
    """An op under ``node`` whose output order may differ between workers, or None."""
    for n in walk(node):
        if getattr(n, "_uses_randomness", False):
            if getattr(n, "_seed", None) is None and options.seed is None:
                return n
        parallel = getattr(n, "_num_parallel_calls", None) not in (None, 1)
        det = getattr(n, "_deterministic", None)
        if parallel and (det is False or (det is None and options.deterministic is False)):
            return n
    return None


def _is_random(node: Dataset) -> bool:
    return bool(getattr(node, "_uses_randomness", False))


# ---- where the shards go ---------------------------------------------------------------
def _shard_point_data(node: Dataset, options: Options) -> str:
    """``"here"`` to shard above ``node``, ``"below"`` to sink into its inputs."""
    kind = op_kind(node)
    if not node._inputs:
        return "here"
    if kind not in COMMUTES:
        bad = _nondeterministic_op(node, options)
        if bad is not None:
            raise AutoShardError(
                f"auto-shard (DATA): '{kind}' needs the same element order on every worker, "
                f"but '{bad._name}' below it is not deterministic across workers; give it a "
                "seed, set Options.seed (and deterministic parallel ops), shard explicitly, "
                "or set Options.distribute.auto_shard_policy = AutoShardPolicy.OFF"
            )
        return "here"
    random_access = node._random_access_breaker() is None
    if random_access and _is_random(node) and _nondeterministic_op(node, options) is None:
        return "here"  # keep the random op's indices global (see the module docstring)
    return "below"


def _own_cache(node: Dataset, out: Dataset, worker: tuple) -> Dataset:
    """``out`` (``node`` rewritten above a shard point) with a cache of this worker's own.

    A cache above a shard point records one worker's share, so sharing the original's
    store (or file) would hand one worker's share, or the unsharded pass, to another. The
    store is kept on the original per worker context, so a later ``iter()`` (a later
    epoch) of the same worker still reads its recording.
    """
    if out is node or op_kind(node) != "cache" or not worker:
        return out
    if hasattr(node, "_store"):
        stores = node.__dict__.setdefault("_worker_stores", {})
        out._store = stores.setdefault(worker, type(node._store)())
    elif hasattr(node, "_filename"):
        policy, uneven, index, count = worker
        out._filename = f"{node._filename}.{policy.lower()}-{uneven}-{index}-of-{count}"
    return out


def rewrite_data(
    root: Dataset, options: Options, cut: Callable[[Dataset], Dataset], worker: tuple = ()
) -> tuple[Dataset, int]:
    """``root`` with ``cut(node)`` replacing each DATA shard point; and how many there are.

    ``worker`` (policy, uneven, index, count) keys the caches above the shard points."""
    memo: dict[int, Dataset] = {}
    points = 0

    def visit(node: Dataset) -> Dataset:
        nonlocal points
        if id(node) not in memo:
            if _shard_point_data(node, options) == "here":
                points += 1
                memo[id(node)] = cut(node)
            else:
                out = replace_inputs(node, [visit(c) for c in node._inputs])
                memo[id(node)] = _own_cache(node, out, worker)
        return memo[id(node)]

    return visit(root), points


def _file_source_class() -> type | None:
    # Not imported yet means no FileSource exists in any graph: skip importing datapipe.io.
    module = sys.modules.get("datapipe.io.file_source")
    return None if module is None else module.FileSource


def file_sources(root: Dataset) -> list[Dataset]:
    cls = _file_source_class()
    return [] if cls is None else [n for n in walk(root) if isinstance(n, cls)]


def rewrite_files(root: Dataset, cut: Callable[[Dataset], Dataset], worker: tuple = ()) -> Dataset:
    """``root`` with ``cut(source)`` replacing each ``FileSource`` (``worker``: as for
    ``rewrite_data``)."""
    file_source = _file_source_class()
    memo: dict[int, Dataset] = {}

    def visit(node: Dataset) -> Dataset:
        if id(node) not in memo:
            if isinstance(node, file_source):
                memo[id(node)] = cut(node)
            else:
                out = replace_inputs(node, [visit(c) for c in node._inputs])
                memo[id(node)] = _own_cache(node, out, worker)
        return memo[id(node)]

    return visit(root)


# ---- even ends -------------------------------------------------------------------------
def _even(
    own: Dataset,
    sizes: list[int],
    index: int,
    uneven: str,
    unsharded: Dataset,
) -> Dataset:
    """``own`` (this worker's shard) trimmed or padded to the agreed size."""
    from datapipe.distribute.pad import PadDataset
    from datapipe.ops.take import TakeDataset

    mine = sizes[index]
    if uneven == "allow" or min(sizes) == max(sizes):
        return own
    if uneven == "drop":
        return TakeDataset(own, min(sizes)) if mine > min(sizes) else own
    need = max(sizes) - mine
    if need == 0:
        return own
    # Pad from the start of the worker's own shard, or the input's start if it is empty.
    return PadDataset(own, own if mine > 0 else unsharded, need)


def _sizes_known(sizes: list[int], where: str, uneven: str) -> bool:
    if all(s >= 0 for s in sizes) or uneven == "allow":
        return all(s >= 0 for s in sizes)
    if any(s == UNKNOWN_CARDINALITY for s in sizes):
        _log_once(
            logging.WARNING,
            f"auto-shard: the cardinality at {where} is unknown, so uneven={uneven!r} cannot "
            "even out the workers' shares; they may yield different numbers of batches "
            "(end the pipeline with a known count, e.g. repeat().take(n))",
        )
    return False  # infinite shards are even already


def _data_cut(ctx: WorkerContext, uneven: str) -> Callable[[Dataset], Dataset]:
    from datapipe.ops.shard import ShardDataset

    k, i = ctx.count, ctx.index
    by_files = _file_cut(ctx, uneven)

    def cut(node: Dataset) -> Dataset:
        cls = _file_source_class()
        if cls and isinstance(node, cls) and _is_random(node) and len(node.files) >= k:
            # A shuffling file source orders its files differently in each process (e.g.
            # image_dataset_from_directory's seed drawn per process), so shard its files.
            return by_files(node)
        own = ShardDataset(node, k, i)
        n = node.cardinality()
        if n == INFINITE_CARDINALITY:
            return own
        sizes = [n // k + (1 if j < n % k else 0) for j in range(k)] if n >= 0 else [n] * k
        if not _sizes_known(sizes, f"'{node._name}'", uneven):
            return own
        return _even(own, sizes, i, uneven, node)

    return cut


def file_share(units: Sequence[Any], index: int, count: int) -> list:
    """Worker ``index``'s units: every ``count``-th of the units in sorted order, kept in
    the source's order. Sorting makes the split the same in every process, whatever order
    each process listed the files in (a shuffle seeded per process)."""
    order = sorted(range(len(units)), key=lambda t: (str(units[t]), t))
    mine = set(order[index::count])
    return [u for t, u in enumerate(units) if t in mine]


def _file_cut(ctx: WorkerContext, uneven: str) -> Callable[[Dataset], Dataset]:
    k, i = ctx.count, ctx.index

    def cut(src: Any) -> Dataset:
        units = src.files
        if len(units) < k:
            raise AutoShardError(
                f"auto-shard (FILE): '{src._name}' has {len(units)} files but there are {k} "
                "workers; FILE sharding needs at least one file per worker (use "
                "AutoShardPolicy.DATA or AUTO, or more files)"
            )
        own = src.with_files(file_share(units, i, k))
        if uneven == "allow" or own.cardinality() in (INFINITE_CARDINALITY, UNKNOWN_CARDINALITY):
            _sizes_known([own.cardinality()], f"'{src._name}'", uneven)
            return own
        sizes = [
            own.cardinality() if j == i else src.with_files(file_share(units, j, k)).cardinality()
            for j in range(k)
        ]
        if not _sizes_known(sizes, f"'{src._name}'", uneven):
            return own
        return _even(own, sizes, i, uneven, src)

    return cut


# ---- the rewrite -----------------------------------------------------------------------
def _policy(options: Options) -> AutoShardPolicy:
    p = options.distribute.auto_shard_policy
    if p is None:
        return AutoShardPolicy.AUTO
    try:
        return AutoShardPolicy(p.value if isinstance(p, AutoShardPolicy) else str(p).upper())
    except ValueError:
        raise AutoShardError(
            f"Options.distribute.auto_shard_policy={p!r} is not one of "
            f"{[m.value for m in AutoShardPolicy]}"
        ) from None


def _uneven(options: Options) -> str:
    u = options.distribute.uneven
    u = "drop" if u is None else u
    if u not in UNEVEN_CHOICES:
        raise AutoShardError(
            f"Options.distribute.uneven={u!r} is not one of {list(UNEVEN_CHOICES)}"
        )
    return u


def _choose(root: Dataset, policy: AutoShardPolicy, k: int) -> AutoShardPolicy:
    if policy is not AutoShardPolicy.AUTO:
        return policy
    leaves = [n for n in walk(root) if not n._inputs]
    files = file_sources(root) if leaves else []
    few = [f for f in files if len(f.files) < k]
    if files and len(files) == len(leaves) and not few:
        _log_once(logging.INFO, f"auto-shard: AUTO chose FILE ({k} workers)")
        return AutoShardPolicy.FILE
    if not files:
        why = "no file source in the graph"
    elif few:
        why = f"'{few[0]._name}' has {len(few[0].files)} files for {k} workers"
    else:
        why = "the graph also has sources that do not read files"
    _log_once(logging.INFO, f"auto-shard: AUTO chose DATA ({k} workers; {why})")
    return AutoShardPolicy.DATA


def auto_shard(root: Dataset, options: Options) -> Dataset:
    """The auto-shard rewrite (see the module docstring): ``root`` as this worker sees it.

    Raises:
        WorkerContextError: malformed or contradictory worker settings.
        AutoShardError: FILE with fewer files than workers or without a file source; an
            order-dependent op above a non-deterministic one under DATA; a bad option value.

    Example:
        >>> import datapipe as dp
        >>> opts = dp.Options(distribute=dp.DistributeOptions(num_workers=3, worker_index=1))
        >>> [int(x) for x in dp.range(10).with_options(opts)]  # uneven="drop": 3 each
        [1, 4, 7]
    """
    policy = _policy(options)
    if policy is AutoShardPolicy.OFF:
        return root
    uneven = _uneven(options)
    ctx = resolve_worker_context(options)
    if ctx.count == 1:
        return root
    policy = _choose(root, policy, ctx.count)
    worker = (policy.value, uneven, ctx.index, ctx.count)
    if policy is AutoShardPolicy.FILE:
        if not file_sources(root):
            raise AutoShardError(
                "auto-shard (FILE): the graph has no file source to shard "
                f"({ctx.count} workers); use AutoShardPolicy.DATA or AUTO"
            )
        out = rewrite_files(root, _file_cut(ctx, uneven), worker)
    else:
        out, _ = rewrite_data(root, options, _data_cut(ctx, uneven), worker)
    out.worker_context = (ctx.index, ctx.count)  # out is a new node: checked by set_state
    return out


def install() -> None:
    """Append ``auto_shard`` to ``datapipe.dataset.REWRITES`` (once)."""
    if auto_shard not in REWRITES:
        REWRITES.append(auto_shard)
