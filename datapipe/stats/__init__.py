"""Pipeline statistics, bottleneck diagnosis and traces.

* ``Dataset.profile(num_elements=..., seconds=..., trace_path=...)`` (``profile`` here) runs
  a pipeline with statistics on and returns a ``ProfileReport``: ``str(report)`` is a table
  per stage (rate, share of wall time busy, wait, buffer fill, parallelism) and a verdict
  naming the bottleneck stage and the fix; ``report.to_dict()`` is JSON.
* ``Options(stats=StatsOptions(enabled=True))`` records the same statistics in any run;
  ``iterator_report(iterator)`` summarises a live iterator (e.g. in the middle of training).
* ``trace``: Chrome trace-event JSON (Perfetto, ``chrome://tracing``);
  ``trace.merge_traces`` aligns the ranks' traces in one file.
* ``torch_ranges``: while a ``torch.profiler.profile()`` records, each stage's work is a
  ``record_function`` range (``datapipe::<stage>``) on the model's timeline.
* ``InputBoundTimer``: the input-bound fraction of a training loop, per epoch.
* ``merge_reports`` / ``profile_rank``: one report and trace per rank, merged into a view
  that names the slowest rank per stage.

Gauge protocol for buffered and parallel iterators
--------------------------------------------------
Statistics hang off the iterator protocol: ``stats_hook`` (installed in
``datapipe._context.ITERATOR_HOOKS`` when this package is imported) wraps every op iterator
in a ``StatsIterator`` when ``Options.stats.enabled`` is true, so ops need no code for
elements, bytes and time. What only the op knows it reports through two optional members:

``it.stats_gauges() -> dict``
    Called by the wrapper just before each ``next_chunk`` on the consumer's thread, so it
    must be cheap (read a few fields, no locks held long). Any of these keys:

    - ``"buffer_size"``: elements (or chunks) the buffer may hold now;
    - ``"buffer_fill"``: elements ready in the buffer now (0 = the consumer will wait);
    - ``"parallelism"``: worker threads (or processes) working for the stage now;
    - ``"busy_s"``: cumulative seconds the workers spent computing (summed over workers),
      so the report can give a parallel stage its true work instead of the time its
      consumer sat blocked on the buffer;
    - ``"cpu_s"``: cumulative CPU seconds of those workers (``time.thread_time``), which
      tells work that waits (I/O, sleeps) from work that computes.

``it.autotune_events: list[tuple[float, str, Any, Any]]``
    Appended by the autotuner on each change: ``(time.perf_counter(), knob, old, new)``,
    e.g. ``(t, "parallelism", 2, 4)`` or ``(t, "buffer_size", 8, 16)``. Read when the report
    is built and when the iterator closes.

Worker threads add their own spans to a trace with ``trace.record_span(track, name, t0,
t1)`` or ``with trace.span(name, track):`` (one global flag check while tracing is off).

Example:
    >>> import datapipe as dp
    >>> report = dp.range(100).map(lambda x: x * 2).profile()
    >>> [(s.label, s.elements) for s in report.stages]
    [('range', 100), ('map', 100)]
"""

from datapipe._context import ITERATOR_HOOKS
from datapipe.stats import trace
from datapipe.stats.merge import (
    MergedReport,
    current_rank,
    merge_reports,
    profile_rank,
    save_report,
)
from datapipe.stats.profile import iterator_report, profile
from datapipe.stats.recorder import StatsIterator, stats_hook
from datapipe.stats.report import ProfileReport, StageReport, Verdict
from datapipe.stats.training import EpochTiming, InputBoundTimer

if stats_hook not in ITERATOR_HOOKS:
    ITERATOR_HOOKS.append(stats_hook)

# torch.profiler ranges per stage (torch_ranges): iterators know their node's label.
from datapipe.stats import torch_ranges  # noqa: E402

if torch_ranges.tag_hook not in ITERATOR_HOOKS:
    ITERATOR_HOOKS.append(torch_ranges.tag_hook)

__all__ = [
    "EpochTiming",
    "InputBoundTimer",
    "MergedReport",
    "ProfileReport",
    "StageReport",
    "StatsIterator",
    "Verdict",
    "current_rank",
    "iterator_report",
    "merge_reports",
    "profile",
    "profile_rank",
    "save_report",
    "stats_hook",
    "torch_ranges",
    "trace",
]
