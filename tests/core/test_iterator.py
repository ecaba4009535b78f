"""The outer ``Iterator``: ``get_state``/``set_state`` and ``state_dict`` aliases resume
exactly at every cut, epochs restore, a run without a seed resumes the same stream, and a
foreign state gets a clear error."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from harness import values

import datapipe as dp

# ---- checkpointing -----------------------------------------------------------------------
CHAINS = {
    "map-batch": lambda: dp.range(50).map(lambda x: x * 3).batch(4),
    "shuffle-repeat-take": lambda: dp.range(23).shuffle(7, seed=1).repeat(3).take(60),
    "skip-shuffle-batch": lambda: dp.range(40).skip(5).shuffle(10, seed=9).batch(3),
    "repeat-forever-take": lambda: dp.range(4).shuffle(4, seed=2).repeat().take(30),
    "torch": lambda: dp.from_tensor_slices(torch.arange(20)).shuffle(5, seed=0).batch(6),
}


def _norm(x):
    return x.tolist() if hasattr(x, "tolist") else x


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_get_state_set_state_resumes_exactly_at_every_cut(name: str) -> None:
    make = CHAINS[name]
    full = [_norm(x) for x in make()]
    for k in range(len(full) + 1):
        it = iter(make())
        head = [_norm(next(it)) for _ in range(k)]
        state = it.get_state()
        resumed = iter(make())
        resumed.set_state(state)
        assert head + [_norm(x) for x in resumed] == full, f"cut at {k}"


def test_state_dict_aliases_and_epoch_restore() -> None:
    ds = dp.range(10).shuffle(10, seed=1)
    epoch0 = values(ds)
    it = iter(ds)  # epoch 1: a different order
    head = [int(next(it)) for _ in range(4)]
    state = it.state_dict()
    assert state["epoch"] == [1]
    fresh = iter(ds)  # an epoch-2 iterator, restored to epoch 1's position
    fresh.load_state_dict(state)
    rest = values(fresh)
    ref = dp.range(10).shuffle(10, seed=1)
    assert values(ref) == epoch0
    epoch1 = values(ref)
    assert epoch1 != epoch0 and head + rest == epoch1


def test_ragged_list_and_foreign_state_get_clear_errors() -> None:
    with pytest.raises(ValueError, match=r"from_tensor_slices: component element is ragged"):
        dp.from_tensor_slices([np.zeros(3), np.zeros(4)])
    it = iter(dp.range(20).shuffle(10, seed=0).batch(4))
    next(it)
    state = it.get_state()
    with pytest.raises(
        ValueError, match=r"another pipeline: its ops are batch\(shuffle\(range\)\)"
    ):
        iter(dp.range(20).batch(4)).set_state(state)
    del state["fingerprint"]  # a state saved before fingerprints: the ops' own checks
    with pytest.raises(ValueError, match="does not fit this pipeline"):
        iter(dp.range(20).batch(4)).set_state(state)


@pytest.mark.parametrize(
    "build",
    [
        lambda: dp.range(40).global_shuffle(),
        lambda: dp.range(40).random_map(lambda x, rng: int(rng.integers(10**6))),
        lambda: dp.range(40).shuffle(8).repeat(2),
    ],
    ids=["global_shuffle", "random_map", "shuffle"],
)
def test_resume_without_a_seed_continues_the_same_stream(build):
    # No Options(seed): the global seed is fresh entropy per iter(), so the state must carry
    # it, or a resumed global_shuffle draws another permutation (duplicates, lost elements).
    it = iter(build())
    [next(it) for _ in range(7)]
    state = copy.deepcopy(it.get_state())
    rest = values(it)
    resumed = iter(build())
    resumed.set_state(state)
    assert values(resumed) == rest
