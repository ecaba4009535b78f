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
the states of all workers of a run and resumes on this iterator's layout, whatever it is.

Layers. The core writes and checks what every chain has (``epoch``, ``seed``, ``root``,
``pending``, ``produced``, ``worker``) and restores a state into the chain ``iter()`` built. What
sharding adds (``worker``'s layout, ``policy``, ``cuts``, ``drains``) and how a state that
does not fit that chain is restored (a chain rebuilt for the state's epoch, seed and
shares; an elastic resume across layouts) belong to the layer above, which
``datapipe.distribute`` installs (``install_layer``: ``distribute.resume_layer``), the way
Grain keeps elasticity in an iterator on top of its datasets (``ElasticIterator``). This
module imports nothing from ``datapipe.distribute`` (docs/architecture.md, "Checkpoints").
"""

from __future__ import annotations

from typing import Any

from datapipe._context import IterContext
from datapipe._iterator import OpIterator


class StateLayer:
    """The hooks a layer above the core iterator's checkpoint implements. This default is
    a pipeline without a worker context, and without the layer that rebuilds chains."""

    def layout(self, ctx: IterContext) -> list[int]:
        """``[index, count]`` of the worker a chain was sharded for (``[0, 1]``: not)."""
        return [0, 1]

    def chain_extras(self, ctx: IterContext) -> dict:
        """What one chain's state records after its root's (the shard points' accounting:
        read after the root's state, it bounds every element that state holds)."""
        return {}

    def iterator_extras(self, ctx: IterContext, root: OpIterator, primary: OpIterator) -> dict:
        """What the public iterator's state records beyond its own chain's (``root`` is
        what ``__next__`` pulls, ``primary`` this worker's own chain)."""
        return {}

    def produced_elsewhere(self, root: OpIterator, primary: OpIterator) -> int:
        """Elements the public iterator delivered from chains other than ``primary``
        (drained ones: their own states count them)."""
        return 0

    def fits(self, ctx: IterContext, state: dict) -> bool:
        """The layer's part of whether ``state`` restores into the chain built."""
        return not state.get("drains") and not state.get("cuts")

    def rebuild(self, it: Any, state: dict) -> None:
        """Restore a state that does not fit the chain built (another epoch or seed): a
        chain is built for the state's epoch and seed, and the state restored into it."""
        if state.get("cuts") or state.get("drains"):
            raise ValueError(
                "load_state_dict: the state was saved by a sharded pipeline; restoring it "
                "needs datapipe.distribute (import datapipe installs it)"
            )
        epoch = tuple(int(e) for e in state["epoch"])
        ctx, root = it.dataset._build_chain(epoch, state.get("seed"))
        try:
            _restore_root(root, state["root"])
        except BaseException:
            root.close()
            raise
        pending = list(state["pending"])
        it.replace_chains(epoch, ctx, root, root, pending, int(state.get("produced", 0)))

    def restore_all(self, it: Any, states: list) -> None:
        """``set_state([states...])``: all workers' states, resumed on this layout."""
        raise ValueError(
            "load_state_dict: resuming from a list of states needs datapipe.distribute "
            "(import datapipe installs it)"
        )


_layer = StateLayer()


def install_layer(layer: StateLayer) -> None:
    """Put ``layer`` over the core checkpoint (``datapipe.distribute`` does, on import)."""
    global _layer
    _layer = layer


def layout(ctx: IterContext) -> list[int]:
    """``[index, count]`` of the worker a chain was sharded for (``[0, 1]``: not sharded)."""
    return _layer.layout(ctx)


def chain_state(ctx: IterContext, root: OpIterator, pending: list, produced: int) -> dict:
    """One chain's state (the chain's own, then what the layer above records of it)."""
    state = {
        "seed": ctx.seed,
        "root": root.get_state(),
        "pending": list(pending),
        "produced": int(produced),
    }
    state.update(_layer.chain_extras(ctx))
    return state


def iterator_state(it: Any) -> dict:
    """``Iterator.get_state``: see the module docstring."""
    from datapipe._fingerprint import fingerprint

    ctx = it._ctx
    state: dict = {"epoch": list(it._epoch), "worker": layout(ctx)}
    produced = it._produced - _layer.produced_elsewhere(it.root, it._primary)
    state.update(chain_state(ctx, it._primary, it._buf[it._pos :], produced))
    state["fingerprint"] = fingerprint(it._dataset)
    state.update(_layer.iterator_extras(ctx, it.root, it._primary))
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
        return _layer.restore_all(it, list(state))
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
    _layer.rebuild(it, state)
    return None


def _fits_current_chain(it: Any, state: dict) -> bool:
    """Whether ``state`` restores into the chain ``iter()`` built (no rebuild needed)."""
    ctx = it._ctx
    if tuple(state["epoch"]) != it._epoch or it.root is not it._primary:
        return False
    if state.get("seed") is not None and state["seed"] != ctx.seed:
        return False
    return _layer.fits(ctx, state)


def _restore_root(root: OpIterator, state: Any) -> None:
    try:
        root.set_state(state)
    except (KeyError, TypeError, IndexError, AttributeError) as e:
        raise ValueError(
            "load_state_dict: the state does not fit this pipeline (it was saved by an "
            f"iterator of another dataset: {type(e).__name__}: {e}); restore a state into "
            "an iterator of the same dataset, built the same way"
        ) from e
