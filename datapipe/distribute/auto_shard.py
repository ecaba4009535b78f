"""Auto-sharding: the ``iter()``-time rewrite that gives each worker its own share.

``auto_shard(root, ctx)`` is the first entry of ``datapipe.dataset_ops.REWRITES``. It inserts
*shard points* (``datapipe.distribute.shard_point``): each reads this worker's share of a
*pool*, everything above it runs on that share only, everything below it is the same on
every worker. Nothing changes without a worker context (a plain process: no
``Options.distribute``, no process group, no launcher variables, no DataLoader worker),
with ``AutoShardPolicy.OFF``, or when the pipeline has an explicit ``shard()`` anywhere
(that shard is then the only sharding) or a ``distribute`` (``datapipe.service``: the
service's dispatcher splits the data among its workers and consumers, so neither the part
before it, which runs on the service's workers, nor the part after it is sharded again).
With a context of one worker (e.g. torchrun with one process) the shard points are
inserted with the whole pool as the share, so that a checkpoint can later resume on more
workers.

Policies (tf.data's names):

FILE
    every file source becomes a shard point over its units in sorted order (the same split
    in every process, whatever order each listed them in): worker ``i`` of ``k`` reads the
    units ``i, i + k, ...`` of that order, in the source's own order (or, for a shuffling
    ``list_files``, in a new random order each epoch). Fewer units than workers raises
    ``AutoShardError`` naming both counts.
DATA
    element-level sharding: a shard point goes, coming down from the output, below every
    op that commutes with sharding (trait ``commutes_with_shard``: ``map``, ``filter``,
    ``batch``, ``shuffle``, ``prefetch``, ``zip``, ...), so each worker maps and batches
    only its own elements, and stops

    - above ops whose output depends on the whole stream (``take``, ``skip``,
      ``enumerate``, ``unique``, ``scan``, ``window``) so ``take(100)`` means 100 in all;
    - above ops that turn one element into several (trait ``expands``: ``interleave``,
      ``flat_map``, ``unbatch``): their *output* elements are sharded, so one file read by
      ``list_files(...).interleave(TextLineDataset)`` is split by lines among workers;
    - below ``zip``, above the first op that is not element-wise (pairs stay aligned);
    - on a random-access chain, above the highest seeded random op (``random_map``,
      ``global_shuffle``): per-index randomness then uses global indices, so what each
      index produces does not depend on the number of workers.

    The pool of a shard point is read in the same order by every worker: a random op
    without a seed below it raises ``AutoShardError`` -- except a shuffling
    ``list_files`` (its default), whose order is then drawn from the epoch alone, the same
    on every worker (logged). A ``list_files`` at a shard point is split by its sorted
    files, as under FILE.
AUTO (default)
    FILE when every source of the graph is a file source with at least as many units as
    workers, else DATA (tf.data's fallback).

The first auto-sharded ``iter()`` of a pipeline in a process logs one INFO record (logger
``datapipe.distribute``) naming the rank, the world size, the DataLoader worker, the policy
(and why AUTO chose it) and this worker's share.

Even ends (``Options.distribute.uneven``), applied to the elements of a shard point's pool
where their count is known and nothing above the shard point expands elements, so a
DistributedDataParallel job does not hang at an epoch's end:

- ``"drop"`` (default): every worker reads ``min`` over workers of the share sizes; at most
  ``workers - 1`` elements per shard point are skipped each epoch, none is read twice
  (``DistributedSampler(drop_last=True)``).
- ``"pad"``: short workers read elements again from the start of their own share (the
  pool's start when their share is empty) up to the largest share; nothing is skipped and
  at most ``workers - 1`` elements are read twice (``DistributedSampler``'s default).
- ``"allow"``: every element exactly once; workers may get different counts, and a
  collective op (DDP's all-reduce) then waits forever on the ranks that finished early.

FILE over a source that reads its units itself (text, Parquet, Arrow, saved datasets)
evens out rows where their counts are known (Parquet metadata); over ``list_files``
followed by ``interleave`` it cannot (the lines per file are unknown) and leaves every line
in (``"allow"``; logged once). Unknown counts at a DATA shard point (a generator, text
lines) are logged once too; such a pipeline should end in ``take(n)`` after a known count
or be wrapped in ``torch.distributed.algorithms.Join`` (``examples/train_ddp.py``).

A ``cache`` above a shard point records only this worker's share: each worker context
(policy, uneven, index, count) gets a store, or file ``<filename>.<policy>-<uneven>-<index>
-of-<count>``, of its own.
"""

from __future__ import annotations

import logging
import sys
import weakref
import zlib
from typing import TYPE_CHECKING, Any, TypeGuard, TypeVar

import numpy as np

from datapipe._context import IterContext, origin, walk
from datapipe._rewrites import copy_node, replace_inputs
from datapipe.dataset_ops import REWRITES, UNKNOWN_CARDINALITY, Dataset
from datapipe.distribute.context import WorkerContext, resolve_worker_context
from datapipe.distribute.shard_point import (
    IndexCut,
    StreamCut,
    UnitCut,
    _Cut,
    restricted,
    sorted_units,
)
from datapipe.distribute.share import WHOLE, Share, split_counts, worker_share
from datapipe.errors import AutoShardError
from datapipe.options import AutoShardPolicy, Options

if TYPE_CHECKING:  # datapipe.io is imported by the user's graph, not by auto-sharding
    from datapipe.io.file_source import FileSource
    from datapipe.io.files import FileListDataset

_T = TypeVar("_T")

logger = logging.getLogger("datapipe.distribute")

UNEVEN_CHOICES = ("drop", "pad", "allow")


_logged: set[str] = set()
# pipeline (the user's Dataset, with_options peeled) -> worker contexts already announced
_announced: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _log_once(level: int, msg: str) -> None:
    if msg not in _logged:
        _logged.add(msg)
        logger.log(level, msg)


# ---- options ---------------------------------------------------------------------------
def policy_of(options: Options) -> AutoShardPolicy:
    """``Options.distribute.auto_shard_policy`` (default AUTO).

    Raises:
        AutoShardError: not a policy (names the option and the accepted values).
    """
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


def uneven_of(options: Options) -> str:
    """``Options.distribute.uneven`` (default ``"drop"``).

    Raises:
        AutoShardError: not one of ``UNEVEN_CHOICES`` (names the option).
    """
    u = options.distribute.uneven
    u = "drop" if u is None else u
    if u not in UNEVEN_CHOICES:
        raise AutoShardError(
            f"Options.distribute.uneven={u!r} is not one of {list(UNEVEN_CHOICES)}"
        )
    return u


# ---- graph facts -----------------------------------------------------------------------
def _file_source_class() -> type[FileSource] | None:
    # Not imported yet means no FileSource exists in any graph: skip importing datapipe.io.
    module = sys.modules.get("datapipe.io.file_source")
    return None if module is None else module.FileSource


def _file_list_class() -> type[FileListDataset] | None:
    module = sys.modules.get("datapipe.io.files")
    return None if module is None else module.FileListDataset


def _is(node: Dataset, cls: type[_T] | None) -> TypeGuard[_T]:
    return cls is not None and isinstance(node, cls)


def _explicit_shard(nodes: list[Dataset]) -> Dataset | None:
    """A node that shards the pipeline itself: an explicit ``shard()`` (or a shard point),
    or a ``distribute`` whose service splits the data (trait ``uses_service``)."""
    from datapipe.ops.shard import ShardDataset

    return next((n for n in nodes if isinstance(n, (ShardDataset, _Cut)) or n.uses_service), None)


def _varies_between_workers(node: Dataset, options: Options) -> bool:
    """Whether ``node``'s own output order may differ between workers (an unseeded random
    op, or a parallel op with ``deterministic=False``)."""
    if node.uses_randomness and node.op_seed is None and options.seed is None:
        return True
    req = node.stage_request  # the op's declaration (datapipe.parallel.request)
    return req is not None and req.order_varies(options.deterministic is not False)


def _choose(nodes: list[Dataset], policy: AutoShardPolicy, k: int) -> tuple[AutoShardPolicy, str]:
    """The policy to apply, and why (for the log record)."""
    if policy is not AutoShardPolicy.AUTO:
        return policy, "set in Options.distribute"
    file_source = _file_source_class()
    leaves = [n for n in nodes if not n._inputs]
    files = [n for n in nodes if _is(n, file_source)]
    few = [f for f in files if len(f.files) < k]
    if files and len(files) == len(leaves) and not few:
        return AutoShardPolicy.FILE, f"AUTO: every source reads files, >= {k} each"
    if not files:
        why = "no file source"
    elif few:
        why = f"'{few[0]._name}' has {len(few[0].files)} files for {k} workers"
    else:
        why = "sources that do not read files"
    return AutoShardPolicy.DATA, f"AUTO fell back to DATA: {why}"


# ---- building the shard points -------------------------------------------------------------
class _Builder:
    """Inserts the shard points for one worker (see the module docstring)."""

    def __init__(self, ctx: IterContext, worker: WorkerContext, uneven: str, policy: str):
        self.ctx, self.worker, self.uneven, self.policy = ctx, worker, uneven, policy
        self.options = ctx.options
        self.resuming = ctx.resume is not None
        self.cuts: list[_Cut] = []
        self.key = (policy.lower(), uneven, f"{worker.index}-of-{worker.count}")

    # -- DATA --
    def data(self, root: Dataset) -> Dataset:
        memo: dict[tuple, Dataset] = {}

        def visit(node: Dataset, aligned: bool) -> Dataset:
            key = (id(node), aligned)
            if key not in memo:
                if self._cut_here(node, aligned):
                    memo[key] = self._data_cut(node)
                else:
                    below = aligned or node.aligns_inputs
                    out = replace_inputs(node, [visit(c, below) for c in node._inputs])
                    memo[key] = self._for_worker(out)
            return memo[key]

        return visit(root, False)

    def _cut_here(self, node: Dataset, aligned: bool) -> bool:
        if not node._inputs or not node.commutes_with_shard:
            return True
        if aligned and not node.elementwise:
            return True  # below zip: an op that may drop or merge elements would misalign
        random_access = node._random_access_breaker() is None
        # A seeded random op on a random-access chain keeps global indices (module doc).
        return (
            random_access
            and node.uses_randomness
            and not _varies_between_workers(node, self.options)
        )

    def _data_cut(self, node: Dataset) -> Dataset:
        if _is(node, _file_list_class()):
            return self._file_list_cut(node, even=True)
        node = self._same_order_everywhere(node)
        n = node.cardinality()
        known = n >= 0
        if not known and n == UNKNOWN_CARDINALITY:
            self._cannot_even(f"the cardinality at '{node._name}' is unknown")
        r = n if known else None
        share = worker_share(WHOLE, r, self.worker.index, self.worker.count, self._even(known))
        label = self._label(node, share, n)
        cut_id = len(self.cuts)
        if node._random_access_breaker() is None:
            cut: _Cut = IndexCut(node, cut_id, share, label)
        else:
            cut = StreamCut(node, cut_id, share, label)
        self.cuts.append(cut)
        return cut

    def _same_order_everywhere(self, pool: Dataset) -> Dataset:
        """``pool`` with every shuffling ``list_files`` below it drawing its order from the
        epoch alone (the same on every worker); raises for any other op whose order may
        differ between workers."""
        file_list = _file_list_class()
        memo: dict[int, Dataset] = {}

        def visit(node: Dataset) -> Dataset:
            if id(node) not in memo:
                out = replace_inputs(node, [visit(c) for c in node._inputs])
                if _is(out, file_list) and _varies_between_workers(node, self.options):
                    pos = self.ctx.positions.get(id(origin(node)), 0)
                    out = out.with_seed(zlib.crc32(f"datapipe.auto_shard/{pos}".encode()))
                    self._note(
                        f"auto-shard: '{node._name}' shuffles without a seed below the shard "
                        f"point above '{pool._name}'; every worker now draws its order from "
                        "the epoch alone (set Options.seed or its seed to choose it)"
                    )
                elif _varies_between_workers(node, self.options):
                    raise AutoShardError(
                        f"auto-shard (DATA): '{pool._name}' needs the same element order on "
                        f"every worker, but '{node._name}' below it is not deterministic "
                        "across workers; give it a seed, set Options.seed (and deterministic "
                        "parallel ops), shard explicitly, or set "
                        "Options.distribute.auto_shard_policy = AutoShardPolicy.OFF"
                    )
                memo[id(node)] = out
            return memo[id(node)]

        return visit(pool)

    # -- FILE --
    def files(self, root: Dataset) -> Dataset:
        file_source = _file_source_class()
        memo: dict[tuple, Dataset] = {}

        def visit(node: Dataset, expanded: bool) -> Dataset:
            key = (id(node), expanded)
            if key not in memo:
                if _is(node, file_source):
                    memo[key] = self._file_cut(node, even=not expanded)
                else:
                    below = expanded or node.expands
                    out = replace_inputs(node, [visit(c, below) for c in node._inputs])
                    memo[key] = self._for_worker(out)
            return memo[key]

        out = visit(root, False)
        if not self.cuts:
            raise AutoShardError(
                "auto-shard (FILE): the graph has no file source to shard "
                f"({self.worker.count} workers); use AutoShardPolicy.DATA or AUTO"
            )
        return out

    def _file_cut(self, src: Any, even: bool) -> Dataset:
        k = self.worker.count
        if len(src.files) < k and not self.resuming:
            raise AutoShardError(
                f"auto-shard (FILE): '{src._name}' has {len(src.files)} files but there are {k} "
                "workers; FILE sharding needs at least one file per worker (use "
                "AutoShardPolicy.DATA or AUTO, or more files)"
            )
        if _is(src, _file_list_class()):
            return self._file_list_cut(src, even)
        return self._unit_cut(src, even)

    def _file_list_cut(self, src: Any, even: bool) -> Dataset:
        """``list_files`` (elements are its units): split by sorted name, read in the
        source's order (shuffled each epoch by the shard point when the source shuffles)."""
        units = sorted_units(src)
        n = len(units)
        if not even:
            self._cannot_even(f"'{src._name}' is expanded above the shard point")
        uneven = self.uneven if even else "allow"
        order_of = None if src.shuffles else _source_order(src, units)
        share = worker_share(WHOLE, n, self.worker.index, self.worker.count, uneven, order_of)
        label = self._label(src, share, n).replace("elements", "files")
        permute = src if src.shuffles else None
        cut = IndexCut(src.in_order(units), len(self.cuts), share, label, even, permute)
        self.cuts.append(cut)
        return cut

    def _unit_cut(self, src: Any, even: bool) -> Dataset:
        units = sorted_units(src)
        n, k, i = len(units), self.worker.count, self.worker.index
        counts = split_counts(n, k, "allow")
        order_of = _source_order(src, units)
        shares = [worker_share(WHOLE, n, j, k, "allow", order_of) for j in range(k)]
        limit, pad = None, 0
        if self.uneven != "allow":
            rows = [restricted(src, units, s).cardinality() for s in shares]
            if not even or any(r < 0 for r in rows):
                why = "expanded above" if not even else "of unknown length"
                self._cannot_even(f"the rows of '{src._name}' are {why}")
            elif self.uneven == "drop":
                limit = min(rows) if rows[i] > min(rows) else None
            else:
                pad = max(rows) - rows[i]
        shown = min(4, counts[i])
        mine = [_short(units[int(p)]) for p in shares[i].segments[0].positions(0, shown)]
        more = ", ..." if counts[i] > 4 else ""
        label = f"{counts[i]} of {n} files of '{src._name}' ({', '.join(mine)}{more})"
        cut = UnitCut(src, len(self.cuts), shares[i], label, limit, pad)
        self.cuts.append(cut)
        return cut

    # -- common --
    def _for_worker(self, node: Dataset) -> Dataset:
        """``node`` (above a shard point) as this worker runs it (a cache of its own)."""
        return node if self.ctx.dry_run else node._for_worker(self.key)

    def _even(self, known: bool) -> str:
        return self.uneven if known else "allow"

    def _cannot_even(self, why: str) -> None:
        if self.uneven != "allow":
            self._note(
                f"auto-shard: {why}, so uneven={self.uneven!r} cannot even out the workers' "
                "shares; they may yield different numbers of elements (end the pipeline "
                "with a known count, e.g. repeat().take(n), or use torch's Join)"
            )

    def _note(self, msg: str) -> None:
        if not self.ctx.dry_run:
            _log_once(logging.WARNING, msg)

    def _label(self, node: Dataset, share: Share, n: int) -> str:
        k, i = self.worker.count, self.worker.index
        nth = "" if k == 1 else f", every {_ordinal(k)} from {i}"
        if not share.bounded:
            total = "count unknown" if n == UNKNOWN_CARDINALITY else "infinitely many"
            return f"the elements of '{node._name}'{nth} ({total})"
        total = f"{n}" if n >= 0 else "?"
        return f"{len(share)} of {total} elements of '{node._name}'{nth}"


def _source_order(src: Any, units: list) -> Any:
    """``order_of`` for ``worker_share``: reads a share's units (positions in the sorted
    ``units``) in the order the source lists them."""
    files = src.files
    if getattr(files, "same_table", None) is not None and files.same_table(units):
        return _path_list_order(files, units)
    where = {u: t for t, u in enumerate(files)}

    def order_of(positions: Any) -> list | None:
        order = sorted(range(len(positions)), key=lambda j: where[units[int(positions[j])]])
        return None if order == list(range(len(positions))) else order

    return order_of


def _path_list_order(files: Any, units: Any) -> Any:
    """``_source_order`` for a ``PathList`` and a view of it, in numpy (no strings)."""
    at = np.full(files.table_size(), -1, dtype=np.int64)
    at[files.rows()] = np.arange(len(files))
    source_pos = at[units.rows()]

    def order_of(positions: Any) -> Any:
        order = np.argsort(source_pos[np.asarray(positions, dtype=np.int64)], kind="stable")
        return None if np.array_equal(order, np.arange(len(order))) else order

    return order_of


def _ordinal(k: int) -> str:
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


def _short(unit: Any) -> str:
    path = unit if isinstance(unit, str) else f"{unit[0]}#{unit[1]}"
    return path.rsplit("/", 1)[-1]


def _mark(root: Dataset) -> Dataset:
    """``root`` with every node a copy (``origin`` set): the graph one worker runs, whose
    nodes' ``cardinality()`` is the graph's own count (never sharded again)."""
    memo: dict[int, Dataset] = {}

    def visit(node: Dataset) -> Dataset:
        if id(node) not in memo:
            out = replace_inputs(node, [visit(c) for c in node._inputs])
            if out is node and "_origin" not in node.__dict__:
                out = copy_node(node)
            memo[id(node)] = out
        return memo[id(node)]

    return visit(root)


# ---- the rewrite -----------------------------------------------------------------------
def auto_shard(root: Dataset, ctx: IterContext) -> Dataset:
    """The auto-shard rewrite (see the module docstring): ``root`` as this worker runs it.

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
    options = ctx.options
    requested = policy_of(options)
    uneven = uneven_of(options)
    if requested is AutoShardPolicy.OFF or (ctx.resume is not None and ctx.resume.policy == "OFF"):
        return root
    worker = resolve_worker_context(options)
    if worker.source == "default" and worker.count == 1 and ctx.resume is None:
        return root  # no worker context: nothing to shard, no position to record
    nodes = walk(root)
    explicit = _explicit_shard(nodes)
    if explicit is not None:
        if worker.count > 1 and not ctx.dry_run:
            how = (
                "a distribute() hands the data to a service whose dispatcher splits it"
                if explicit.uses_service
                else "the pipeline shards itself with an explicit shard()"
            )
            _announce(root, worker, f"off: {how}")
        return root
    if ctx.resume is not None and ctx.resume.policy:
        policy, why = AutoShardPolicy(ctx.resume.policy), "the checkpoint's"
    else:
        policy, why = _choose(nodes, requested, worker.count)
    builder = _Builder(ctx, worker, uneven, policy.value)
    out = builder.files(root) if policy is AutoShardPolicy.FILE else builder.data(root)
    out = _mark(out)
    ctx.worker, ctx.policy, ctx.cut_nodes = worker, policy.value, builder.cuts
    if worker.count > 1 and not ctx.dry_run:
        share = "; ".join(c.label for c in builder.cuts)
        _announce(root, worker, f"policy {policy.value} ({why}); this worker reads {share}")
    return out


def _announce(root: Dataset, worker: WorkerContext, what: str) -> None:
    """The one INFO record of a pipeline's first auto-sharded ``iter()`` in a process."""
    while type(root)._name == "with_options":
        root = root._inputs[0]
    seen = _announced.setdefault(root, set())
    key = (worker.index, worker.count)
    if key in seen:
        return
    seen.add(key)
    loader = (
        f", DataLoader worker {worker.loader_index} of {worker.loader_count}"
        if worker.loader_count > 1
        else ""
    )
    logger.info(
        f"auto-shard: rank {worker.process_index} of world size {worker.process_count}"
        f"{loader} (worker {worker.index} of {worker.count}, from {worker.source}): {what}"
    )


def install() -> None:
    """Put ``auto_shard`` first in ``datapipe.dataset_ops.REWRITES`` (once)."""
    if auto_shard not in REWRITES:
        REWRITES.insert(0, auto_shard)


__all__ = [
    "AutoShardError",
    "UNEVEN_CHOICES",
    "auto_shard",
    "install",
    "policy_of",
    "replace_inputs",
    "uneven_of",
]
