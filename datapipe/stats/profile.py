"""``profile``: run a pipeline with statistics on and diagnose it (``Dataset.profile``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from time import perf_counter
from typing import Any

from datapipe.options import Options, StatsOptions
from datapipe.stats import trace
from datapipe.stats.recorder import recorder_from
from datapipe.stats.report import ProfileReport, build_report

# Without a limit a profile runs to the end of the data, but never longer than this.
DEFAULT_SECONDS = 10.0


def profile(
    ds: Any,
    num_elements: int | None = None,
    seconds: float | None = None,
    trace_path: str | os.PathLike | None = None,
    step_fn: Callable[[Any], Any] | None = None,
    progress: bool | None = None,
    rank: int | None = None,
) -> ProfileReport:
    """Run ``ds`` with per-stage statistics and return a ``ProfileReport``.

    The pipeline runs on a copy with ``Options.stats.enabled`` set; the consumer is this
    function (or ``step_fn``, a stand-in for the training step called on each element, so
    that the verdict can tell an input-bound job from a model-bound one).

    Args:
        ds: the Dataset.
        num_elements: stop after this many elements (>= 1).
        seconds: stop after this much wall time (> 0). With neither limit the run goes to
            the end of the data, for at most ``DEFAULT_SECONDS``.
        trace_path: also write a Chrome trace-event JSON file there (open it in Perfetto or
            ``chrome://tracing``): one track per stage and thread, a span per produced
            chunk, counters for buffer fill.
        step_fn: called on each element; its time counts as step time, not input time.
        progress: show a tqdm bar (default: when stderr is a terminal; see
            ``datapipe._progress``).
        rank: the rank written into the report and the trace's ``pid`` (default: the
            distributed context's process index).

    Returns:
        ``ProfileReport``: ``str(report)`` is the per-stage table and the verdict;
        ``report.to_dict()`` is JSON.

    Raises:
        ValueError: ``num_elements`` < 1 or ``seconds`` <= 0.

    Example:
        >>> import datapipe as dp
        >>> report = dp.range(1000).map(lambda x: x + 1).batch(100).profile()
        >>> report.elements, [s.label for s in report.stages]
        (10, ['range', 'map', 'batch'])
        >>> report.stage("map").elements
        1000
    """
    if num_elements is not None and int(num_elements) < 1:
        raise ValueError(f"profile: num_elements must be >= 1, got {num_elements}")
    if seconds is not None and not float(seconds) > 0:
        raise ValueError(f"profile: seconds must be > 0, got {seconds}")
    if num_elements is None and seconds is None:
        seconds = DEFAULT_SECONDS
    from datapipe.stats.merge import current_rank

    rank = current_rank() if rank is None else int(rank)
    if trace_path is not None:
        trace.enable()
    try:
        report, t0 = _run(ds, num_elements, seconds, step_fn, progress, rank)
    finally:
        if trace_path is not None:
            trace.disable()
    if trace_path is not None:
        report.trace_path = str(trace_path)
        trace.write_chrome_trace(str(trace_path), _with_autotune(report, t0), pid=rank)
    return report


def _run(
    ds: Any,
    num_elements: int | None,
    seconds: float | None,
    step_fn: Callable[[Any], Any] | None,
    progress: bool | None,
    rank: int,
) -> tuple[ProfileReport, float]:
    from datapipe._progress import progress_bar

    it = iter(ds.with_options(Options(stats=StatsOptions(enabled=True))))
    limit = -1 if num_elements is None else int(num_elements)
    step_s, n = 0.0, 0
    bar = progress_bar(total=num_elements, desc="profile", unit="el", enabled=progress)
    t_start = perf_counter()
    deadline = t_start + seconds if seconds is not None else None
    try:
        for x in it:
            n += 1
            if step_fn is not None:
                t = perf_counter()
                step_fn(x)
                step_s += perf_counter() - t
            if n & 255 == 0:
                bar.update(256)
            if n == limit or (deadline is not None and perf_counter() >= deadline):
                break
        wall = perf_counter() - t_start
        bar.update(n & 255)
        rec = recorder_from(it)
        meta = {"num_elements": num_elements, "seconds": seconds}
        rep = build_report(rec, wall, elements=n, step_s=step_s, rank=rank, meta=meta)
        return rep, rec.t0
    finally:
        bar.close()
        it.close()


def _with_autotune(report: ProfileReport, t0: float) -> list[tuple]:
    """The recorded events plus one instant event per AUTOTUNE change."""
    evs = trace.events()
    for s in report.stages:
        for e in s.autotune_events:
            name = f"{e['knob']}: {e['old']} -> {e['new']}"
            evs.append(("i", s.label, 0, "AUTOTUNE", name, t0 + e["t"], None, dict(e)))
    return evs


def iterator_report(iterator: Any, wall_s: float | None = None) -> ProfileReport:
    """A ``ProfileReport`` of a live iterator built with ``Options.stats.enabled`` (for
    example inside a training loop). Wall time defaults to the time from the first request
    to the last delivery; the time between requests counts as step time.

    Raises:
        ValueError: the iterator records no statistics.
    """
    from datapipe.stats.merge import current_rank

    rec = recorder_from(iterator)
    root = rec.root
    if wall_s is None:
        wall_s = 0.0
        if root is not None and root.t_first is not None and root.t_last is not None:
            wall_s = root.t_last - root.t_first
    step_s = max(wall_s - (root.wait if root else 0.0), 0.0)
    return build_report(rec, wall_s, step_s=step_s, rank=current_rank())
