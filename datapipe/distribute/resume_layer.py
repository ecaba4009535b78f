"""The layer ``datapipe.distribute`` puts over the core iterator's checkpoint
(``datapipe._checkpoint.install_layer``, on import of this package).

The core records and restores what every chain has; this layer adds what sharding adds
and how a state that does not fit the chain ``iter()`` built is restored:

* the worker layout (``[index, count]``) of a sharded chain;
* per shard point, its share and how much of it was taken (``cuts``:
  ``shard_point.cut_state``), read after the chain's own state;
* the auto-shard ``policy``, and the chains an elastic resume still drains (``drains``;
  what they delivered is counted in their own states, not in the primary chain's
  ``produced``);
* a rebuild: a state of another epoch, seed or shares gets a chain built for it
  (``elastic.adopt_same_layout`` + ``elastic.install``); a list of all workers' states
  resumes on this layout (``elastic.plan_chains``).

Grain keeps elasticity in an iterator on top of its datasets (``ElasticIterator``, which
owns the global position and rebuilds the inner iterator); here it is this layer on top
of the core checkpoint, which imports nothing from ``datapipe.distribute``.
"""

from __future__ import annotations

from typing import Any

from datapipe._checkpoint import StateLayer, restore_iterator
from datapipe._context import IterContext
from datapipe._iterator import OpIterator
from datapipe.distribute import elastic
from datapipe.distribute.shard_point import cut_state


class ShardedStateLayer(StateLayer):
    """Shard points, policies, drains and elastic restores (see the module docstring)."""

    def layout(self, ctx: IterContext) -> list[int]:
        w = ctx.worker
        return [0, 1] if w is None or not ctx.cut_nodes else [int(w.index), int(w.count)]

    def chain_extras(self, ctx: IterContext) -> dict:
        if not ctx.cut_nodes:
            return {}
        # After the chain's state: ``taken`` then bounds every element that state holds.
        return {"cuts": [cut_state(node, ctx) for node in ctx.cut_nodes]}

    def iterator_extras(self, ctx: IterContext, root: OpIterator, primary: OpIterator) -> dict:
        out: dict = {}
        if ctx.cut_nodes:
            out["policy"] = ctx.policy
        if root is not primary:
            out["drains"] = elastic.drain_states(root)
        return out

    def produced_elsewhere(self, root: OpIterator, primary: OpIterator) -> int:
        return 0 if root is primary else elastic.drained_out(root)

    def fits(self, ctx: IterContext, state: dict) -> bool:
        if state.get("drains") or bool(state.get("cuts")) != bool(ctx.cut_nodes):
            return False
        if ctx.cut_nodes:
            now = [cut_state(node, ctx)["share"] for node in ctx.cut_nodes]
            saved = [c["share"] for c in state["cuts"]]
            return now == saved and ctx.policy == state.get("policy")
        return True

    def rebuild(self, it: Any, state: dict) -> None:
        epoch = tuple(int(e) for e in state["epoch"])
        policy = state.get("policy")
        specs = [elastic.adopt_same_layout(d, policy, True) for d in state.get("drains", [])]
        specs.append(elastic.adopt_same_layout(state, policy, False))
        elastic.install(it, epoch, specs)

    def restore_all(self, it: Any, states: list) -> None:
        states = elastic.check_states(states)
        mine = self.layout(it.context)
        if len(states) == mine[1]:
            restore_iterator(it, states[mine[0]])  # the same layout: this worker's own
            return
        epoch, specs = elastic.plan_chains(it.dataset, states, it.context.seed)
        elastic.install(it, epoch, specs)
