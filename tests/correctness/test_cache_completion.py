"""Issue 11: ``cache()`` completes whenever its input is read to the end, also when the
consumer stops at the last element without asking for the end (zip's other inputs,
choose_from_datasets, take of the whole input)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import datapipe as dp


def _counted(n, calls, known_size):
    ds = dp.range(n)
    if not known_size:  # an unknown cardinality: only the end itself tells
        ds = ds.filter(lambda x: True)
    return ds.map(lambda x: calls.append(int(x)) or x)


def _cache(ds, kind, tmp_path, calls):
    out = ds.cache(os.path.join(tmp_path, "c")) if kind == "file" else ds.cache()
    _ = out.element_spec  # map infers its spec from one element, once: not counted
    calls.clear()
    return out


@pytest.mark.parametrize("known_size", [True, False], ids=["known", "unknown"])
@pytest.mark.parametrize("kind", ["memory", "file"])
@pytest.mark.parametrize("where", [1, 2])
def test_cache_on_any_zip_input_completes(where, kind, known_size, tmp_path):
    calls: list = []
    inputs = [dp.range(5), dp.range(10, 15), dp.range(20, 25)]
    inputs[where] = _cache(_counted(5, calls, known_size), kind, tmp_path, calls)
    ds = dp.zip(tuple(inputs))
    first = [tuple(int(v) for v in x) for x in ds]
    second = [tuple(int(v) for v in x) for x in ds]
    assert first == second
    assert [row[where] for row in first] == [0, 1, 2, 3, 4]
    assert calls == [0, 1, 2, 3, 4]  # the second epoch read the cache
    if kind == "file":
        assert os.path.isfile(os.path.join(tmp_path, "c", "_COMPLETE"))


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_cache_read_by_take_of_its_whole_length_completes(kind, tmp_path):
    calls: list = []
    ds = _cache(_counted(4, calls, True), kind, tmp_path, calls).take(4)
    assert [int(x) for x in ds] == [0, 1, 2, 3]
    assert [int(x) for x in ds] == [0, 1, 2, 3]
    assert calls == [0, 1, 2, 3]


def test_cache_read_by_take_of_part_of_it_is_not_cached():
    calls: list = []
    ds = _counted(4, calls, True).cache().take(2)
    assert [int(x) for x in ds] == [0, 1]
    assert [int(x) for x in ds] == [0, 1]
    assert calls == [0, 1, 0, 1]  # a partial pass is not cached (tf.data)


def test_cache_on_a_longer_zip_input_is_a_partial_pass():
    calls: list = []
    ds = dp.zip(dp.range(3), _counted(5, calls, False).cache())
    assert len(list(ds)) == 3
    assert len(list(ds)) == 3
    assert calls[:3] == [0, 1, 2] and len(calls) > 5  # recomputed: not every element was read


@pytest.mark.parametrize("known_size", [True, False], ids=["known", "unknown"])
def test_cache_under_choose_from_datasets_completes(known_size):
    calls: list = []
    cached = _cache(_counted(3, calls, known_size), "memory", None, calls)
    choices = dp.from_tensor_slices(np.array([0, 1, 0, 1, 1, 0], dtype=np.int64))
    ds = dp.choose_from_datasets([dp.range(100, 103), cached], choices)
    assert [int(x) for x in ds] == [100, 0, 101, 1, 2, 102]
    assert [int(x) for x in ds] == [100, 0, 101, 1, 2, 102]
    assert calls == [0, 1, 2]
