"""What ``iter(dataset)`` knows while it rewrites the graph and builds the iterator chain.

``IterContext`` is typed (Grain's ``IteratorContext`` is the model): the merged ``Options``,
the global seed, the worker context (which of how many workers reads this chain), the
checkpoint being resumed, the shard points built, the tuner and the statistics recorder.
Every iterator of one chain shares it; nothing is stashed on iterators or nodes.

Per-op seeds derive from (global seed, op position, epoch), as docs/architecture.md's
"Randomness is explicit" asks. Positions are counted on the graph the user built, *before*
the rewrites, and a rewritten copy of a node (``origin(copy) is node``) draws its
original's seeds: the same stream whatever the rewrites did and however many threads run.

Without any seed (no ``Options.seed``, no checkpoint's), the global seed is the entropy of
the graph's first random op: drawn once per op object, when first needed, and kept on it
(``op_entropy``), as tf.data's ops draw their seeds when they are created. So every
``iter()`` and ``ds[i]`` of one pipeline share one seed: ``reshuffle_each_iteration=False``
gives the same order on every ``iter()``, ``ds[i]`` agrees with the first ``iter()``, and
a pipeline built on top of it (``ds.batch(2)``) shuffles ``ds``'s part the same way; a
new op object (``ds.shuffle(...)`` called again) draws a new order. A checkpoint stores
that one integer, so a pipeline rebuilt in a new process resumes the same order.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from datapipe.options import Options

if TYPE_CHECKING:
    from datapipe._iterator import OpIterator
    from datapipe.dataset_ops import Dataset

_DRAWS_TAG = 0x5EED_D4A5  # separates a stage's draw key from the op's own seeds

# Hooks called on every op iterator as it is built (statistics, tracing): fn(node, it) -> it.
ITERATOR_HOOKS: list[Callable[[Any, Any, IterContext], Any]] = []


def walk(root: Dataset) -> list[Dataset]:
    """All nodes of the graph under ``root``, inputs before consumers (post-order, once each).

    Iterative, not recursive: a graph may be deeper than Python's recursion limit (tf.data's
    options_test concatenates 1000 datasets in a chain)."""
    seen: set[int] = {id(root)}
    order: list[Dataset] = []
    stack: list[tuple[Dataset, int]] = [(root, 0)]  # (node, index of its next input)
    while stack:
        node, i = stack[-1]
        if i < len(node._inputs):
            stack[-1] = (node, i + 1)
            child = node._inputs[i]
            if id(child) not in seen:
                seen.add(id(child))
                stack.append((child, 0))
        else:
            stack.pop()
            order.append(node)
    return order


def merged_options(root: Dataset, nodes: list[Dataset] | None = None) -> Options:
    """The options of every ``with_options`` in the graph, merged (later ones win)."""
    opts = Options()
    for node in walk(root) if nodes is None else nodes:
        own = node._options
        if own is not None:
            opts = opts.merge(own)
    return opts


def origin(node: Dataset) -> Dataset:
    """The node of the user's graph that ``node`` (maybe a rewritten copy) stands for."""
    return node.__dict__.get("_origin") or node


def op_entropy(node: Dataset) -> int:
    """``node``'s own 63 random bits, drawn on first use and kept on the node of the
    user's graph (``dict.setdefault``: two threads asking at once get the same bits)."""
    own = origin(node).__dict__
    bits = own.get("_entropy")
    if bits is None:
        bits = own.setdefault("_entropy", secrets.randbits(63))
    return bits


@dataclass
class IterContext:
    """Per-``iter()`` context shared by the rewrites and every iterator of the chain.

    Attributes:
        options: the merged options of the whole graph.
        seed: the global seed (``options.seed``, a checkpoint's, or the entropy of the
            graph's first random op: see the module docstring).
        deterministic: ``options.deterministic`` with its default (True) applied.
        root: the graph being built (after the rewrites).
        worker: the ``WorkerContext`` the graph was sharded for, or None when no worker
            context is set (a plain single process: no shard point is inserted).
        policy: the auto-shard policy applied (``"FILE"`` / ``"DATA"``), or None.
        resume: the shard points' shares of a checkpoint being restored
            (``datapipe.distribute.elastic.ResumePlan``), or None.
        cut_nodes: the shard points (``datapipe.distribute.shard_point``) as the
            auto-shard rewrite made them, in cut-id order (a later rewrite may copy them:
            match by ``cut_id``); ``cuts`` their live iterators by cut id (the latest built);
            ``cuts_by_access`` the ids of those an op above reads through random access.
        tuner / recorder: the AUTOTUNE tuner and the statistics recorder, created on use.
        dry_run: the rewrites run for ``cardinality()``, not for an iteration (no logging,
            no per-worker state).
        graph: the user's graph, before the rewrites; ``index_ops``: whether it has ops
            that keep some input indices (``shard``, ``skip``).
    """

    options: Options
    seed: int
    deterministic: bool = True
    root: Any = None
    worker: Any = None
    policy: str | None = None
    resume: Any = None
    cut_nodes: Sequence = ()
    cuts: dict = field(default_factory=dict)
    cuts_by_access: set = field(default_factory=set)
    tuner: Any = None
    recorder: Any = None
    dry_run: bool = False
    positions: dict[int, int] = field(default_factory=dict)
    stage_positions: dict[int, int] = field(default_factory=dict)
    graph: Any = None
    index_ops: bool = False

    @classmethod
    def for_graph(
        cls, root: Dataset, seed: int | None = None, options: Options | None = None
    ) -> IterContext:
        """The context of ``root`` (the user's graph); ``seed`` (a checkpoint's global seed)
        overrides ``Options.seed``."""
        nodes = walk(root)
        opts = merged_options(root, nodes) if options is None else options
        if seed is None:
            seed = opts.seed
        positions: dict[int, int] = {}
        stage_positions: dict[int, int] = {}  # a separate count: the ops' seeds stay as they were
        first_random = None
        index_ops = False
        for node in nodes:
            if node.uses_randomness:
                positions[id(origin(node))] = len(positions)
                first_random = first_random or node
            if node.keys_draws:
                stage_positions[id(origin(node))] = len(stage_positions)
            index_ops = index_ops or node.selects_indices
        if seed is None:  # the first random op's own entropy (module docstring)
            seed = op_entropy(first_random) if first_random is not None else 0
        seed = int(seed)
        if seed < 0:  # an int64 seed as tf.data takes it; numpy's seeds are non-negative
            seed %= 2**64
        det = True if opts.deterministic is None else bool(opts.deterministic)
        return cls(opts, seed, det, root, positions=positions, graph=root, index_ops=index_ops,
                   stage_positions=stage_positions)  # fmt: skip

    # ---- randomness ----------------------------------------------------------------------
    def seed_sequence(self, node: Dataset, epoch: tuple, *extra: int) -> np.random.SeedSequence:
        """Seeds for ``node`` in ``epoch``: from its own ``seed`` argument when given (then
        independent of the global seed), else from (global seed, node position)."""
        op_seed = node.op_seed
        if op_seed is not None:
            base = [int(op_seed) % 2**63]
        else:
            base = [self.seed, self.positions.get(id(origin(node)), 0)]
        return np.random.SeedSequence([*base, *[int(e) for e in epoch], *extra])

    def rng(self, node: Dataset, epoch: tuple, *extra: int) -> np.random.Generator:
        return np.random.Generator(np.random.PCG64(self.seed_sequence(node, epoch, *extra)))

    def stage_draws(self, node: Dataset, epoch: tuple, base: tuple[int, int] | None) -> Any:
        """The key that random layers called in ``node``'s function (a ``map`` or
        ``random_map`` stage) draw from in ``epoch`` (``datapipe._draws``): from the op's
        own ``seed``, else from ``Options.seed`` and the stage's position among the graph's
        map-like ops, else from that position alone (never from the entropy of an unseeded
        pipeline: a seeded layer draws the same in every run). ``base``: the input's
        ``index_base``."""
        from datapipe._draws import StageDraws

        op_seed = node.op_seed
        explicit = op_seed is not None or self.options.seed is not None
        if op_seed is not None:
            base_seed = [int(op_seed) % 2**63]
        else:
            pos = self.stage_positions.get(id(origin(node)), 0)
            base_seed = [self.seed, pos] if explicit else [pos]
        seq = np.random.SeedSequence([*base_seed, *[int(e) for e in epoch], _DRAWS_TAG])
        return StageDraws(seq.generate_state(2, np.uint64), explicit, base)

    # ---- building --------------------------------------------------------------------------
    def make(self, node: Dataset, epoch: tuple) -> OpIterator:
        """Build ``node``'s iterator for ``epoch``, passing it through the hooks."""
        it = node._make_iterator(self, epoch)
        for hook in ITERATOR_HOOKS:
            it = hook(node, it, self)
        return it

    def register_cut(self, cut_id: int, it: OpIterator) -> None:
        """Record the live iterator of shard point ``cut_id`` (checkpoints read it)."""
        self.cuts[cut_id] = it
