"""The core iterator's checkpoint and the layer above it (issue 21): the core imports
nothing from ``datapipe.distribute``; what sharding adds to a state, and the restores the
core chain cannot take, come through the layer ``datapipe.distribute`` installs."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import datapipe as dp
from datapipe import _checkpoint
from datapipe.distribute.resume_layer import ShardedStateLayer

ROOT = Path(__file__).parents[2]


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.append(node.module)
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
    return out


@pytest.mark.parametrize("module", ["_checkpoint.py", "_iterator.py"])
def test_core_iterator_and_checkpoint_import_nothing_from_distribute(module):
    # _checkpoint.py imported distribute.elastic and distribute.shard_point (lazily, inside
    # functions): the core iterator's state knew about sharding.
    found = [m for m in _imports(ROOT / "datapipe" / module) if m.startswith("datapipe.distri")]
    assert found == []


def test_distribute_installs_its_layer():
    assert type(_checkpoint._layer) is ShardedStateLayer


class _Recording(_checkpoint.StateLayer):
    """A layer that adds one entry to each chain's state and refuses states without it."""

    def __init__(self) -> None:
        self.fits_calls = 0
        self.rebuilt: list = []

    def chain_extras(self, ctx):
        return {"note": "mine"}

    def fits(self, ctx, state):
        self.fits_calls += 1
        return state.get("note") == "mine"

    def rebuild(self, it, state):
        self.rebuilt.append(state["epoch"])
        raise ValueError("rebuilt by the layer")


@pytest.fixture
def layer():
    old = _checkpoint._layer
    yield _checkpoint.install_layer
    _checkpoint.install_layer(old)


def test_a_layer_adds_to_the_state_and_decides_what_fits(layer, threads):
    rec = _Recording()
    layer(rec)
    ds = dp.range(20).map(lambda x: int(x) * 3, num_parallel_calls=2)
    it = iter(ds)
    head = [next(it) for _ in range(7)]
    state = it.get_state()
    assert head == [3 * i for i in range(7)]
    assert state["note"] == "mine"  # the layer's entry, after the chain's own
    assert list(state)[:5] == ["epoch", "worker", "seed", "root", "pending"]
    assert [next(it) for _ in range(5)] == [3 * i for i in range(7, 12)]
    it.set_state(state)  # its own chain (same epoch and seed): the layer says it fits
    assert rec.fits_calls == 1 and rec.rebuilt == []
    assert [int(x) for x in it] == [3 * i for i in range(7, 20)]
    with pytest.raises(ValueError, match="rebuilt by the layer"):
        iter(ds).set_state(state)  # a new iter() is the next epoch: the layer rebuilds
    assert rec.rebuilt == [[0]]
    del state["note"]  # the layer refuses its own chain now
    with pytest.raises(ValueError, match="rebuilt by the layer"):
        it.set_state(state)
    assert rec.fits_calls == 2
    it.close()


def test_without_the_distribute_layer_core_states_still_restore(layer, threads):
    layer(_checkpoint.StateLayer())
    ds = dp.range(10).map(lambda x: int(x) + 1, num_parallel_calls=2).prefetch(2)
    it = iter(ds)
    assert [int(next(it)) for _ in range(4)] == [1, 2, 3, 4]
    state = it.get_state()
    assert "cuts" not in state and "policy" not in state and state["worker"] == [0, 1]
    it2 = iter(ds)  # another seed (none is set): a chain is rebuilt for the state's
    it2.set_state(state)
    assert [int(x) for x in it2] == list(range(5, 11))
    with pytest.raises(ValueError, match="needs datapipe.distribute"):
        it2.set_state([state])
    sharded = dict(state, cuts=[{"kind": "index", "share": {}, "taken": 0}])
    with pytest.raises(ValueError, match="saved by a sharded pipeline"):
        iter(ds).set_state(sharded)
    it.close()
    it2.close()
