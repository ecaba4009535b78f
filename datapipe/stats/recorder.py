"""Per-stage statistics, recorded by wrapping each op iterator as ``iter()`` builds it.

No op records anything itself: ``stats_hook`` sits in ``datapipe._context.ITERATOR_HOOKS``
and, when ``Options.stats.enabled`` is true, wraps every ``OpIterator`` in a
``StatsIterator`` that times each ``next_chunk`` call. With statistics off the hook returns
the iterator unchanged, so a pipeline without statistics runs exactly the same code.

What one call to a stage's ``next_chunk`` tells us:

* wait: wall time inside the call, i.e. how long that stage's consumer waited on it;
* own time: wait minus the time spent, on the same thread, inside the calls this stage
  made to its inputs (a per-thread stack of child-time accumulators);
* elements and bytes produced (bytes estimated from the chunk's first element);
* the stage's buffer fill and parallelism at request time, when the wrapped iterator
  implements the gauge protocol of ``datapipe.stats`` (``stats_gauges()``).
"""

from __future__ import annotations

import threading
from time import perf_counter
from typing import Any

from datapipe._context import IterContext, walk
from datapipe._iterator import OpIterator
from datapipe._structure import element_nbytes
from datapipe.stats import trace

_local = threading.local()

# Buffer-fill samples kept per stage; past it every other sample is dropped and the
# sampling interval doubles, so a long run keeps an even picture in bounded memory.
MAX_SERIES = 1024
FIRST_INTERVAL_S = 0.002
# Gauges that count up over an iterator's life; a stage sums them over its iterators.
CUMULATIVE_GAUGES = ("busy_s", "cpu_s")


class StageStats:
    """Counters of one stage (one graph node; every iterator built for it adds here)."""

    def __init__(self, label: str, node: Any, recorder: StatsRecorder):
        self.label = label
        self.op = getattr(node, "_name", type(node).__name__)
        self.kind = type(node).__name__
        self.node = node
        self.recorder = recorder
        req = getattr(node, "stage_request", None)  # a parallel op's declaration
        self.num_parallel_calls = None if req is None else req.parallelism
        self.elements = 0
        self.bytes = 0
        self.calls = 0
        self.wait = 0.0
        self.own = 0.0
        self.t_first: float | None = None
        self.t_last: float | None = None
        self.threads: set[str] = set()
        self.has_gauges = False
        self.gauge_samples = 0
        self.fill_samples = 0
        self.fill_sum = 0.0
        self.empty = 0
        self.gauges: dict = {}
        self.parallelism_max: int | None = None
        self.series: list[list] = []
        self._next_sample = 0.0
        self._interval = FIRST_INTERVAL_S
        self.live: list[StatsIterator] = []
        self.closed_totals: dict[str, float] = {}
        self.closed_events: list = []

    def sample(self, g: dict, t: float) -> None:
        """Fold one ``stats_gauges()`` reading into the aggregates and the series."""
        self.gauge_samples += 1
        self.gauges = g
        fill = g.get("buffer_fill")
        size = g.get("buffer_size")
        par = g.get("parallelism")
        if fill is not None:
            self.fill_samples += 1
            self.fill_sum += fill
            if fill <= 0:
                self.empty += 1
        if par is not None and (self.parallelism_max is None or par > self.parallelism_max):
            self.parallelism_max = par
        if t >= self._next_sample:
            self.series.append([round(t - self.recorder.t0, 6), fill, size, par])
            self._next_sample = t + self._interval
            if len(self.series) > MAX_SERIES:
                self.series = self.series[::2]
                self._interval *= 2
        if trace.ENABLED:
            values = {k: v for k, v in (("fill", fill), ("size", size)) if v is not None}
            if values:
                trace.record_counter(self.label, f"{self.label} buffer", t, values)

    def worker_total(self, key: str) -> float | None:
        """Sum of a cumulative gauge (``busy_s``, ``cpu_s``) over the stage's iterators, or
        None when no iterator reports it."""
        if not self.has_gauges:
            return None
        total, seen = self.closed_totals.get(key, 0.0), key in self.closed_totals
        for w in list(self.live):
            v = w.gauges_now().get(key)
            if v is not None:
                total, seen = total + float(v), True
        return total if seen else None

    def autotune_events(self) -> list:
        evs = list(self.closed_events)
        for w in list(self.live):
            evs.extend(getattr(w.wrapped, "autotune_events", None) or ())
        return sorted(evs, key=lambda e: e[0])


class StatsIterator(OpIterator):
    """Wraps one op iterator: passes every protocol call through, timing ``next_chunk``."""

    def __init__(self, inner: OpIterator, stage: StageStats):
        super().__init__([inner])
        self.wrapped = inner
        self.stats_stage = stage
        self.op_name = getattr(inner, "op_name", stage.op)
        self._gauges = getattr(inner, "stats_gauges", None)
        if self._gauges is not None:
            stage.has_gauges = True
        stage.live.append(self)

    def __getattr__(self, name: str) -> Any:
        # Attributes the wrapper lacks (an op's own fields) are the wrapped iterator's.
        wrapped = self.__dict__.get("wrapped")
        if wrapped is None:
            raise AttributeError(name)
        return getattr(wrapped, name)

    def gauges_now(self) -> dict:
        return self._gauges() if self._gauges is not None and not self.wrapped.closed else {}

    def next_chunk(self, n: int) -> list:
        st = self.stats_stage
        try:
            stack = _local.stack
        except AttributeError:
            stack = _local.stack = []
        t0 = perf_counter()
        if self._gauges is not None:
            st.sample(self._gauges(), t0)
        stack.append(0.0)
        try:
            out = self.wrapped.next_chunk(n)
        finally:
            t1 = perf_counter()
            dt = t1 - t0
            child = stack.pop()
            if stack:
                stack[-1] += dt
            st.wait += dt
            st.own += dt - child
            st.calls += 1
            if st.t_first is None:
                st.t_first = t0
            st.t_last = t1
            st.threads.add(threading.current_thread().name)
        k = len(out)
        if k:
            st.elements += k
            st.bytes += element_nbytes(out[0]) * k  # estimate: the first element's size
        if trace.ENABLED:
            trace.record_span(st.label, st.label, t0, t1, {"elements": k, "requested": n})
        return out

    def index_base(self) -> tuple[int, int] | None:
        return self.wrapped.index_base()

    # the identities a shuffle, shard or stage carries (datapipe._identity) pass through
    def identity_base(self) -> tuple[int, int] | None:
        from datapipe._identity import identity_base_of

        return identity_base_of(self.wrapped)

    def carries_ids(self) -> bool:
        f = getattr(self.wrapped, "carries_ids", None)
        return bool(f is not None and f())

    def last_ids(self) -> Any:
        return self.wrapped.last_ids()  # type: ignore[attr-defined]

    def get_state(self) -> dict:
        return self.wrapped.get_state()

    def set_state(self, state: dict) -> None:
        self.wrapped.set_state(state)

    def close(self) -> None:
        if self.closed:
            return
        st = self.stats_stage
        if self._gauges is not None and not self.wrapped.closed:
            g = self._gauges()
            for key in CUMULATIVE_GAUGES:
                if g.get(key) is not None:
                    st.closed_totals[key] = st.closed_totals.get(key, 0.0) + float(g[key])
        st.closed_events.extend(getattr(self.wrapped, "autotune_events", None) or ())
        try:
            st.live.remove(self)
        except ValueError:
            pass
        self.closed = True
        self.wrapped.close()


def _static_labels(root: Any) -> dict[int, str]:
    """Stage labels by node id: the op name, suffixed ``[i]`` (post-order occurrence, source
    first) when several nodes share it, so every rank of a job labels stages alike."""
    nodes = walk(root)
    counts: dict[str, int] = {}
    for node in nodes:
        counts[node._name] = counts.get(node._name, 0) + 1
    seen: dict[str, int] = {}
    labels = {}
    for node in nodes:
        name = node._name
        if counts[name] == 1:
            labels[id(node)] = name
        else:
            labels[id(node)] = f"{name}[{seen.get(name, 0)}]"
            seen[name] = seen.get(name, 0) + 1
    return labels


class StatsRecorder:
    """All stages of one ``iter()`` (shared by the iterators ``repeat`` rebuilds per epoch)."""

    def __init__(self, ctx: IterContext):
        self.t0 = perf_counter()
        self.root_node = ctx.root  # keeps the node ids in ``labels`` valid
        self.labels = _static_labels(ctx.root)
        self.stages: dict[Any, StageStats] = {}
        self.root: StageStats | None = None
        self._lock = threading.Lock()

    def stage_for(self, node: Any) -> StageStats:
        # Nodes built while running (flat_map/interleave inner datasets) share one stage per
        # op name rather than one per element.
        key: Any = id(node) if id(node) in self.labels else ("dynamic", node._name)
        with self._lock:
            st = self.stages.get(key)
            if st is None:
                label = self.labels.get(id(node)) or f"{node._name} (inner)"
                st = self.stages[key] = StageStats(label, node, self)
            return st

    def input_labels(self, st: StageStats) -> list[str]:
        """Labels of the stages feeding ``st``, looking through nodes without a stage of
        their own (``with_options``, ``prefetch(0)``)."""
        by_id = {k: s for k, s in self.stages.items() if isinstance(k, int)}
        out: list[str] = []

        def visit(node: Any) -> None:
            s = by_id.get(id(node))
            if s is not None:
                out.append(s.label)
                return
            for child in getattr(node, "_inputs", ()):
                visit(child)

        for child in getattr(st.node, "_inputs", ()):
            visit(child)
        return out


def recorder_of(ctx: IterContext) -> StatsRecorder:
    rec = ctx.recorder
    if rec is None:
        rec = ctx.recorder = StatsRecorder(ctx)
    return rec


def stats_hook(node: Any, it: OpIterator, ctx: IterContext) -> OpIterator:
    """The ``ITERATOR_HOOKS`` entry: wrap ``it`` when ``Options.stats.enabled``."""
    if not ctx.options.stats.enabled:
        return it
    if isinstance(it, StatsIterator):
        # A pass-through node (with_options, prefetch(0)) handed back its input's iterator.
        rec = it.stats_stage.recorder
    else:
        rec = recorder_of(ctx)
        it = StatsIterator(it, rec.stage_for(node))
    if node is ctx.root:
        rec.root = it.stats_stage
    return it


def recorder_from(iterator: Any) -> StatsRecorder:
    """The recorder behind a public ``Iterator`` (or an op iterator) built with statistics on.

    Raises:
        ValueError: the iterator was built with ``Options.stats.enabled`` off.
    """
    root = getattr(iterator, "_root", iterator)
    if not isinstance(root, StatsIterator):
        raise ValueError(
            "datapipe.stats: this iterator records no statistics; build it from "
            "ds.with_options(Options(stats=StatsOptions(enabled=True)))"
        )
    return root.stats_stage.recorder
