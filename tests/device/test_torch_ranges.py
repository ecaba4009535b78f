"""Pipeline stages on ``torch.profiler``'s timeline (``datapipe.stats.torch_ranges``)."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
import torch
from torch.profiler import _ExperimentalConfig, profile

import datapipe as dp
from datapipe.stats import torch_ranges


def ranges(prof) -> Counter:
    return Counter(e.name for e in prof.events() if e.name.startswith("datapipe::"))


def test_consumer_thread_ranges_nest_next_to_the_model_ops():
    ds = dp.range(120).map(lambda x: x * 2).batch(10).map(lambda b: b + 1)
    w = torch.ones(10, 10)
    with profile() as prof:
        total = 0
        for b in ds:
            total += int(torch.as_tensor(b, dtype=torch.float32) @ w @ w.T @ torch.ones(10) > 0)
    assert total == 12
    names = ranges(prof)
    # one label per stage, as Dataset.profile() labels them (two maps: map[0], map[1])
    assert set(names) == {
        "datapipe::range", "datapipe::map[0]", "datapipe::batch", "datapipe::map[1]",
    }  # fmt: skip
    evs = [e for e in prof.events() if e.name.startswith("datapipe::")]
    assert len({e.thread for e in evs}) == 1  # all on the loop's thread
    outer = [e for e in evs if e.name == "datapipe::map[1]"]
    inner = [e for e in evs if e.name == "datapipe::batch"]

    def inside(a, b) -> bool:
        return b.time_range.start <= a.time_range.start and a.time_range.end <= b.time_range.end

    assert all(any(inside(i, o) for o in outer) for i in inner)  # batch runs inside map[1]
    assert any(e.name == "aten::mm" for e in prof.events())  # the model's ops, same trace


def test_worker_ranges_with_all_threads_profiled(threads):
    ds = dp.range(400).map(lambda x: x * 2, num_parallel_calls=2).batch(20).prefetch(2)
    with profile(experimental_config=_ExperimentalConfig(profile_all_threads=True)) as prof:
        got = [int(b.sum()) for b in ds]
    assert sum(got) == sum(2 * x for x in range(400))
    names = ranges(prof)
    assert names["datapipe::prefetch"] >= 1  # the loop's wait for input
    workers = {n for n in names if n.startswith("datapipe::map [datapipe-map-")}
    assert workers  # chunks computed by the map's workers, named by stage and thread
    assert "datapipe::batch [datapipe-prefetch-0]" in names  # read by prefetch's thread
    assert threads.settle() == []


def test_default_profile_records_the_loop_s_thread_only():
    ds = dp.range(200).map(lambda x: x + 1, num_parallel_calls=2).batch(10)
    with profile() as prof:
        assert sum(int(b.sum()) for b in ds) == sum(range(1, 201))
    names = ranges(prof)
    assert "datapipe::batch" in names
    assert not [n for n in names if "[datapipe-" in n]


def test_chrome_trace_holds_the_ranges(tmp_path):
    ds = dp.from_tensor_slices(np.arange(50, dtype=np.float32)).batch(5)
    with profile() as prof:
        assert len(list(ds)) == 10
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    names = {e.get("name") for e in json.loads(path.read_text())["traceEvents"]}
    assert {"datapipe::batch", "datapipe::from_tensor_slices"} <= names


def test_nothing_installed_without_a_profiler_and_removed_after_one():
    ds = dp.range(300).map(lambda x: x).batch(3)
    it = iter(ds)
    next(it)
    chain = torch_ranges._chain(it.root)
    assert len(chain) == 3 and not any("next_chunk" in c.__dict__ for c in chain)
    assert not torch_ranges.active() and it._ranged is False
    with profile():
        assert torch_ranges.active()
        while it._pos < len(it._buf):  # elements already computed: no call into the chain
            next(it)
        next(it)  # a call into the chain: ranges installed
        assert it._ranged and all("next_chunk" in c.__dict__ for c in chain)
    assert not torch_ranges.active()
    rest = [b.tolist() for b in it]  # the first call after the profiler stopped removes them
    assert rest and not any("next_chunk" in c.__dict__ for c in chain) and not it._ranged


@pytest.mark.parametrize("stats", [False, True])
def test_ranges_with_statistics_on_and_device_prefetch(stats):
    opts = dp.Options(stats=dp.StatsOptions(enabled=stats))
    ds = dp.range(40).batch(4).prefetch_to_device("cpu", buffer_size=2).with_options(opts)
    with profile() as prof:
        assert [b.tolist()[0] for b in ds] == list(range(0, 40, 4))
    assert "datapipe::prefetch_to_device" in ranges(prof)
