"""get_state on parallel pipelines describes exactly the elements consumed; in-flight work
is recomputed after set_state."""

from __future__ import annotations

import json
import random
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import datapipe as dp

pytestmark = pytest.mark.timeout(120)


def _jitter(x):
    time.sleep(random.random() * 0.0005)
    return int(x) * 10


PIPELINES = {
    "map": lambda det: dp.range(200).map(_jitter, num_parallel_calls=3, deterministic=det),
    "map_auto": lambda det: dp.range(200).map(
        _jitter, num_parallel_calls=dp.AUTOTUNE, deterministic=det
    ),
    "batch": lambda det: (
        dp.range(200)
        .map(_jitter)
        .batch(3, num_parallel_calls=2, deterministic=det)
        .map(lambda b: int(b.sum()))
    ),
    "prefetch": lambda det: (
        dp.range(200).map(_jitter, num_parallel_calls=2, deterministic=det).prefetch(5)
    ),
    "interleave": lambda det: dp.range(20).interleave(
        lambda n: dp.range(10).map(lambda x, n=n: (_jitter(x), int(n) * 100 + int(x))[1]),
        cycle_length=3,
        block_length=2,
        num_parallel_calls=3,
        deterministic=det,
    ),
    "shuffle_after_map": lambda det: (
        dp.range(200)
        .map(_jitter, num_parallel_calls=2, deterministic=det)
        .shuffle(16, seed=3, reshuffle_each_iteration=False)
    ),
}


def _as_ints(xs):
    return [int(x) for x in xs]


@settings(max_examples=20, deadline=None)
@given(name=st.sampled_from(sorted(PIPELINES)), k=st.integers(0, 150))
def test_deterministic_resume_is_exact(name, k):
    ds = PIPELINES[name](True)
    full = _as_ints(ds)
    it = iter(ds)
    head = [int(next(it)) for _ in range(min(k, len(full)))]
    state = it.get_state()
    it.close()
    it2 = iter(ds)
    it2.set_state(state)
    assert head + _as_ints(it2) == full


@settings(max_examples=20, deadline=None)
@given(name=st.sampled_from(sorted(PIPELINES)), k=st.integers(0, 150))
def test_nondeterministic_resume_loses_and_repeats_nothing(name, k):
    ds = PIPELINES[name](False)
    full = sorted(_as_ints(PIPELINES[name](True)))
    it = iter(ds)
    head = [int(next(it)) for _ in range(min(k, len(full)))]
    state = it.get_state()
    tail_original = _as_ints(it)  # continuing after get_state is allowed
    it2 = iter(ds)
    it2.set_state(state)
    tail = _as_ints(it2)
    assert sorted(head + tail) == full
    assert sorted(head + tail_original) == full


def test_state_is_json_like_and_restores_in_a_fresh_iterator():
    ds = dp.range(100).map(_jitter, num_parallel_calls=3).batch(4).prefetch(3)
    it = iter(ds)
    for _ in range(7):
        next(it)
    state = it.get_state()
    text = json.dumps(state, default=lambda a: np.asarray(a).tolist())
    assert "replay" in text
    it2 = iter(ds)
    it2.set_state(state)
    assert [b.tolist() for b in it2][0] == [280, 290, 300, 310]


def test_restore_recomputes_only_unconsumed_elements():
    calls = []

    def f(x):
        calls.append(int(x))
        return int(x)

    ds = dp.range(1000).map(f, num_parallel_calls=2)
    it = iter(ds)
    for _ in range(10):
        next(it)
    state = it.get_state()
    it.close()
    calls.clear()
    it2 = iter(ds)
    it2.set_state(state)
    taken = 10 + len(state["pending"])  # the root is past these elements
    assert [int(next(it2)) for _ in range(30)] == list(range(10, 40))
    it2.close()
    assert calls and min(calls) == taken  # nothing consumed was computed again


def test_error_position_survives_restore():
    def f(x):
        if int(x) == 30:
            raise ValueError("bad")
        return int(x)

    ds = dp.range(60).map(f, num_parallel_calls=3)
    it = iter(ds)
    got = [int(next(it)) for _ in range(20)]
    state = it.get_state()
    it2 = iter(ds)
    it2.set_state(state)
    with pytest.raises(dp.PipelineError, match="map at element 30"):
        for x in it2:
            got.append(int(x))
    assert got == list(range(30))
    assert _as_ints(it2) == list(range(31, 60))
