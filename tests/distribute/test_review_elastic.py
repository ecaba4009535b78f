"""Review of issue 12: elastic resume when one shard point is built more than once in the
resumed pass (``zip(ds, ds.map(f))`` shares its pool) and the chain is built lazily
(under ``concatenate``): every build of that pass must read the resume plan's share."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from _dist_helpers import worker_options

import datapipe as dp

pytestmark = pytest.mark.timeout(120)


def _pairs(x) -> list[tuple]:
    """The (a, b) pairs of an element: one, or a batch's."""
    a, b = (np.asarray(v).reshape(-1).tolist() for v in x)
    return list(zip(a, b))


def _first_run(ds, steps):
    before, states = [], []
    for i, k in enumerate(steps):
        it = iter(ds.with_options(worker_options(len(steps), i, uneven="allow")))
        for _ in range(k):
            before += _pairs(next(it))
        states.append(it.state_dict())
        it.close()
    return before, states


def _resumed(ds, states, m):
    parts = []
    for p in range(m):
        with iter(ds.with_options(worker_options(m, p, uneven="allow"))) as it:
            it.set_state(states)
            parts.append([p for x in it for p in _pairs(x)])
    return parts


def _zip_shared(n, f, tail):
    base = dp.range(n)  # one node in both branches: one shard point, built twice
    return dp.zip(base, base.map(f)).concatenate(tail)


PIPELINES = {
    # concatenate builds its first input lazily, after the restore
    "zip_map": lambda: _zip_shared(9, lambda x: x + 100, dp.zip(dp.range(3), dp.range(3))),
    "zip_map_empty_tail": lambda: _zip_shared(11, lambda x: -x, dp.zip(dp.range(0), dp.range(0))),
    "zip_map_batch": lambda: _zip_shared(
        12, lambda x: x * 2, dp.zip(dp.range(4), dp.range(4))
    ).batch(2),
}


@pytest.mark.parametrize("name", sorted(PIPELINES))
@pytest.mark.parametrize("old, new", [(1, 2), (2, 3), (3, 2), (2, 1)])
def test_a_shard_point_built_twice_in_the_resumed_pass_reads_the_plan(name, old, new):
    ds = PIPELINES[name]()
    universe = Counter(p for x in ds for p in _pairs(x))
    before, states = _first_run(ds, [1 + i % 2 for i in range(old)])
    after = [x for part in _resumed(ds, states, new) for x in part]
    got = Counter(before + after)
    assert got == universe, f"lost {universe - got}, foreign {got - universe}"


def test_the_next_epoch_after_a_resumed_one_reads_the_own_share():
    # Only the resumed pass reads the plan: repeat's next pass is this worker's own share.
    base = dp.range(10)
    ds = dp.zip(base, base.map(lambda x: x * 2)).repeat(2)
    _, states = _first_run(ds, [1, 2])
    it = iter(ds.with_options(worker_options(2, 1, uneven="allow")))
    it.set_state(states)  # the same layout: repeat above the shard point is allowed
    got = [p for x in it for p in _pairs(x)]
    assert got == [(k, 2 * k) for k in (5, 7, 9)] + [(k, 2 * k) for k in (1, 3, 5, 7, 9)]
