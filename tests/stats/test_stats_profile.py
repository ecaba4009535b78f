"""Dataset.profile: per-stage table (sources first, in graph order), verdicts (and the advice
they must not give: a cache already there, num_parallel_calls already set), JSON round trip.

The verdicts of sequential pipelines are checked on a fake clock (``stats_clock``: the
functions "work" by moving it), so the times, shares and verdicts are exact whatever the
machine's load; a parallel stage's workers time themselves on real clocks, and their tests
assert only what real sleeps guarantee (lower bounds, CPU time far below sleeping time)."""

from __future__ import annotations

import dataclasses
import json
import time

import numpy as np
import pytest
from _stats_ops import Gauged, SlowSource

import datapipe as dp
from datapipe.stats import ProfileReport, StageReport
from datapipe.stats.verdict import diagnose


def slow(x):
    time.sleep(0.002)
    return x


def working(clock, seconds):
    """A map function that takes ``seconds`` of (fake) time per element."""

    def f(x):
        clock.sleep(seconds)
        return x

    return f


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


def test_slow_map_is_named_and_parallelism_suggested(stats_clock):
    report = dp.range(40).map(working(stats_clock, 0.002)).batch(4).profile()
    assert [s.label for s in report.stages] == ["range", "map", "batch"]
    assert [s.elements for s in report.stages] == [40, 40, 10]
    assert report.elements == 10
    assert report.verdict.kind == "parallelize"
    assert report.verdict.stage == "map"
    assert "num_parallel_calls=AUTOTUNE on 'map'" in report.verdict.fix
    m = report.stage("map")
    assert m.busy_s == pytest.approx(40 * 0.002) and m.wait_s == pytest.approx(40 * 0.002)
    assert report.wall_s == pytest.approx(40 * 0.002)
    assert m.busy_share == pytest.approx(1.0)  # the map's own time is the whole run
    assert report.stage("batch").own_s == pytest.approx(0.0)
    assert m.parallelism == 1
    assert report.input_bound_fraction == pytest.approx(1.0)
    text = str(report)
    assert text.startswith("datapipe profile: 10 elements in ")
    lines = text.splitlines()
    words = "stage elements rate/s busy % max rate/s wait ms buffer fill par".split()
    assert lines[2].split() == words
    assert [ln.split()[:2] for ln in lines[4:7]] == [
        ["range", "40"],
        ["map", "40"],
        ["batch", "10"],
    ]
    assert "Verdict: bottleneck: map." in text


def test_slow_consumer_gets_model_verdict(stats_clock):
    report = dp.range(30).profile(step_fn=lambda x: stats_clock.sleep(0.003))
    assert report.elements == 30
    assert report.step_s == pytest.approx(30 * 0.003) == report.wall_s
    assert report.input_bound_fraction == 0.0
    assert report.verdict.kind == "model"
    assert report.verdict.stage is None
    assert "model/step is the bottleneck, not the input" in str(report)


def test_tiny_map_before_batch_suggests_batched_map(stats_clock):
    # 2 us per element: under verdict.TINY_ELEMENT_S (50 us), so per-call overhead.
    ds = dp.from_tensor_slices(np.arange(2048, dtype=np.float64))
    report = ds.map(working(stats_clock, 2e-6)).batch(256).profile()
    assert report.stage("map").busy_s == pytest.approx(2048 * 2e-6)
    assert report.verdict.stage == "map"
    assert report.verdict.kind == "batched_map"
    assert "batch first, then map" in report.verdict.fix
    assert "(it costs 2.0 µs per element" in report.verdict.fix
    # 100 us per element is real work: parallelism, not batching, is the fix.
    report = ds.map(working(stats_clock, 1e-4)).batch(256).profile()
    assert (report.verdict.stage, report.verdict.kind) == ("map", "parallelize")


def test_slow_repeated_source_suggests_cache(stats_clock):
    report = SlowSource(10, 0.003, stats_clock.sleep).repeat(3).batch(5).profile()
    assert report.stage("slow_source").elements == 30
    assert report.stage("slow_source").busy_share == pytest.approx(1.0)
    assert report.stage("repeat").inputs == ["slow_source"]
    assert report.verdict.kind == "cache"
    assert report.verdict.stage == "slow_source"
    assert ".cache() right after 'slow_source'" in report.verdict.fix


def test_step_without_prefetch_suggests_prefetch(stats_clock):
    ds = dp.range(30).map(working(stats_clock, 0.002))
    report = ds.profile(step_fn=lambda x: stats_clock.sleep(0.002))
    # as long waiting for each element as computing on it: half the time input-bound
    assert report.input_bound_fraction == pytest.approx(0.5)
    assert report.step_s == pytest.approx(30 * 0.002)
    assert report.verdict.kind == "prefetch"
    assert ".prefetch(AUTOTUNE)" in report.verdict.fix


def _stage(label, op, busy_share, inputs=(), **kw) -> StageReport:
    base = dict(
        label=label, op=op, kind=op.title() + "Dataset", inputs=list(inputs), elements=100,
        bytes=800, calls=10, wait_s=1.0, own_s=busy_share, busy_s=busy_share, cpu_s=None,
        parallelism=1,
        num_parallel_calls=None, buffered=False, buffer_size=None, buffer_fill_mean=None,
        buffer_empty_fraction=None, threads=["MainThread"], autotune_events=[],
        buffer_series=[], rate=100.0, busy_share=busy_share,
        capacity=100 / busy_share if busy_share else None,
    )  # fmt: skip
    base.update(kw)
    return StageReport(**base)


def test_bursty_input_suggests_larger_prefetch():
    stages = [
        _stage("range", "range", 0.1),
        _stage("map", "map", 0.4, ["range"]),
        _stage("prefetch", "prefetch", 0.0, ["map"], buffered=True, buffer_size=2.0,
               buffer_fill_mean=0.3, buffer_empty_fraction=0.7),
    ]  # fmt: skip
    v = diagnose(stages, wall_s=1.0, input_bound=0.4, step_s=0.6, root="prefetch")
    assert (v.kind, v.stage) == ("prefetch", "prefetch")
    assert "larger buffer" in v.fix
    # The same buffer, but the map is saturated: the map, not the buffer, is the fix.
    stages[1] = _stage("map", "map", 0.9, ["range"])
    v = diagnose(stages, wall_s=1.0, input_bound=0.4, step_s=0.6, root="prefetch")
    assert (v.kind, v.stage) == ("parallelize", "map")


def test_saturated_parallel_map_suggests_reducing_work():
    stages = [
        _stage("range", "range", 0.01),
        _stage("map", "map", 0.95, ["range"], parallelism=8, busy_s=7.6),
    ]
    v = diagnose(stages, wall_s=1.0, input_bound=0.9, step_s=0.0, root="map")
    assert (v.kind, v.stage) == ("reduce_work", "map")
    assert "already runs 8 calls in parallel" in v.fix


def test_to_dict_round_trips_json():
    report = Gauged(dp.range(20).map(lambda x: x + 1)).batch(5).profile()
    d = report.to_dict()
    assert json.loads(json.dumps(d)) == d
    again = ProfileReport.from_dict(json.loads(json.dumps(d)))
    assert again.to_dict() == d
    assert str(again) == str(report)
    assert set(d) >= {"wall_s", "elements", "rate", "stages", "verdict", "input_bound_fraction"}
    assert [s["label"] for s in d["stages"]] == ["range", "map", "gauged", "batch"]


def test_gauges_and_autotune_events_reach_the_report():
    report = Gauged(dp.range(100)).batch(10).profile()
    g = report.stage("gauged")
    calls = g.calls
    fills = [k % 3 for k in range(calls)]
    assert g.buffered and g.buffer_size == 4.0 and g.parallelism == 2
    assert g.buffer_fill_mean == pytest.approx(sum(fills) / calls)
    assert g.buffer_empty_fraction == pytest.approx(fills.count(0) / calls)
    assert g.busy_s == 0.5  # the worker time the stage reported, not time in next_chunk
    assert [(e["knob"], e["old"], e["new"]) for e in g.autotune_events] == [("parallelism", 1, 2)]
    assert g.buffer_series and g.buffer_series[0][1:] == [0, 4, 2]
    assert "(" in str(report) and "% empty)" in str(report)


def test_limits_and_validation(stats_clock):
    assert dp.range(10**9).profile(num_elements=7).elements == 7
    # 1/512 s per element (exact in binary); the limit is 100 elements' time. The map works
    # in chunks, so it may have computed more than the profile received when the limit passed.
    report = dp.range(10**9).map(working(stats_clock, 2**-9)).profile(seconds=100 * 2**-9)
    computed = report.stage("map").elements
    assert report.wall_s == computed * 2**-9 >= 100 * 2**-9
    assert 0 < report.elements <= min(computed, 101)
    with pytest.raises(ValueError, match="num_elements must be >= 1, got 0"):
        dp.range(3).profile(num_elements=0)
    with pytest.raises(ValueError, match="seconds must be > 0, got -1"):
        dp.range(3).profile(seconds=-1)


def test_profile_leaves_the_dataset_unchanged():
    ds = dp.range(5).map(lambda x: x * 3)
    ds.profile()
    assert ds.options.stats.enabled is None
    assert [int(x) for x in ds] == [0, 3, 6, 9, 12]


def test_bytes_are_estimated_from_nbytes():
    arr = np.zeros((12, 3), np.float32)
    report = dp.from_tensor_slices(arr).batch(4).profile()
    assert report.stage("from_tensor_slices").bytes == 12 * 12
    assert report.stage("batch").bytes == 3 * 4 * 12


def test_iterator_report_of_a_live_training_loop(stats_clock):
    ds = dp.range(20).map(working(stats_clock, 0.0005))
    ds = ds.with_options(dp.Options(stats=dp.StatsOptions(enabled=True)))
    it = iter(ds)
    for _ in it:
        stats_clock.sleep(0.03)  # a 30 ms step (real sleeps: a loaded machine stretched the
        # waits for data past 5% of a short step, and the verdict said input-bound)
    report = dp.stats.iterator_report(it)
    assert report.stage("map").elements == 20
    # from the first request to the end: 20 steps and 20 elements' work
    assert report.wall_s == pytest.approx(20 * 0.0305)
    assert report.step_s == pytest.approx(20 * 0.03)
    assert report.input_bound_fraction == pytest.approx(0.0005 / 0.0305)  # 1.6%: < 5%
    assert report.verdict.kind == "model"
    with pytest.raises(ValueError, match="records no statistics"):
        dp.stats.iterator_report(iter(dp.range(3)))


def test_waiting_parallel_map_suggests_more_calls_than_cores():
    stages = [
        _stage("range", "range", 0.01),
        _stage("map", "map", 0.9, ["range"], parallelism=2, busy_s=1.8, cpu_s=0.1),
    ]
    v = diagnose(stages, wall_s=1.0, input_bound=0.9, step_s=0.0, root="map")
    assert (v.kind, v.stage) == ("parallelize", "map")
    assert "mostly waits rather than computes (6% of its busy time on a CPU" in v.fix


def test_parallel_map_reports_its_gauges():
    report = dp.range(200).map(slow, num_parallel_calls=2).batch(10).profile()
    assert report.elements == 20
    m = report.stage("map")
    assert (m.elements, m.parallelism, m.num_parallel_calls) == (200, 2, 2)
    assert m.buffered and m.buffer_size == 4.0
    assert 0.0 <= m.buffer_fill_mean <= 4.0
    assert m.busy_s >= 200 * 0.002  # the workers' time, summed
    assert m.cpu_s is not None and m.cpu_s < 0.5 * m.busy_s
    assert report.verdict.stage == "map"
    assert report.verdict.kind == "parallelize"
    assert "mostly waits" in report.verdict.fix


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


def test_prefetch_reports_its_buffer():
    report = dp.range(2000).map(lambda x: x + 1).prefetch(8).profile()
    p = report.stage("prefetch")
    assert p.buffered and p.buffer_size == 8.0
    assert 0.0 <= p.buffer_fill_mean <= 8.0
