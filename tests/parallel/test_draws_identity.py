"""Draws keyed by the element's identity, not by its position on this worker (issue 35,
item 1; datapipe/_identity.py): a seeded layer after a ``shuffle`` draws differently on
two ranks, two DataLoader workers and after a resume on another layout, and each rank
draws what the single-process pipeline draws for the same element; where a worker's
elements have no identity a draw refuses, naming ``key=``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import datapipe as dp
import preprocessing as pp
from datapipe import _draws

N = 48
# mid-grey: no shift in [-0.5, 0.5] is clipped, so an image's mean shift is its draw
_IMAGES = np.full((N, 3, 4, 4), 0.5, dtype=np.float32)
_LAYER = pp.RandomBrightness(0.5, value_range=(0.0, 1.0), seed=3)


def _augment(i, x):
    """(source index, the brightness shift the seeded layer drew for this element)."""
    out = _LAYER(torch.from_numpy(x.copy()))
    return int(i), float((out - torch.from_numpy(x.copy())).mean())


def _images() -> dp.Dataset:
    return dp.Dataset.from_tensor_slices((np.arange(N), _IMAGES))


def _opts(count: int, index: int) -> dp.Options:
    return dp.Options(distribute=dp.DistributeOptions(num_workers=count, worker_index=index))


def _single() -> dict[int, float]:
    """What the single-process pipeline draws for each element (by source index)."""
    return dict(_images().shuffle(16, seed=7).map(_augment))


def _check_ranks(ranks: list[list[tuple[int, float]]]) -> None:
    single = _single()
    got = [i for rank in ranks for i, _ in rank]
    assert sorted(got) == list(range(N))  # each element once
    shifts = [v for rank in ranks for _, v in rank]
    assert len(set(shifts)) == N  # no draw repeats across ranks
    # every rank draws what the single process draws for the same element (same code
    # path and arithmetic on one machine: equal within float32 rounding)
    for rank in ranks:
        for i, v in rank:
            assert v == pytest.approx(single[i], abs=1e-6)


EXECUTORS = {
    "sequential": {},
    "2 threads": {"num_parallel_calls": 2},
    "2 processes": {"num_parallel_calls": 2, "executor": "process"},
}


@pytest.mark.parametrize("args", EXECUTORS.values(), ids=EXECUTORS)
def test_shuffle_then_explicit_shard_draws_by_identity(args):
    ranks = [list(_images().shuffle(16, seed=7).shard(2, r).map(_augment, **args))
             for r in range(2)]  # fmt: skip
    assert [len(r) for r in ranks] == [24, 24]
    a, b = ([v for _, v in r] for r in ranks)
    assert sum(x == y for x, y in zip(a, b)) == 0  # main: 24 of 24 positions drew the same
    _check_ranks(ranks)


@pytest.mark.parametrize("args", EXECUTORS.values(), ids=EXECUTORS)
def test_shuffle_then_auto_shard_draws_by_identity(args):
    ds = _images().shuffle(16, seed=7).map(_augment, **args)
    ranks = [list(ds.with_options(_opts(2, r))) for r in range(2)]
    assert [len(r) for r in ranks] == [24, 24]
    a, b = ([v for _, v in r] for r in ranks)
    assert sum(x == y for x, y in zip(a, b)) == 0  # main: 24 of 24 positions drew the same
    _check_ranks(ranks)


def test_a_streaming_source_keys_by_the_global_position():
    """No random access: the identity is the position in the unsharded stream."""

    def gen():
        yield from range(100, 130)

    def src() -> dp.Dataset:
        return dp.Dataset.from_generator(gen, output_signature=dp.TensorSpec((), np.int64))

    def pos(x):
        return int(x), _draws.position()

    single = dict(src().shuffle(8, seed=1).map(pos))
    assert sorted(single) == list(range(100, 130))
    assert all(single[x] == x - 100 for x in single)  # the pre-shuffle position
    for r in range(3):
        got = list(src().shuffle(8, seed=1).shard(3, r).map(pos))
        assert len(got) == 10 and all(single[x] == p for x, p in got)


def test_chained_maps_after_a_shuffle_keep_the_identity():
    def pos(x):
        return _draws.position()

    for r in range(2):
        ds = dp.range(20).shuffle(8, seed=2).shard(2, r)
        want = [int(x) for x in ds]
        assert [int(p) for p in ds.map(lambda x: x).map(pos)] == want
        assert [int(p) for p in ds.map(lambda x: x, num_parallel_calls=2).map(pos)] == want
        got = [int(p) for p in ds.random_map(lambda x, rng: x, seed=1).map(pos)]
        assert got == want


def test_random_map_generators_follow_the_identity():
    def draw(x, rng):
        return int(x), int(rng.integers(1 << 62))

    single = dict(dp.range(30).shuffle(10, seed=4).random_map(draw, seed=9))
    for r in range(3):
        got = list(dp.range(30).shuffle(10, seed=4).shard(3, r).random_map(draw, seed=9))
        assert len(got) == 10 and all(single[x] == v for x, v in got)
    auto = [list(dp.range(30).shuffle(10, seed=4).random_map(draw, seed=9)
                 .with_options(_opts(3, r))) for r in range(3)]  # fmt: skip
    assert sorted(x for rank in auto for x, _ in rank) == list(range(30))
    assert all(single[x] == v for rank in auto for x, v in rank)


def test_a_resume_on_another_layout_keeps_the_draws():
    """A checkpoint of 2 ranks resumed on 3: every element drawn once, as the single
    process draws it."""
    ds = _images().shuffle(16, seed=7).map(_augment)
    got, states = [], []
    for r in range(2):
        it = iter(ds.with_options(_opts(2, r)))
        got += [next(it) for _ in range(5)]
        states.append(it.state_dict())
    for r in range(3):
        it = iter(ds.with_options(_opts(3, r)))
        it.load_state_dict(states)
        got += list(it)
    assert sorted(i for i, _ in got) == list(range(N))
    single = _single()
    assert all(v == pytest.approx(single[i], abs=1e-6) for i, v in got)


def test_no_identity_refuses_and_key_fixes_it():
    """A filter of a rank's share has no identity: a draw refuses (naming key=) instead of
    repeating rank 0's draws; key= gives one."""

    def pos(b):
        return _draws.element_draw(5)

    ds = (dp.range(8).shuffle(8, seed=1, reshuffle_each_iteration=False).shard(2, 1)
          .filter(lambda x: x != 99).batch(2))  # fmt: skip
    with pytest.raises(dp.PipelineError, match=r"no identity on this worker.*Pass key="):
        list(ds.map(pos))
    assert list(ds.map(lambda b: int(b.sum()))) == [int(b.sum()) for b in ds]  # no draw: fine

    def first(b):
        return int(b[0])

    keyed = [int(x) for x in ds.map(lambda b: _draws.position(), key=first)]
    assert keyed == [int(b[0]) for b in ds]
    with pytest.raises(TypeError, match="map: key must be a function of the element, got int"):
        ds.map(pos, key=3)
    with pytest.raises(dp.PipelineError, match="key= must return an int, str or bytes, got float"):
        list(ds.map(pos, key=lambda b: 1.5))


def test_key_accepts_strings_and_is_the_same_on_every_executor():
    names = [f"img_{i}.png" for i in range(12)]
    ds = dp.Dataset.from_tensor_slices(np.array(names)).shuffle(12, seed=3)

    def pos(name):
        return _draws.position()

    want = list(ds.map(pos, key=str))
    assert len(set(want)) == 12 and all(0 <= p < 2**64 for p in want)
    assert list(ds.map(pos, key=str, num_parallel_calls=3)) == want
    assert list(ds.map(pos, key=str, num_parallel_calls=2, executor="process")) == want


def test_dataloader_workers_draw_by_identity():
    """DataLoader(num_workers=2) over as_torch_dataset: 64 images, 64 distinct draws (main:
    32: the two workers repeated each other's)."""
    from torch.utils.data import DataLoader

    n = 64
    images = np.full((n, 3, 4, 4), 0.5, dtype=np.float32)  # a mean shift is the draw
    layer = pp.RandomBrightness(0.5, value_range=(0.0, 1.0), seed=3)

    def augment(i, x):
        t = torch.from_numpy(x.copy())
        return int(i), float((layer(t) - t).mean())

    ds = dp.Dataset.from_tensor_slices((np.arange(n), images)).shuffle(16, seed=2).map(augment)
    single = dict(ds)
    got = list(DataLoader(ds.as_torch_dataset(), batch_size=None, num_workers=2))
    assert sorted(int(i) for i, _ in got) == list(range(n))
    assert len({float(v) for _, v in got}) == n
    assert all(float(v) == pytest.approx(single[int(i)], abs=1e-6) for i, v in got)


def test_random_map_refuses_where_no_identity():
    """random_map's generator over a filter of a share would repeat the other rank's."""
    ds = (dp.range(8).shuffle(8, seed=1, reshuffle_each_iteration=False).shard(2, 0)
          .filter(lambda x: x != 99).batch(2))  # fmt: skip
    with pytest.raises(dp.PipelineError, match=r"random_map: a random layer drew"):
        list(ds.random_map(lambda b, rng: rng.integers(9), seed=1))
    got = list(ds.random_map(lambda b, rng: int(b[0]), seed=1, key=lambda b: int(b[0])))
    assert got == [int(b[0]) for b in ds]


def _pos(x):
    return int(x), _draws.position()


@pytest.mark.parametrize(
    "build",
    [
        # auto-sharding's index shard point below map -> cache -> shuffle
        lambda: dp.range(12).map(lambda x: x).cache().shuffle(6, seed=1),
        # a stream shard point above take / unbatch: positions in the unsharded stream
        lambda: dp.range(12).shuffle(6, seed=1).take(10),
        lambda: dp.range(12).batch(3).unbatch().shuffle(6, seed=1),
    ],
    ids=["cache", "take", "unbatch"],
)
def test_identities_through_cache_and_stream_shard_points(build):
    """Every rank's identities are the single process's for the same element, on the
    first pass and on a second one (the cache's recorded pass)."""
    ds = build().map(_pos)
    single = [dict(ds) for _ in range(2)]  # epochs 0 and 1
    seen: list = [[], []]
    for r in range(2):
        worker = ds.with_options(_opts(2, r))
        for epoch in range(2):  # the second iter() reads the cache
            got = list(worker)
            assert all(single[epoch][x] == p for x, p in got)
            seen[epoch] += [x for x, _ in got]
    assert [sorted(s) for s in seen] == [sorted(s) for s in single]


@pytest.mark.parametrize("parallel", [None, 2], ids=["sequential", "parallel"])
def test_a_batch_takes_its_first_elements_identity_through_prefetch(parallel):
    """The walkthrough's shape: (shuffled) elements -> map -> batch -> prefetch -> map of
    random layers over batches, on 2 ranks: each batch draws by its first element's
    identity, so the ranks' batches never share a draw."""

    def pos(b):
        return b, _draws.position()

    def build():
        return (dp.range(24).shuffle(24, seed=1).map(lambda x: x, num_parallel_calls=parallel)
                .batch(4, num_parallel_calls=parallel).prefetch(2).map(pos))  # fmt: skip

    seen = []
    for r in range(2):
        got = [(b.tolist(), p) for b, p in build().with_options(_opts(2, r))]
        assert len(got) == 3 and all(p == b[0] for b, p in got)
        seen += [p for _, p in got]
    assert len(set(seen)) == 6


def _without_ids(state):
    """``state`` as an earlier version saved it: shuffle buffers without identities."""
    if isinstance(state, dict):
        drop = "buffer" in state and "ids" in state
        return {
            k: _without_ids(v) for k, v in state.items() if not (drop and k in ("ids", "taken"))
        }
    if isinstance(state, list):
        return [_without_ids(v) for v in state]
    return state


def test_a_checkpoint_without_identities_resumes_and_refuses_only_a_draw():
    src = dp.range(40).shuffle(10, seed=3, reshuffle_each_iteration=False)
    plain = src.map(lambda x: x * 2)
    it = iter(plain)
    head = [int(next(it)) for _ in range(7)]
    rest = [int(x) for x in it]
    it = iter(plain)
    assert [int(next(it)) for _ in range(7)] == head
    old = _without_ids(it.state_dict())
    again = iter(plain)
    again.load_state_dict(old)
    assert [int(x) for x in again] == rest  # a map that draws nothing resumes exactly
    drawing = src.map(lambda x: _draws.element_draw(1))
    it = iter(drawing)
    [next(it) for _ in range(7)]
    again = iter(drawing)
    again.load_state_dict(_without_ids(it.state_dict()))
    with pytest.raises(dp.PipelineError, match="not in the checkpoint it resumed from"):
        list(again)
