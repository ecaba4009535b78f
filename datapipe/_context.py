"""What ``iter(dataset)`` knows while it builds the iterator chain.

Holds the merged ``Options``, the global seed, and the position of each random op in the
graph, so per-op seeds derive from (global seed, op position, epoch) as DESIGN.md's
"Randomness is explicit" asks: same seed, same stream, however many threads run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from datapipe.options import Options

if TYPE_CHECKING:
    from datapipe._iterator import OpIterator
    from datapipe.dataset import Dataset

# Hooks called on every op iterator as it is built (statistics, tracing): fn(node, it) -> it.
ITERATOR_HOOKS: list[Callable[[Any, Any, IterContext], Any]] = []


def walk(root: Dataset) -> list[Dataset]:
    """All nodes of the graph under ``root``, inputs before consumers (post-order, once each)."""
    seen: set[int] = set()
    order: list[Dataset] = []

    def visit(node: Dataset) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        for child in node._inputs:
            visit(child)
        order.append(node)

    visit(root)
    return order


def merged_options(root: Dataset) -> Options:
    opts = Options()
    for node in walk(root):
        own = getattr(node, "_options", None)
        if own is not None:
            opts = opts.merge(own)
    return opts


class IterContext:
    """Per-``iter()`` build context.

    Attributes:
        options: the merged options of the whole graph.
        seed: the global seed (``options.seed``, or fresh entropy for this ``iter()``).
    """

    def __init__(self, root: Dataset, options: Options | None = None, seed: int | None = None):
        self.root = root
        self.options = options if options is not None else merged_options(root)
        # An explicit ``seed`` is the one a checkpoint saved (Iterator.set_state).
        seed = self.options.seed if seed is None else seed
        self.seed = int(seed) if seed is not None else int(np.random.SeedSequence().entropy % 2**63)
        self._positions: dict[int, int] = {}
        self._keep_alive: list = []
        for node in walk(root):
            if getattr(node, "_uses_randomness", False):
                self._positions[id(node)] = len(self._positions)
        self.deterministic = (
            True if self.options.deterministic is None else self.options.deterministic
        )

    def alias(self, clone: Dataset, original: Dataset) -> None:
        """Let a rewritten copy of a node draw the same seeds as the node it stands for."""
        if id(original) in self._positions:
            self._positions[id(clone)] = self._positions[id(original)]
        self._keep_alive.append(clone)  # ids must not be reused while this context lives

    def seed_sequence(self, node: Dataset, epoch: tuple, *extra: int) -> np.random.SeedSequence:
        """Seeds for ``node`` in ``epoch``: from its own ``seed`` argument when given (then
        independent of the global seed), else from (global seed, node position)."""
        op_seed = getattr(node, "_seed", None)
        if op_seed is not None:
            base = [int(op_seed) % 2**63]
        else:
            base = [self.seed, self._positions.get(id(node), 0)]
        return np.random.SeedSequence([*base, *[int(e) for e in epoch], *extra])

    def rng(self, node: Dataset, epoch: tuple, *extra: int) -> np.random.Generator:
        return np.random.Generator(np.random.PCG64(self.seed_sequence(node, epoch, *extra)))

    def make(self, node: Dataset, epoch: tuple) -> OpIterator:
        """Build ``node``'s iterator for ``epoch``, passing it through the hooks."""
        it = node._make_iterator(self, epoch)
        for hook in ITERATOR_HOOKS:
            it = hook(node, it, self)
        return it
