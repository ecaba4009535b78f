"""The layout of a public ``Iterator``'s state, and restoring one.

A state is a dict (JSON-like; numpy arrays and elements inside; ``save_state`` writes it):

``epoch``
    the epoch tuple (seeds mix it in; after a restore the dataset's next ``iter()`` is the
    epoch after it);
``seed``
    the global seed (without ``Options.seed``, the entropy of the graph's first random op,
    ``datapipe._context``: kept, so a pipeline rebuilt in a new process resumes the same
    permutation);
``worker``
    ``[index, count]`` of the worker that saved it (``[0, 1]`` without a worker context);
``root``
    the op chain's own state (each op's ``get_state``, nested);
``pending``
    elements the iterator had computed and not yet delivered (at most one chunk);
``produced``
    elements the chain had produced in the epoch, ``pending`` included (an elastic resume
    weighs what the ops still hold by it);
``fingerprint``
    the pipeline's structure and its sources' sizes (``datapipe._fingerprint``), which
    ``set_state`` compares before restoring (a state without one, saved by an older
    version, is restored unchecked).

With a worker context (see ``datapipe.distribute``) also:

``policy``
    the auto-shard policy applied (``"FILE"`` / ``"DATA"``);
``cuts``
    per shard point: its share of the pool and how much of it was taken
    (``datapipe.distribute.shard_point.cut_state``);
``drains``
    after an elastic resume, the adopted old chains still being drained: each a dict of
    ``seed``, ``root``, ``pending`` and ``cuts``.

``set_state(state)`` restores a state of the same layout; ``set_state([states...])`` takes
the states of all workers of a run and resumes on this iterator's layout, whatever it is
(``datapipe.distribute.elastic``).
"""

from __future__ import annotations

from typing import Any

from datapipe._context import IterContext
from datapipe._iterator import OpIterator


def layout(ctx: IterContext) -> list[int]:
    """``[index, count]`` of the worker a chain was sharded for (``[0, 1]``: not sharded)."""
    w = ctx.worker
    return [0, 1] if w is None or not ctx.cut_nodes else [int(w.index), int(w.count)]


def chain_state(ctx: IterContext, root: OpIterator, pending: list, produced: int) -> dict:
    """One chain's state (the chain's own, then its shard points' accounting)."""
    state = {
        "seed": ctx.seed,
        "root": root.get_state(),
        "pending": list(pending),
        "produced": int(produced),
    }
    if ctx.cut_nodes:
        from datapipe.distribute.shard_point import cut_state

        # After the chain's state: ``taken`` then bounds every element that state holds.
        state["cuts"] = [cut_state(node, ctx) for node in ctx.cut_nodes]
    return state


def iterator_state(it: Any) -> dict:
    """``Iterator.get_state``: see the module docstring."""
    from datapipe._fingerprint import fingerprint

    ctx = it._ctx
    state: dict = {"epoch": list(it._epoch), "worker": layout(ctx)}
    produced = it._produced
    if it.root is not it._primary:
        from datapipe.distribute.elastic import drained_out

        produced -= drained_out(it.root)  # the drained chains count their own
    state.update(chain_state(ctx, it._primary, it._buf[it._pos :], produced))
    state["fingerprint"] = fingerprint(it._dataset)
    if ctx.cut_nodes:
        state["policy"] = ctx.policy
    if it.root is not it._primary:
        from datapipe.distribute.elastic import drain_states

        state["drains"] = drain_states(it.root)
    return state


def _check(state: Any) -> dict:
    from datapipe._iterator import _check_outer_state, check_state_dict

    check_state_dict(state, ("epoch", "root", "pending"), "load_state_dict")
    _check_outer_state(state)
    return state


def restore_iterator(it: Any, state: Any) -> None:
    """``Iterator.set_state``: see the module docstring.

    Raises:
        ValueError: the state does not fit (another dataset or sources of other sizes:
            its fingerprint names what differs; another layout without the list of all
            workers' states, a malformed list), or is neither the dict ``state_dict()``
            returned nor a list of them.
    """
    from datapipe._fingerprint import check

    if isinstance(state, (list, tuple)):
        check(it._dataset, list(state))
        return _restore_all(it, list(state))
    state = _check(state)
    check(it._dataset, [state])
    saved, mine = [int(v) for v in state.get("worker", [0, 1])], layout(it._ctx)
    if saved != mine and not (saved == [0, 1] and mine[1] == 1):
        raise ValueError(
            f"load_state_dict: the state was saved by worker {saved[0]} of {saved[1]} but "
            f"this iterator is worker {mine[0]} of {mine[1]} (ranks x DataLoader workers); "
            "to resume on another number of workers pass the list of all workers' states, "
            "it.load_state_dict([state_0, ..., state_n-1]), in every new worker"
        )
    if _fits_current_chain(it, state):
        _restore_root(it._primary, state["root"])
        it._buf, it._pos = list(state["pending"]), 0
        it._produced = int(state.get("produced", 0))
        return None
    from datapipe.distribute import elastic

    epoch = tuple(int(e) for e in state["epoch"])
    policy = state.get("policy")
    specs = [elastic.adopt_same_layout(d, policy, True) for d in state.get("drains", [])]
    specs.append(elastic.adopt_same_layout(state, policy, False))
    elastic.install(it, epoch, specs)
    return None


def _fits_current_chain(it: Any, state: dict) -> bool:
    """Whether ``state`` restores into the chain ``iter()`` built (no rebuild needed)."""
    ctx = it._ctx
    if tuple(state["epoch"]) != it._epoch or it.root is not it._primary:
        return False
    if state.get("seed") is not None and state["seed"] != ctx.seed:
        return False
    if state.get("drains") or bool(state.get("cuts")) != bool(ctx.cut_nodes):
        return False
    if ctx.cut_nodes:
        from datapipe.distribute.shard_point import cut_state

        now = [cut_state(node, ctx)["share"] for node in ctx.cut_nodes]
        return now == [c["share"] for c in state["cuts"]] and ctx.policy == state.get("policy")
    return True


def _restore_root(root: OpIterator, state: Any) -> None:
    try:
        root.set_state(state)
    except (KeyError, TypeError, IndexError, AttributeError) as e:
        raise ValueError(
            "load_state_dict: the state does not fit this pipeline (it was saved by an "
            f"iterator of another dataset: {type(e).__name__}: {e}); restore a state into "
            "an iterator of the same dataset, built the same way"
        ) from e


def _restore_all(it: Any, states: list) -> None:
    from datapipe.distribute import elastic

    states = elastic.check_states(states)
    mine = layout(it._ctx)
    if len(states) == mine[1]:
        return restore_iterator(it, states[mine[0]])  # the same layout: this worker's own
    epoch, specs = elastic.plan_chains(it._dataset, states, it._ctx.seed)
    elastic.install(it, epoch, specs)
    return None
