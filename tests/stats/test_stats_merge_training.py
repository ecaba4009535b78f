"""Per-rank reports and their merge (pipeline order kept when a rank has an extra stage); the
training-loop timer (no steps, an epoch left by an exception); progress bars (adapt, save,
file cache)."""

from __future__ import annotations

import io
import json
import os
import sys
import time

import numpy as np
import pytest

import datapipe as dp
from datapipe import _progress
from datapipe.stats import InputBoundTimer, merge_reports, profile_rank, trace
from datapipe.stats.merge import current_rank, rank_paths


def pipeline(delay: float) -> dp.Dataset:
    def work(x):
        time.sleep(delay)
        return x

    return dp.range(20).map(work).batch(4)


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


def test_merge_names_the_slowest_rank_per_stage(tmp_path):
    for rank, delay in ((0, 0.0), (1, 0.003), (2, 0.0005)):
        report = profile_rank(pipeline(delay), tmp_path, rank=rank)
        assert report.rank == rank
    files = sorted(os.listdir(tmp_path))
    assert files == [f"{k}-rank{r}.json" for k in ("report", "trace") for r in range(3)]
    with open(tmp_path / "trace-rank1.json", encoding="utf-8") as f:
        assert {e["pid"] for e in json.load(f)["traceEvents"]} == {1}
    merged = merge_reports(str(tmp_path))
    assert merged.ranks == [0, 1, 2]
    assert merged.slowest_rank == 1
    by_label = {s.label: s for s in merged.stages}
    assert list(by_label) == ["range", "map", "batch"]
    assert by_label["map"].slowest_rank == 1
    assert by_label["map"].per_rank[1]["cost_us"] >= 3000
    assert by_label["map"].spread > 1.5
    assert sorted(by_label["map"].per_rank) == [0, 1, 2]
    assert json.loads(json.dumps(merged.to_dict())) == merged.to_dict()
    text = str(merged)
    assert text.startswith("datapipe profile of 3 ranks; slowest rank: 1")
    assert "rank 1: bottleneck: map." in text
    merged_trace = trace.merge_traces(
        [tmp_path / f"trace-rank{r}.json" for r in range(3)], tmp_path / "all.json"
    )
    with open(merged_trace, encoding="utf-8") as f:
        evs = json.load(f)["traceEvents"]
    assert {e["pid"] for e in evs} == {0, 1, 2}
    starts = {r: min(e["ts"] for e in evs if e["pid"] == r and e["ph"] == "X") for r in range(3)}
    assert starts[0] < starts[1] < starts[2]  # the ranks ran one after another


def test_merge_accepts_reports_and_dicts_and_rejects_duplicates():
    a = pipeline(0.0).profile(rank=0)
    b = pipeline(0.002).profile(rank=1)
    merged = merge_reports([a, b.to_dict()])
    assert merged.slowest_rank == 1
    with pytest.raises(ValueError, match=r"duplicate ranks \[0, 0\]"):
        merge_reports([a, a])
    with pytest.raises(ValueError, match="no reports given"):
        merge_reports([])


def test_current_rank_and_paths(monkeypatch, tmp_path):
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert current_rank() == 2
    assert rank_paths(tmp_path) == (
        str(tmp_path / "report-rank2.json"),
        str(tmp_path / "trace-rank2.json"),
    )
    assert dp.range(3).profile().rank == 2


def test_input_bound_timer_splits_wait_and_step(stats_clock):
    def slow_source():  # 4 ms per element on the fake clock
        for i in range(5):
            stats_clock.sleep(0.004)
            yield i

    timer = InputBoundTimer()
    seen = []
    for x in timer.epoch(slow_source()):
        seen.append(x)
        stats_clock.sleep(0.001)
    for x in timer(range(4)):
        stats_clock.sleep(0.003)
        if x == 1:
            break
    assert seen == [0, 1, 2, 3, 4]
    e0, e1 = timer.epochs
    assert (e0.epoch, e0.steps, e1.epoch, e1.steps) == (0, 5, 1, 2)
    assert e0.wait_s == pytest.approx(5 * 0.004) and e0.step_s == pytest.approx(5 * 0.001)
    assert e0.input_bound_fraction == pytest.approx(0.8)
    # the loop left in the second step: only the first step's end was seen
    assert e1.wait_s == 0.0 and e1.step_s == pytest.approx(0.003)
    assert e1.input_bound_fraction == 0.0
    assert timer.input_bound_fraction == pytest.approx(0.02 / 0.028)
    d = timer.to_dict()
    assert [e["steps"] for e in d["epochs"]] == [5, 2]
    assert d["input_bound_fraction"] == pytest.approx(timer.input_bound_fraction)
    lines = timer.summary().splitlines()
    assert lines[0].split() == ["epoch", "steps", "wait", "s", "step", "s", "input-bound"]
    assert lines[1].split()[:2] == ["0", "5"]
    assert lines[-1].startswith("overall: ")


def test_input_bound_timer_closes_dataset_iterators_and_syncs():
    calls = []
    timer = InputBoundTimer(sync=lambda: calls.append(1))
    assert [int(x) for x in timer.epoch(dp.range(3))] == [0, 1, 2]
    assert len(calls) == 3
    assert timer.epochs[0].steps == 3


def test_progress_switches(monkeypatch):
    monkeypatch.delenv(_progress.ENV_VAR, raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert not _progress.progress_enabled(None)  # not a terminal
    assert isinstance(_progress.progress_bar(total=3), _progress.NullBar)
    monkeypatch.setenv(_progress.ENV_VAR, "1")
    assert _progress.progress_enabled(None)
    assert not _progress.progress_enabled(False)
    with _progress.progress_bar(total=4, desc="save", unit="el") as bar:
        bar.update(4)
    assert "save" in sys.stderr.getvalue() and "4/4" in sys.stderr.getvalue()
    assert list(_progress.track(range(3), desc="t")) == [0, 1, 2]
    monkeypatch.setenv(_progress.ENV_VAR, "0")
    assert not _progress.progress_enabled(True)


def test_progress_on_a_terminal(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv(_progress.ENV_VAR, raising=False)
    monkeypatch.setattr(sys, "stderr", Tty())
    assert _progress.progress_enabled(None)
    assert not _progress.progress_enabled(False)
    report = dp.range(600).profile(num_elements=600)
    assert report.elements == 600
    assert "profile" in sys.stderr.getvalue()


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
