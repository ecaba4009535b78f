"""``cache()`` in memory: records the first complete pass (also when the consumer stops at
the last element without asking for the end), freezes randomness, is shared between
iterators, resumes while filling and reading, fills by index under random access.

``cache(filename)`` is tested in ``tests/io/test_file_cache.py``."""

from __future__ import annotations

import os
import pickle
import threading

import numpy as np
import pytest
import torch
from harness import assert_resumes, py, values

import datapipe as dp
from datapipe import TensorSpec


def counting(n: int, calls: list):
    return dp.range(n).map(lambda x: calls.append(int(x)) or x)


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


def test_cache_records_first_complete_pass() -> None:
    calls: list[int] = []
    ds = counting(4, calls).cache()
    assert ds.cardinality() == 4 and ds.element_spec == TensorSpec((), np.int64)
    calls.clear()  # map learnt its spec from element 0
    assert values(ds.repeat(3)) == [0, 1, 2, 3] * 3
    assert calls == [0, 1, 2, 3]
    assert values(ds) == [0, 1, 2, 3] and calls == [0, 1, 2, 3]  # a later iter(): memory


def test_cache_partial_pass_is_not_cached() -> None:
    calls: list[int] = []
    ds = counting(4, calls).cache()
    assert values(ds.take(2)) == [0, 1]
    it = iter(ds)
    assert int(next(it)) == 0
    it.close()
    calls.clear()
    assert values(ds.take(3)) == [0, 1, 2]
    assert calls == [0, 1, 2]
    assert values(ds) == [0, 1, 2, 3]
    assert values(ds) == [0, 1, 2, 3]
    assert calls == [0, 1, 2, 0, 1, 2, 3]


def test_cache_freezes_randomness_of_first_pass() -> None:
    ds = dp.range(10).shuffle(10).cache().repeat(3).with_options(dp.Options(seed=5))
    out = values(ds)
    assert out[:10] == out[10:20] == out[20:] and sorted(out[:10]) == list(range(10))


def test_cache_is_thread_safe_and_shared() -> None:
    calls: list[int] = []
    ds = counting(2000, calls).cache()
    results: list = [None] * 4

    def run(k: int) -> None:
        results[k] = values(ds)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == list(range(2000)) for r in results)
    n = len(calls)
    assert values(ds) == list(range(2000)) and len(calls) == n  # published once, then read


def test_cache_resume_while_filling_and_reading() -> None:
    calls: list[int] = []
    ds = counting(6, calls).cache().repeat(2)
    assert_resumes(ds)


def test_cache_resume_in_a_fresh_pipeline_re_runs_the_recording_pass() -> None:
    def build():
        return dp.range(8).shuffle(8).cache().repeat(2).with_options(dp.Options(seed=11))

    first = build()
    full = values(first)
    it = iter(first)
    head = [py(next(it)) for _ in range(11)]  # inside the second pass: reading the cache
    state = pickle.loads(pickle.dumps(it.get_state()))
    fresh = iter(build())  # another object: its cache is empty
    fresh.set_state(state)
    assert head + [py(x) for x in fresh] == full


def test_cache_random_access_fills_by_index() -> None:
    calls: list[int] = []
    ds = counting(6, calls).cache()
    calls.clear()
    assert ds._random_access_breaker() is None
    assert values(ds.shard(2, 0)) == [0, 2, 4]
    assert calls == [0, 2, 4]
    assert values(ds.shard(2, 0)) == [0, 2, 4] and calls == [0, 2, 4]
    assert values(ds.shard(2, 1)) == [1, 3, 5] and calls == [0, 2, 4, 1, 3, 5]
    assert values(ds) == list(range(6)) and len(calls) == 6  # complete: read from memory


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


def _add_one_in_place(x):
    x += 1  # what `x /= 255` on a float image does
    return x


@pytest.mark.parametrize(
    "map_kwargs",
    [
        {},
        {"num_parallel_calls": 2, "executor": "thread"},
        {"num_parallel_calls": 2, "executor": "process"},
    ],
    ids=["sequential", "thread", "process"],
)
def test_an_in_place_map_after_cache_works_on_a_copy_and_leaves_the_cache_alone(map_kwargs):
    # The cache handed out its recorded arrays writable: a sequential or thread map that
    # wrote into them changed every later pass (1, then 2, 3, ...), a process map did not.
    # Its arrays are read-only now, and a map's function gets writable copies (issue 35
    # item 6): every pass, recording or not, gives the same results.
    cached = dp.range(6).map(lambda i: {"image": np.zeros(3, np.float32), "id": i}).cache()
    bad = cached.map(lambda d: (_add_one_in_place(d["image"]), d["id"]), **map_kwargs)
    for _ in range(3):  # the recording pass, then the cache's
        assert [(x.tolist(), int(i)) for x, i in bad] == [([1.0] * 3, i) for i in range(6)]
    image = cached[2]["image"]
    assert image.tolist() == [0.0, 0.0, 0.0] and not image.flags.writeable


def test_torch_leaves_of_a_cache_are_handed_out_as_recorded():
    # D-TF-28: torch has no read-only tensors, and a clone per read costs (10 ms for a
    # 38 MB batch): the recorded tensor itself, every pass
    cached = dp.range(3).map(lambda i: torch.zeros(2)).cache()
    first = [x.data_ptr() for x in cached]
    assert [x.data_ptr() for x in cached] == first and len(set(first)) == 3
