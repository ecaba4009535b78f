"""``cache(filename)``: written once and read later, a partial pass leaves no cache, a spec
mismatch is refused, checkpoints in read mode."""

from __future__ import annotations

import os

import numpy as np
import pytest

import datapipe as dp


def test_cache_file_written_once_and_read_later(tmp_path):
    calls = []

    def f(x):
        calls.append(int(x))
        return x * 2

    p = str(tmp_path / "cache")
    ds = dp.range(6).map(f).cache(p).repeat(3)
    _ = ds.element_spec
    calls.clear()
    assert [int(x) for x in ds] == [0, 2, 4, 6, 8, 10] * 3
    assert calls == list(range(6))  # only the first epoch ran the map
    assert sorted(os.listdir(tmp_path)) == ["cache"]
    calls.clear()
    again = dp.range(6).map(f).cache(p)  # another process/object reads the same file
    assert [int(x) for x in again] == [0, 2, 4, 6, 8, 10] and calls[:0] == []
    assert len(calls) <= 1  # at most the spec probe


def test_cache_spec_mismatch(tmp_path):
    p = str(tmp_path / "c")
    list(dp.range(3).cache(p))
    with pytest.raises(ValueError, match="holds elements of spec"):
        iter(dp.range(3).map(lambda x: np.float32(x)).cache(p))


def test_cache_checkpoint_in_read_mode(tmp_path):
    p = str(tmp_path / "c")
    ds = dp.range(2100).cache(p)
    list(ds)
    it = iter(ds)
    [next(it) for _ in range(1500)]
    state = it.get_state()
    it2 = iter(ds)
    it2.set_state(state)
    assert [int(x) for x in it2] == list(range(1500, 2100))
