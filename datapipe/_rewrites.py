"""Graph rewrites: the copying helpers every rewrite uses, and the push-down of index ops.

A rewrite never mutates the user's graph: it copies the nodes it changes (and their
consumers) with ``replace_inputs``, and each copy remembers the node it stands for
(``datapipe._context.origin``), so it draws that node's seeds and a ``cardinality()`` asked
of it is the graph's own count.

``push_index_ops`` (in ``datapipe.dataset_ops.REWRITES`` after auto-sharding): an op that keeps
some input indices (trait ``selects_indices``: ``shard``, ``skip``, auto-sharding's shard
points) above a random-access chain moves below the ``elementwise`` ops of that chain, so
those ops compute only the kept elements and still run as iterators (in parallel, with
statistics) instead of through random access. ``random_map`` above the moved op keys its
generators on the source index (``OpIterator.index_base``), so its draws do not change.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Sequence
from typing import Any, TypeVar

from datapipe._context import IterContext, origin, walk
from datapipe.dataset_ops import REWRITES, Dataset

_D = TypeVar("_D", bound=Dataset)


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


def copy_node(node: _D) -> _D:
    """A shallow copy of ``node`` that stands for it (same seeds, raw ``cardinality()``)."""
    out = copy.copy(node)
    out._origin = origin(node)
    out._iterations = itertools.count()
    return out


def replace_inputs(node: _D, new_inputs: Sequence[Dataset]) -> _D:
    """A copy of ``node`` reading ``new_inputs`` instead of its inputs (``node`` itself when
    they are the same objects).

    Nodes are immutable, so the graph is rebuilt by copying. Attributes that hold the old
    inputs (``zip``'s nested structure of datasets) are rewritten too; everything else
    (functions, arguments, caches) is shared with the original.

    Raises:
        ValueError: ``new_inputs`` has another length than the node's inputs.
    """
    old = node._inputs
    if len(old) != len(new_inputs):
        raise ValueError(f"{node._name}: expected {len(old)} inputs, got {len(new_inputs)}")
    if all(a is b for a, b in zip(old, new_inputs)):
        return node
    mapping = {id(a): b for a, b in zip(old, new_inputs)}
    out = copy_node(node)
    for key, value in vars(node).items():
        if key not in ("_inputs", "_origin", "_iterations"):
            setattr(out, key, _substitute(value, mapping))
    out._inputs = tuple(new_inputs)
    return out


def push_index_ops(root: Dataset, ctx: IterContext) -> Dataset:
    """The ``REWRITES`` entry described in the module docstring."""
    if root is ctx.graph and not ctx.index_ops:
        return root  # the user's graph, untouched by earlier rewrites: known at for_graph
    if not any(n.selects_indices for n in walk(root)):
        return root
    memo: dict[int, Dataset] = {}

    def visit(node: Dataset) -> Dataset:
        if id(node) not in memo:
            out = replace_inputs(node, [visit(c) for c in node._inputs])
            memo[id(node)] = _sink(out) if out.selects_indices else out
        return memo[id(node)]

    return visit(root)


def _sink(sel: Dataset) -> Dataset:
    """``sel`` moved below the element-wise random-access ops right under it."""
    chain: list[Dataset] = []
    node = sel._inputs[0]
    while (
        node.elementwise
        and node._inputs
        and sel._passes_below(node)
        and node._random_access_breaker() is None
    ):
        chain.append(node)
        node = node._inputs[0]
    if not chain:
        return sel
    out = replace_inputs(sel, [node])
    for above in reversed(chain):
        out = replace_inputs(above, [out])
    return out


def install() -> None:
    """Append ``push_index_ops`` to ``REWRITES`` (once)."""
    if push_index_ops not in REWRITES:
        REWRITES.append(push_index_ops)


install()
