"""Order and completeness of parallel map / batch / prefetch (tf.data semantics); the
interleave order is in ``tests/ops/test_interleave.py``."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import datapipe as dp

pytestmark = pytest.mark.timeout(60)


def _sleepy(seed: int, scale: float = 0.0005):
    rng = random.Random(seed)
    delays = [rng.random() * scale for _ in range(4096)]

    def f(x):
        time.sleep(delays[int(x) % len(delays)])
        return int(x) * 3 + 1

    return f


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(0, 300),
    calls=st.sampled_from([2, 3, 8, dp.AUTOTUNE]),
    seed=st.integers(0, 2**16),
)
def test_deterministic_map_equals_sequential(n, calls, seed):
    f = _sleepy(seed)
    got = [int(x) for x in dp.range(n).map(f, num_parallel_calls=calls)]
    assert got == [3 * i + 1 for i in range(n)]


@settings(max_examples=30, deadline=None)
@given(n=st.integers(0, 300), calls=st.sampled_from([2, 4, 8]), seed=st.integers(0, 2**16))
def test_nondeterministic_map_same_multiset(n, calls, seed):
    ds = dp.range(n).map(_sleepy(seed), num_parallel_calls=calls, deterministic=False)
    got = [int(x) for x in ds]
    assert sorted(got) == [3 * i + 1 for i in range(n)]
    assert len(got) == n


def test_options_deterministic_false_applies_and_argument_wins():
    opts = dp.Options(deterministic=False)
    ds = dp.range(50).map(lambda x: x, num_parallel_calls=4).with_options(opts)
    it = iter(ds)
    assert it.root.deterministic is False
    it.close()
    ds2 = dp.range(50).map(lambda x: x, num_parallel_calls=4, deterministic=True)
    it2 = iter(ds2.with_options(opts))
    assert it2.root.deterministic is True
    assert [int(x) for x in it2] == list(range(50))


def test_nondeterministic_lets_fast_elements_overtake():
    # Element 0 sleeps long; with deterministic=False others come out before it.
    def f(x):
        if int(x) == 0:
            time.sleep(0.3)
        return int(x)

    ds = dp.range(64).map(f, num_parallel_calls=4, deterministic=False)
    got = [int(x) for x in ds]
    assert sorted(got) == list(range(64))
    assert got[0] != 0


def test_map_keeps_structure_and_tuple_unpacking():
    ds = dp.from_tensor_slices((np.arange(10), np.arange(10) * 2.0))
    out = list(ds.map(lambda a, b: {"s": a + b}, num_parallel_calls=3))
    assert [float(e["s"]) for e in out] == [3.0 * i for i in range(10)]
    assert out[0]["s"].dtype == np.float64


def test_indexed_mode_passes_input_index():
    from datapipe._context import IterContext
    from datapipe.parallel import policies
    from datapipe.parallel.plan import plan_stage
    from datapipe.parallel.request import StageRequest
    from datapipe.parallel.stage import StageIterator

    ds = dp.range(100, 120)
    ctx = IterContext.for_graph(ds)
    plan = plan_stage(StageRequest(policies.MAP, parallelism=3), ctx)
    it = StageIterator(ctx.make(ds, (0,)), plan, ctx, "random_map", lambda i, x: (i, int(x)),
                       indexed=True)  # fmt: skip
    try:
        from datapipe._iterator import pull_exactly

        got = pull_exactly(it, 100)
    finally:
        it.close()
    assert got == [(i, 100 + i) for i in range(20)]


@settings(max_examples=20, deadline=None)
@given(
    n=st.integers(0, 100), b=st.integers(1, 9), drop=st.booleans(), calls=st.sampled_from([2, 4])
)
def test_parallel_batch_equals_sequential(n, b, drop, calls):
    seq = [x.tolist() for x in dp.range(n).batch(b, drop_remainder=drop)]
    par = [x.tolist() for x in dp.range(n).batch(b, drop_remainder=drop, num_parallel_calls=calls)]
    assert par == seq


def test_parallel_batch_nondeterministic_same_batches():
    ds = dp.range(100).map(_sleepy(1)).batch(7, num_parallel_calls=4, deterministic=False)
    got = sorted(tuple(x.tolist()) for x in ds)
    want = sorted(tuple(x.tolist()) for x in dp.range(100).map(_sleepy(1)).batch(7))
    assert got == want


def test_prefetch_keeps_order_and_elements():
    for size in (0, 1, 7, dp.AUTOTUNE):
        ds = dp.range(500).map(lambda x: x * 2, num_parallel_calls=2).prefetch(size)
        assert [int(x) for x in ds] == [2 * i for i in range(500)]
