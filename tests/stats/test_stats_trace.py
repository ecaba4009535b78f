"""Chrome trace-event output: structure, tracks, ordering, counters."""

from __future__ import annotations

import json
import threading
from collections import defaultdict

import pytest
from _stats_ops import Gauged

import datapipe as dp
from datapipe.stats import trace

EPS = 0.002  # µs: ts and dur are each rounded to 3 decimals


def load(path) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def tracks(doc: dict) -> tuple[dict[int, str], dict[str, list[dict]]]:
    names = {
        e["tid"]: e["args"]["name"]
        for e in doc["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    spans: dict[str, list[dict]] = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            spans[names[e["tid"]]].append(e)
    return names, spans


def inside(inner: dict, outer: dict) -> bool:
    return (
        outer["ts"] - EPS <= inner["ts"]
        and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + EPS
    )


def test_sequential_trace_structure_and_order(tmp_path):
    path = tmp_path / "trace.json"
    report = dp.range(64).map(lambda x: x + 1).batch(8).profile(trace_path=str(path), rank=3)
    assert report.trace_path == str(path)
    doc = load(path)
    assert set(doc) >= {"traceEvents", "displayTimeUnit"}
    evs = doc["traceEvents"]
    assert all(e["pid"] == 3 for e in evs)
    proc = [e for e in evs if e["ph"] == "M" and e["name"] == "process_name"]
    assert [p["args"]["name"] for p in proc] == ["datapipe rank 3"]
    names, spans = tracks(doc)
    thread = threading.current_thread().name
    assert sorted(spans) == sorted(f"{s} [{thread}]" for s in ("range", "map", "batch"))
    assert len(set(names.values())) == len(names)  # one tid per (stage, thread)
    for stage_spans in spans.values():
        assert all(e["cat"] == "datapipe" and e["dur"] >= 0 for e in stage_spans)
        ts = [e["ts"] for e in stage_spans]
        assert ts == sorted(ts)
        for a, b in zip(stage_spans, stage_spans[1:]):
            assert a["ts"] + a["dur"] <= b["ts"] + EPS  # no overlap on one thread
    total = {k.split(" ")[0]: sum(e["args"]["elements"] for e in v) for k, v in spans.items()}
    assert total == {"range": 64, "map": 64, "batch": 8}
    # A consumer's span encloses the spans of the producers it called.
    for consumer, producer in (("batch", "map"), ("map", "range")):
        outer = spans[f"{consumer} [{thread}]"]
        for e in spans[f"{producer} [{thread}]"]:
            assert any(inside(e, o) for o in outer), (producer, e)


def test_counters_and_autotune_events(tmp_path):
    path = tmp_path / "t.json"
    report = Gauged(dp.range(50)).batch(5).profile(trace_path=str(path))
    doc = load(path)
    counters = [e for e in doc["traceEvents"] if e["ph"] == "C"]
    calls = report.stage("gauged").calls
    assert len(counters) == calls
    assert {e["name"] for e in counters} == {"gauged buffer"}
    assert [e["args"] for e in counters] == [{"fill": k % 3, "size": 4} for k in range(calls)]
    instants = [e for e in doc["traceEvents"] if e["ph"] == "i"]
    assert [e["name"] for e in instants] == ["parallelism: 1 -> 2"]
    assert instants[0]["s"] == "t"


def test_worker_spans_get_one_track_per_thread():
    trace.enable()
    try:

        def work(i):
            with trace.span("decode", track="map workers"):
                pass
            trace.record_span("map workers", "chunk", 1.0, 1.5, {"i": i})

        threads = [threading.Thread(target=work, args=(i,), name=f"w{i}") for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        trace.disable()
    with trace.span("ignored"):
        pass
    trace.record_span("x", "ignored", 0.0, 1.0)
    doc = trace.to_chrome_trace(pid=0)
    names, spans = tracks(doc)
    assert sorted(spans) == [f"map workers [w{i}]" for i in range(3)]
    assert all(sorted(e["name"] for e in v) == ["chunk", "decode"] for v in spans.values())
    chunk = [e for v in spans.values() for e in v if e["name"] == "chunk"]
    assert {e["dur"] for e in chunk} == {500000.0}


def test_ring_buffer_is_bounded():
    trace.enable(capacity=10)
    try:
        for i in range(25):
            trace.record_span("t", f"s{i}", float(i), float(i) + 0.5)
    finally:
        trace.disable()
    assert [e[4] for e in trace.events()] == [f"s{i}" for i in range(15, 25)]
    with pytest.raises(ValueError, match="capacity must be >= 1, got 0"):
        trace.enable(capacity=0)
    trace.enable()  # leave the default buffer behind
    trace.disable()


def test_parallel_map_workers_get_their_own_tracks(tmp_path):
    import time

    def work(x):
        time.sleep(0.001)
        return x

    path = tmp_path / "p.json"
    dp.range(100).map(work, num_parallel_calls=2).profile(trace_path=str(path))
    doc = load(path)
    names, spans = tracks(doc)
    workers = sorted(k for k in spans if k.startswith("map workers ["))
    assert workers == ["map workers [datapipe-map-0]", "map workers [datapipe-map-1]"]
    assert sum(e["args"]["elements"] for k in workers for e in spans[k]) == 100
    for k in workers:
        ts = [(e["ts"], e["dur"]) for e in spans[k]]
        assert all(a[0] + a[1] <= b[0] + EPS for a, b in zip(ts, ts[1:]))
    counters = [e for e in doc["traceEvents"] if e["ph"] == "C" and e["name"] == "map buffer"]
    assert counters and all(e["args"]["size"] == 4 for e in counters)
