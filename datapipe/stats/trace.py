"""Trace spans and counters, written in the Chrome trace-event format.

The format is the JSON of Chrome's ``about:tracing`` ("Trace Event Format", the
``{"traceEvents": [...]}`` object form), which Perfetto (ui.perfetto.dev) and
``chrome://tracing`` open directly. We emit:

* ``ph: "X"`` complete events: one per chunk an iterator stage produced (and per span a
  parallel worker reports), with ``ts``/``dur`` in microseconds;
* ``ph: "C"`` counter events: buffer fill (and size, parallelism) of buffered stages;
* ``ph: "i"`` instant events: AUTOTUNE changes (added by ``datapipe.stats.profile``);
* ``ph: "M"`` metadata events naming each process (``pid`` = rank) and each track
  (``tid``: one per (stage or worker track, OS thread)).

Recording is off unless a profile turns it on (``enable()``); while off, ``record_span`` and
``span`` cost one global flag check. Events go to a bounded ring buffer, so a long run keeps
its most recent events and memory stays bounded.

For parallel workers (``datapipe.parallel``): call ``record_span(track, name, t0, t1)`` with
``time.perf_counter()`` times, or wrap the work in ``with span(name, track):``. Check
``trace.ENABLED`` first when even building the arguments costs something.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

# Read directly by hot paths (module attribute lookup, no call).
ENABLED = False
DEFAULT_CAPACITY = 200_000

# Event tuples: (ph, track, thread_ident, thread_name, name, t0, t1_or_None, args_or_None).
_events: deque = deque(maxlen=DEFAULT_CAPACITY)
_origin = time.perf_counter()


def enable(capacity: int = DEFAULT_CAPACITY, clear: bool = True) -> None:
    """Start recording spans and counters into a ring buffer of ``capacity`` events."""
    global ENABLED, _events, _origin
    if capacity < 1:
        raise ValueError(f"trace.enable: capacity must be >= 1, got {capacity}")
    if clear or _events.maxlen != capacity:
        _events = deque([] if clear else _events, maxlen=capacity)
        _origin = time.perf_counter()
    ENABLED = True


def disable() -> None:
    """Stop recording (the recorded events stay until the next ``enable``)."""
    global ENABLED
    ENABLED = False


def events() -> list[tuple]:
    """A copy of the recorded events (oldest first)."""
    return list(_events)


def record_span(track: str, name: str, t0: float, t1: float, args: dict | None = None) -> None:
    """Record that the current thread worked on ``name`` from ``t0`` to ``t1``
    (``time.perf_counter()`` seconds) on ``track`` (a stage label or worker pool name)."""
    if not ENABLED:
        return
    th = threading.current_thread()
    _events.append(("X", track, th.ident, th.name, name, t0, t1, args))


def record_counter(track: str, name: str, t: float, values: dict) -> None:
    """Record counter ``values`` (name -> number) of ``track`` at time ``t``."""
    if not ENABLED:
        return
    th = threading.current_thread()
    _events.append(("C", track, th.ident, th.name, name, t, None, values))


class _NoSpan:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


_NO_SPAN = _NoSpan()


def span(name: str, track: str | None = None) -> Any:
    """Context manager recording a span of the current thread (a no-op while disabled).

    Example:
        >>> from datapipe.stats import trace
        >>> trace.enable()
        >>> with trace.span("decode", track="map workers"):
        ...     pass
        >>> trace.disable()
        >>> [(e[0], e[1], e[4]) for e in trace.events()]
        [('X', 'map workers', 'decode')]
    """
    if not ENABLED:
        return _NO_SPAN
    return _span(name, track if track is not None else name)


@contextmanager
def _span(name: str, track: str) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    finally:
        record_span(track, name, t0, time.perf_counter())


def _us(t: float, origin: float) -> float:
    return round((t - origin) * 1e6, 3)


def to_chrome_trace(
    recorded: Iterable[tuple] | None = None,
    pid: int = 0,
    process_name: str | None = None,
    origin: float | None = None,
) -> dict:
    """The Chrome trace-event JSON object (``{"traceEvents": [...], ...}``) of ``recorded``
    events (default: the ring buffer). ``pid`` is the rank; each (track, thread) pair gets
    its own ``tid`` named ``"<track> [<thread name>]"`` by a ``thread_name`` metadata event.
    Events are sorted by time; ``ts`` and ``dur`` are microseconds since ``origin``."""
    evs = sorted(events() if recorded is None else recorded, key=lambda e: e[5])
    origin = _origin if origin is None else origin
    out: list[dict] = [
        {
            "ph": "M",
            "name": "process_name",
            "pid": pid,
            "tid": 0,
            "args": {"name": process_name or f"datapipe rank {pid}"},
        }
    ]
    tids: dict[tuple, int] = {}
    for ph, track, ident, thread_name, name, t0, t1, args in evs:
        key = (track, ident, thread_name)  # idents are reused once a thread exits
        tid = tids.get(key)
        if tid is None:
            tid = tids[key] = len(tids) + 1
            meta = {"name": f"{track} [{thread_name}]"}
            out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": meta})
            out.append(
                {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid}
                | {"args": {"sort_index": tid}}
            )
        ev: dict[str, Any] = {"ph": ph, "name": name, "pid": pid, "tid": tid, "ts": _us(t0, origin)}
        if ph == "X":
            ev["dur"] = round(max(t1 - t0, 0.0) * 1e6, 3)
            ev["cat"] = "datapipe"
        elif ph == "i":
            ev["s"] = "t"
        if args:
            ev["args"] = dict(args)
        out.append(ev)
    # Wall-clock time of ts=0, so traces of several ranks can be aligned (merge_traces).
    origin_unix_s = time.time() - (time.perf_counter() - origin)
    other = {"source": "datapipe", "origin_unix_s": origin_unix_s}
    return {"traceEvents": out, "displayTimeUnit": "ms", "otherData": other}


def write_chrome_trace(path: str, recorded: Iterable[tuple] | None = None, pid: int = 0) -> str:
    """Write ``to_chrome_trace(recorded, pid)`` to ``path`` (JSON); returns ``path``."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(to_chrome_trace(recorded, pid=pid), f)
    return path


def merge_traces(paths: Iterable[str | os.PathLike], out_path: str | os.PathLike) -> str:
    """Concatenate per-rank trace files (each with its own ``pid``) into one, shifting each
    rank's timestamps so that all share the earliest rank's wall-clock origin."""
    docs = []
    for p in paths:
        with open(p, encoding="utf-8") as f:
            docs.append(json.load(f))
    if not docs:
        raise ValueError("merge_traces: no trace files given")
    origins = [d.get("otherData", {}).get("origin_unix_s", 0.0) for d in docs]
    base = min(origins)
    events: list[dict] = []
    for d, origin in zip(docs, origins):
        shift = (origin - base) * 1e6
        for e in d["traceEvents"]:
            if "ts" in e:
                e = dict(e, ts=round(e["ts"] + shift, 3))
            events.append(e)
    doc = {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"origin_unix_s": base}}
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    return os.fspath(out_path)
