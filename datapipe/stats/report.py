"""``ProfileReport``: per-stage statistics of one run, as a table, a verdict and JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from datapipe.stats.recorder import StageStats, StatsRecorder


@dataclass
class StageReport:
    """Statistics of one stage over a run.

    Attributes:
        label: the stage's name in the report (op name, ``[i]``-suffixed when repeated).
        op, kind: the op name and the Dataset class.
        inputs: labels of the stages feeding this one.
        elements, bytes, calls: produced elements, estimated bytes, ``next_chunk`` calls.
        wait_s: time its consumer spent waiting inside its ``next_chunk`` (includes inputs).
        own_s: ``wait_s`` minus the time waiting on inputs on the same thread.
        busy_s: seconds of work: the workers' compute time when the stage reports it, else
            ``own_s`` (for a buffered stage without that gauge, time blocked on its buffer).
        cpu_s: CPU seconds of the stage's workers when reported (``cpu_s`` much below
            ``busy_s`` means the work mostly waits: I/O, sleeps, GIL).
        parallelism: threads working for the stage (last reading; 1 for sequential ops).
        buffer_size, buffer_fill_mean, buffer_empty_fraction: buffer gauges (None if the
            stage has no buffer); the empty fraction is over requests.
        threads: names of the threads that pulled from the stage.
        autotune_events: ``{"t": seconds since start, "knob", "old", "new"}`` dicts.
        buffer_series: ``[t, fill, size, parallelism]`` samples over time.
        rate: elements per second of wall time; busy_share: ``busy_s / parallelism / wall``;
        capacity: elements per second the stage could deliver alone
            (``elements / (busy_s / parallelism)``, Plumber's per-op rate).
    """

    label: str
    op: str
    kind: str
    inputs: list[str]
    elements: int
    bytes: int
    calls: int
    wait_s: float
    own_s: float
    busy_s: float
    cpu_s: float | None
    parallelism: int
    num_parallel_calls: int | None
    buffered: bool
    buffer_size: float | None
    buffer_fill_mean: float | None
    buffer_empty_fraction: float | None
    threads: list[str]
    autotune_events: list[dict]
    buffer_series: list[list]
    rate: float
    busy_share: float
    capacity: float | None


@dataclass
class Verdict:
    """The diagnosis: which stage bounds throughput and what would help.

    ``kind`` is one of ``"model"`` (the consumer, not the input, is the bottleneck),
    ``"parallelize"``, ``"batched_map"``, ``"cache"``, ``"prefetch"``, ``"reduce_work"``,
    ``"balanced"`` (nothing stands out).
    """

    kind: str
    stage: str | None
    fix: str
    reason: str

    def __str__(self) -> str:
        where = f"bottleneck: {self.stage}. " if self.stage else ""
        return f"{where}{self.reason} Fix: {self.fix}"


@dataclass
class ProfileReport:
    """Result of ``Dataset.profile`` (or ``datapipe.stats.iterator_report(iterator)``).

    Attributes:
        wall_s: wall time of the run; elements: elements the consumer received;
        rate: elements per second; input_wait_s: time the consumer waited for data;
        input_bound_fraction: ``input_wait_s / wall_s`` (TF Profiler's "% of step time
            waiting for input"); step_s: time the consumer spent on each element's step, or
            0 when the profile only drained the pipeline; stages: per-stage ``StageReport``
            (sources first); verdict: the diagnosis; rank: distributed rank that ran it;
            trace_path: the Chrome trace written, if any.
    """

    wall_s: float
    elements: int
    rate: float
    input_wait_s: float
    input_bound_fraction: float
    step_s: float
    stages: list[StageReport]
    verdict: Verdict
    rank: int = 0
    trace_path: str | None = None
    meta: dict = field(default_factory=dict)

    def stage(self, label: str) -> StageReport:
        """The stage named ``label``; KeyError listing the labels if there is none."""
        for s in self.stages:
            if s.label == label:
                return s
        raise KeyError(f"no stage {label!r}; stages: {[s.label for s in self.stages]}")

    def to_dict(self) -> dict:
        """JSON-serialisable dict (``json.dumps`` works on it; ``from_dict`` inverts it)."""
        return json.loads(json.dumps(asdict(self)))

    @classmethod
    def from_dict(cls, d: dict) -> ProfileReport:
        names = {f.name for f in fields(StageReport)}
        stages = [StageReport(**{k: v for k, v in s.items() if k in names}) for s in d["stages"]]
        kw = {f.name: d[f.name] for f in fields(cls) if f.name in d}
        kw["stages"], kw["verdict"] = stages, Verdict(**d["verdict"])
        return cls(**kw)

    def to_json(self, path: str | None = None) -> str:
        text = json.dumps(self.to_dict(), indent=1)
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        return text

    def __str__(self) -> str:
        return format_report(self)


def _fmt_rate(x: float | None) -> str:
    if x is None:
        return "-"
    if x >= 1e6:
        return f"{x / 1e6:.2f}M"
    if x >= 1e4:
        return f"{x / 1e3:.1f}k"
    return f"{x:.1f}"


def format_report(r: ProfileReport) -> str:
    """The text form: a summary line, a table per stage (output stage last), the verdict."""
    head = (
        f"datapipe profile: {r.elements} elements in {r.wall_s:.3f} s "
        f"({_fmt_rate(r.rate)} elements/s); the consumer waited for data "
        f"{100 * r.input_bound_fraction:.1f}% of the time"
    )
    cols = ["stage", "elements", "rate/s", "busy %", "max rate/s", "wait ms", "buffer fill", "par"]
    rows = [cols]
    for s in r.stages:
        if s.buffered and s.buffer_fill_mean is not None:
            size = "?" if s.buffer_size is None else f"{s.buffer_size:g}"
            empty = 100 * (s.buffer_empty_fraction or 0.0)
            fill = f"{s.buffer_fill_mean:.1f}/{size} ({empty:.0f}% empty)"
        else:
            fill = "-"
        rows.append(
            [
                s.label,
                str(s.elements),
                _fmt_rate(s.rate),
                f"{100 * s.busy_share:.1f}",
                _fmt_rate(s.capacity),
                f"{1e3 * s.wait_s:.1f}",
                fill,
                str(s.parallelism),
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(cols))]
    lines = [head, ""]
    for j, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
        lines.append("  ".join(cells))
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines += ["", f"Verdict: {r.verdict}"]
    return "\n".join(lines)


def stage_report(rec: StatsRecorder, st: StageStats, wall_s: float) -> StageReport:
    """Summarise one stage's counters over a run of ``wall_s`` seconds."""
    par_now = st.gauges.get("parallelism")
    par = int(par_now) if par_now else 1
    worker_busy = st.worker_total("busy_s")
    if worker_busy is not None:
        busy = worker_busy
    elif st.kind == "PrefetchDataset":
        busy = 0.0  # a prefetcher's own time is waiting on its producer, which is upstream
    else:
        busy = max(st.own, 0.0)
    effective = busy / par
    fill_mean = st.fill_sum / st.fill_samples if st.fill_samples else None
    empty = st.empty / st.fill_samples if st.fill_samples else None
    size = st.gauges.get("buffer_size")
    events = [
        {"t": round(t - rec.t0, 6), "knob": str(k), "old": _jsonable(o), "new": _jsonable(n)}
        for t, k, o, n in st.autotune_events()
    ]
    return StageReport(
        label=st.label,
        op=st.op,
        kind=st.kind,
        inputs=rec.input_labels(st),
        elements=st.elements,
        bytes=st.bytes,
        calls=st.calls,
        wait_s=st.wait,
        own_s=st.own,
        busy_s=busy,
        cpu_s=st.worker_total("cpu_s"),
        parallelism=par,
        num_parallel_calls=st.num_parallel_calls,
        buffered=st.fill_samples > 0,
        buffer_size=None if size is None else float(size),
        buffer_fill_mean=fill_mean,
        buffer_empty_fraction=empty,
        threads=sorted(st.threads),
        autotune_events=events,
        buffer_series=[list(x) for x in st.series],
        rate=st.elements / wall_s if wall_s > 0 else 0.0,
        busy_share=effective / wall_s if wall_s > 0 else 0.0,
        capacity=st.elements / effective if effective > 0 else None,
    )


def _jsonable(x: Any) -> Any:
    if isinstance(x, (int, float, str, bool)) or x is None:
        return x
    try:
        return float(x)
    except (TypeError, ValueError):
        return str(x)


def build_report(
    rec: StatsRecorder,
    wall_s: float,
    elements: int | None = None,
    step_s: float = 0.0,
    rank: int = 0,
    trace_path: str | None = None,
    meta: dict | None = None,
) -> ProfileReport:
    """A ``ProfileReport`` from a recorder's counters over a run of ``wall_s`` seconds."""
    from datapipe.stats.verdict import diagnose

    # Graph order (sources first, as the table reads), not the order the iterators were
    # built in (``repeat`` builds its input late); inner stages of interleave/flat_map last.
    order = {label: i for i, label in enumerate(rec.labels.values())}
    ordered = sorted(rec.stages.values(), key=lambda st: order.get(st.label, len(order)))
    stages = [stage_report(rec, st, wall_s) for st in ordered]
    root = rec.root
    input_wait = root.wait if root is not None else 0.0
    n = elements if elements is not None else (root.elements if root is not None else 0)
    frac = min(input_wait / wall_s, 1.0) if wall_s > 0 else 0.0
    verdict = diagnose(stages, wall_s, frac, step_s, root.label if root else None)
    return ProfileReport(
        wall_s=wall_s,
        elements=n,
        rate=n / wall_s if wall_s > 0 else 0.0,
        input_wait_s=input_wait,
        input_bound_fraction=frac,
        step_s=step_s,
        stages=stages,
        verdict=verdict,
        rank=rank,
        trace_path=trace_path,
        meta=dict(meta or {}),
    )
