"""The statistics hook: untouched iterators when off, exact pass-through when on."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import datapipe as dp
from datapipe._context import ITERATOR_HOOKS
from datapipe.ops.batch import BatchIterator
from datapipe.ops.map import MapIterator
from datapipe.stats import StatsIterator, stats_hook
from datapipe.stats.recorder import recorder_from

ON = dp.Options(stats=dp.StatsOptions(enabled=True))


def test_hook_is_installed_once_and_leaves_iterators_untouched_when_off():
    assert ITERATOR_HOOKS.count(stats_hook) == 1
    ds = dp.range(10).map(lambda x: x + 1).batch(3)
    it = iter(ds)
    assert type(it.root) is BatchIterator
    assert type(it.root.inner) is MapIterator
    off = iter(ds.with_options(dp.Options(stats=dp.StatsOptions(enabled=False))))
    assert type(off.root) is BatchIterator


def test_hook_wraps_every_stage_when_on():
    it = iter(dp.range(10).map(lambda x: x + 1).batch(3).with_options(ON))
    root = it.root
    assert isinstance(root, StatsIterator) and type(root.wrapped) is BatchIterator
    assert root.op_name == "batch" and root.inputs == [root.wrapped]
    assert isinstance(root.wrapped.inner, StatsIterator)
    assert type(root.wrapped.inner.wrapped) is MapIterator
    assert root.b == 3  # other attributes are the wrapped iterator's
    assert type(root.inner) is StatsIterator  # as if unwrapped: the batch's input
    assert [b.tolist() for b in it] == [[1, 2, 3], [4, 5, 6], [7, 8, 9], [10]]
    rec = recorder_from(it)
    assert [s.label for s in rec.stages.values()] == ["range", "map", "batch"]
    assert rec.root is root.stats_stage
    assert [(s.elements, s.calls > 0) for s in rec.stages.values()] == [
        (10, True),
        (10, True),
        (4, True),
    ]


def test_own_time_excludes_inputs(stats_clock):
    def slow(x):  # 2 ms of work on the fake clock (exact times whatever the load)
        stats_clock.sleep(0.002)
        return x

    it = iter(dp.range(20).map(slow).batch(5).with_options(ON))
    list(it)
    rec = recorder_from(it)
    batch, mp = rec.root, rec.stages[next(k for k, s in rec.stages.items() if s.label == "map")]
    assert batch.wait == pytest.approx(mp.wait) == pytest.approx(20 * 0.002)
    assert batch.own == pytest.approx(0.0)  # the work was the map's, not the batch's
    assert mp.own == pytest.approx(20 * 0.002)


def test_repeated_op_names_get_indexed_labels():
    ds = dp.range(4).map(lambda x: x + 1).map(lambda x: x * 2).with_options(ON)
    it = iter(ds)
    assert [int(x) for x in it] == [2, 4, 6, 8]
    assert [s.label for s in recorder_from(it).stages.values()] == ["range", "map[0]", "map[1]"]


def test_repeat_rebuilds_share_one_stage():
    it = iter(dp.range(3).map(lambda x: x + 1).repeat(4).with_options(ON))
    assert len(list(it)) == 12
    stages = recorder_from(it).stages
    assert [s.label for s in stages.values()] == ["repeat", "range", "map"]
    assert [s.elements for s in stages.values()] == [12, 12, 12]
    assert all(not s.live for s in stages.values() if s.label != "repeat")


def test_errors_pass_through_with_their_location():
    def bad(x):
        if x == 3:
            raise ValueError("boom")
        return x

    it = iter(dp.range(6).map(bad).with_options(ON))
    got = []
    with pytest.raises(dp.PipelineError, match="boom") as info:
        for x in it:
            got.append(int(x))
    assert got == [0, 1, 2]
    assert "map" in str(info.value)


def _pipeline(seed: int) -> dp.Dataset:
    return (
        dp.range(50).shuffle(10, seed=seed).map(lambda x: x * 3).batch(4).repeat(2).with_options(ON)
    )


@settings(max_examples=30, deadline=None)
@given(stop=st.integers(0, 26), seed=st.integers(0, 2**16))
def test_get_state_set_state_resume_exactly_with_stats(stop, seed):
    ds = _pipeline(seed)
    it = iter(ds)
    for _ in range(stop):
        next(it)
    state = it.get_state()
    rest = [b.tolist() for b in it]
    fresh = iter(ds)
    fresh.set_state(state)
    assert isinstance(fresh.root, StatsIterator)
    assert [b.tolist() for b in fresh] == rest
