"""Review of the statistics layer: defects found by using it as a user would."""

from __future__ import annotations

import dataclasses
import json
import sys

import numpy as np
import pytest

import datapipe as dp
from datapipe.stats import InputBoundTimer, StageReport, merge_reports
from datapipe.stats.verdict import diagnose


def stage(label: str, op: str, kind: str, inputs: list[str], **kw) -> StageReport:
    """A StageReport with neutral defaults, for deterministic verdict tests."""
    base = dict(
        label=label, op=op, kind=kind, inputs=inputs, elements=1000, bytes=8000, calls=10,
        wait_s=0.01, own_s=0.01, busy_s=0.01, cpu_s=None, parallelism=1,
        num_parallel_calls=None, buffered=False, buffer_size=None, buffer_fill_mean=None,
        buffer_empty_fraction=None, threads=["MainThread"], autotune_events=[],
        buffer_series=[], rate=1000.0, busy_share=0.01, capacity=1e5,
    )  # fmt: skip
    base.update(kw)
    return StageReport(**base)


def test_parallel_interleave_is_not_told_to_set_num_parallel_calls():
    # A parallel interleave without the gauge protocol reads parallelism 1; the verdict
    # must not ask for the num_parallel_calls the user already set.
    src = stage("range", "range", "RangeDataset", [])
    par = stage("interleave", "interleave", "InterleaveDataset", ["range"], busy_share=0.9)
    par.num_parallel_calls = -1
    v = diagnose([src, par], 1.0, 0.95, 0.0, "interleave")
    assert v.stage == "interleave"
    assert "set num_parallel_calls" not in v.fix
    assert "already runs in parallel (num_parallel_calls=AUTOTUNE)" in v.fix
    seq = dataclasses.replace(par, num_parallel_calls=None)
    v = diagnose([src, seq], 1.0, 0.95, 0.0, "interleave")
    assert (v.kind, v.fix) == ("parallelize", "set num_parallel_calls=AUTOTUNE on 'interleave'")


def test_cache_bottleneck_is_not_told_to_add_a_cache():
    # Second run over a file cache: its input stages do not run, so 'cache' has no inputs.
    stages = [
        stage("repeat", "repeat", "RepeatDataset", ["cache"], busy_share=0.05),
        stage("cache", "cache", "FileCacheDataset", [], busy_s=0.8, busy_share=0.8),
    ]
    v = diagnose(stages, 1.0, 0.95, 0.0, "repeat")
    assert v.stage == "cache"
    assert ".cache() right after" not in v.fix
    assert v.kind == "prefetch"
    assert "reads its cache" in v.fix
    # The pass that writes the cache.
    stages[1] = stage("cache", "cache", "FileCacheDataset", ["map"], busy_share=0.8)
    v = diagnose([stage("map", "map", "MapDataset", []), *stages], 1.0, 0.95, 0.0, "repeat")
    assert v.stage == "cache" and v.kind == "reduce_work"
    assert "filling its cache" in v.fix


def test_source_already_cached_downstream_is_not_told_to_cache():
    stages = [
        stage("slow", "from_generator", "GeneratorDataset", [], busy_share=0.9),
        stage("cache", "cache", "CacheDataset", ["slow"]),
        stage("repeat", "repeat", "RepeatDataset", ["cache"]),
    ]
    v = diagnose(stages, 1.0, 0.95, 0.0, "repeat")
    assert v.stage == "slow"
    assert ".cache() right after" not in v.fix
    assert "'cache' already keeps its output" in v.fix


def test_real_file_cache_second_pass_verdict(tmp_path):
    ds = dp.range(300).map(lambda x: x + 1).cache(str(tmp_path / "c")).repeat(2).batch(10)
    ds.profile()  # writes the cache
    report = ds.profile()
    assert [s.label for s in report.stages] == ["cache", "repeat", "batch"]
    assert [s.elements for s in report.stages] == [600, 600, 60]
    assert "right after 'cache'" not in report.verdict.fix


def test_stages_are_listed_sources_first_in_graph_order():
    # repeat builds its input lazily, so its iterator registers before range's.
    report = dp.range(100).map(lambda x: x + 1).repeat(2).batch(10).profile()
    assert [s.label for s in report.stages] == ["range", "map", "repeat", "batch"]
    assert [s.elements for s in report.stages] == [200, 200, 200, 20]
    assert [s.inputs for s in report.stages] == [[], ["range"], ["map"], ["repeat"]]


def test_empty_dataset_verdict_says_so():
    report = dp.range(0).map(lambda x: x).profile()
    assert report.elements == 0
    assert [s.elements for s in report.stages] == [0, 0]
    assert report.verdict.kind == "balanced"
    assert "ended before its first element" in report.verdict.reason
    assert "run the profile for longer" not in report.verdict.fix
    json.dumps(report.to_dict())


def test_merge_keeps_pipeline_order_when_a_rank_has_an_extra_stage():
    a = dp.range(100).map(lambda x: x).batch(10).profile(rank=0)
    b = dp.range(100).map(lambda x: x).filter(lambda x: True).batch(10).profile(rank=1)
    m = merge_reports([a, b])
    assert [s.label for s in m.stages] == ["range", "map", "filter", "batch"]
    f = m.stages[2]
    assert sorted(f.per_rank) == [1] and f.slowest_rank == 1
    text = str(m)
    assert "stages not on every rank: filter (only ranks [1])" in text
    assert m.to_dict()["stages"][2]["label"] == "filter"


def test_input_bound_timer_with_no_steps_gives_no_verdict():
    timer = InputBoundTimer()
    for _ in timer.epoch([]):
        pass
    assert [(e.epoch, e.steps) for e in timer.epochs] == [(0, 0)]
    assert timer.epochs[0].step_s == 0.0
    assert timer.summary().splitlines()[-1] == "overall: no steps were timed"


def test_input_bound_timer_records_an_epoch_left_by_an_exception():
    timer = InputBoundTimer()
    ds = dp.range(10)
    with pytest.raises(RuntimeError, match="step failed"):
        for x in timer.epoch(ds):
            if int(x) == 3:
                raise RuntimeError("step failed")
    assert [(e.epoch, e.steps) for e in timer.epochs] == [(0, 4)]
    assert timer.epochs[0].wait_s > 0


class _Tty:
    def __init__(self, stream):
        self.stream = stream

    def isatty(self) -> bool:
        return True

    def write(self, s: str) -> int:
        return self.stream.write(s)

    def flush(self) -> None:
        self.stream.flush()


def _count_bars(monkeypatch, env: str | None, run) -> list[str]:
    """Descriptions of the tqdm bars ``run()`` opens (stderr a terminal unless env says)."""
    import tqdm

    opened: list[str] = []
    real = tqdm.tqdm.__init__

    def spy(self, *a, **kw):
        opened.append(kw.get("desc"))
        kw["file"] = _Tty(sys.stdout)
        real(self, *a, **kw)

    monkeypatch.setattr(tqdm.tqdm, "__init__", spy)
    monkeypatch.setattr(sys, "stderr", _Tty(sys.__stderr__))
    if env is None:
        monkeypatch.delenv("DATAPIPE_PROGRESS", raising=False)
    else:
        monkeypatch.setenv("DATAPIPE_PROGRESS", env)
    run()
    return opened


def test_adapt_progress_follows_the_progress_switches(monkeypatch):
    from preprocessing import Normalization

    data = np.arange(2 * 4 * 4 * 3, dtype=np.float32).reshape(2, 3, 4, 4)

    def adapt(**kw):
        return lambda: Normalization().adapt(data, batch_size=1, **kw)

    assert _count_bars(monkeypatch, None, adapt()) == ["Normalization.adapt"]
    assert _count_bars(monkeypatch, None, adapt(progress=False)) == []
    assert _count_bars(monkeypatch, "0", adapt()) == []


def test_save_and_file_cache_show_progress_unless_asked_not_to(monkeypatch, tmp_path):
    ds = dp.range(20)
    assert _count_bars(monkeypatch, None, lambda: ds.save(str(tmp_path / "a"))) == ["save"]
    off = _count_bars(monkeypatch, None, lambda: ds.save(str(tmp_path / "b"), progress=False))
    assert off == []
    cached = ds.cache(str(tmp_path / "c"))
    assert _count_bars(monkeypatch, None, lambda: list(cached)) == ["cache c"]
    assert _count_bars(monkeypatch, None, lambda: list(cached)) == []  # read, not written
    cached2 = ds.cache(str(tmp_path / "d"))
    assert _count_bars(monkeypatch, "0", lambda: list(cached2)) == []
    assert [int(x) for x in cached2] == list(range(20))


def test_prefetch_reports_its_buffer():
    report = dp.range(2000).map(lambda x: x + 1).prefetch(8).profile()
    p = report.stage("prefetch")
    assert p.buffered and p.buffer_size == 8.0
    assert 0.0 <= p.buffer_fill_mean <= 8.0
