"""The diagnosis of a profile: is the input the bottleneck, which stage, and what helps.

It follows two sources:

* the TensorFlow Profiler's input-pipeline analyser, which classifies a job by the share
  of step time spent waiting for input (under 5%: not input-bound; 5-20%: moderately;
  20% and more: highly input-bound) and only then looks inside the pipeline;
* Plumber (Kuchnik et al., "Plumber: Diagnosing and Removing Performance Bottlenecks in
  Machine Learning Data Pipelines", MLSys 2022), which gives each stage a rate (elements
  per second of its own work, times its parallelism) and names the stage with the lowest
  rate the bottleneck; its fixes are more parallelism there, caching, and prefetching.

Stages are compared by their busy share (busy seconds / parallelism / wall seconds), which
is Plumber's rate comparison made independent of each stage's element unit (a batch
stage's element is many input elements).
"""

from __future__ import annotations

from datapipe.stats.report import StageReport, Verdict

NOT_INPUT_BOUND = 0.05
HIGHLY_INPUT_BOUND = 0.20
# Below this per-element cost a map's work is mostly per-call Python overhead: a vectorised
# function over whole batches does it in one call per batch.
TINY_ELEMENT_S = 50e-6
MAP_KINDS = ("MapDataset", "RandomMapDataset")
# Ops that overlap producing elements with the step (a buffer filled by a thread).
PREFETCH_OPS = ("prefetch", "prefetch_to_device")


def diagnose(
    stages: list[StageReport],
    wall_s: float,
    input_bound: float,
    step_s: float,
    root: str | None,
) -> Verdict:
    """The verdict for a run: see the module docstring for the reasoning."""
    if not stages or wall_s <= 0:
        return Verdict("balanced", None, "run the profile for longer", "No element was produced.")
    if not any(s.elements for s in stages):
        return Verdict(
            "balanced",
            None,
            "check that the dataset is not empty (filters, shards, file patterns)",
            "No element was produced: the pipeline ended before its first element.",
        )
    if input_bound < NOT_INPUT_BOUND:
        return Verdict(
            "model",
            None,
            "speed up the training step (model, loss, optimizer); a faster input pipeline "
            "would not make training faster",
            f"The model/step is the bottleneck, not the input pipeline: the consumer waited "
            f"for data only {input_bound:.1%} of the time (under 5% is not input-bound, as "
            f"the TensorFlow Profiler counts it).",
        )
    severity = "highly" if input_bound >= HIGHLY_INPUT_BOUND else "moderately"
    bound = f"The job is {severity} input-bound ({input_bound:.0%} of the time waiting for data)."
    by_label = {s.label: s for s in stages}
    prefetch = _prefetch_verdict(stages, by_label, root, step_s, wall_s, bound)
    if prefetch is not None:
        return prefetch
    b = max(stages, key=lambda s: s.busy_share)
    if b.busy_share < 0.1 * input_bound:
        return Verdict(
            "balanced",
            None,
            "no single stage stands out; profile with more elements",
            f"{bound} No stage was busy for a notable share of that time.",
        )
    cap = "-" if b.capacity is None else f"{b.capacity:.4g}"
    reason = (
        f"{bound} Stage '{b.label}' was busy {b.busy_share:.0%} of the wall time with "
        f"{b.parallelism} thread(s) (at most {cap} elements/s), more than any other stage, "
        f"so it bounds the pipeline's throughput."
    )
    kind, fix = _fix_for(b, stages)
    return Verdict(kind, b.label, fix, reason)


def _consumers(stages: list[StageReport], label: str) -> list[StageReport]:
    return [s for s in stages if label in s.inputs]


def _prefetch_verdict(
    stages: list[StageReport],
    by_label: dict[str, StageReport],
    root: str | None,
    step_s: float,
    wall_s: float,
    bound: str,
) -> Verdict | None:
    """Prefetch fixes: none at the output while the step does real work, or a prefetch
    buffer found empty often although its producers had time to spare (bursty input)."""
    out = by_label.get(root) if root else None
    if out is None:
        return None
    has_prefetch = any(s.op in PREFETCH_OPS for s in stages)
    if step_s > 0.05 * wall_s and not has_prefetch:
        return Verdict(
            "prefetch",
            out.label,
            "end the pipeline with .prefetch(AUTOTUNE) so that producing the next elements "
            "overlaps the training step",
            f"{bound} Nothing overlaps the input with the {step_s:.2f} s of step time: each "
            "element is produced only when the step asks for it.",
        )
    if out.op in PREFETCH_OPS and (out.buffer_empty_fraction or 0.0) >= 0.5:
        producers = [s for s in stages if s is not out]
        busiest = max((s.busy_share for s in producers), default=0.0)
        if busiest < 0.75:
            return Verdict(
                "prefetch",
                out.label,
                f"give '{out.label}' a larger buffer (prefetch(AUTOTUNE) or a larger "
                "buffer_size) to absorb bursts",
                f"{bound} The prefetch buffer was empty at {out.buffer_empty_fraction:.0%} of "
                f"the requests although no producer stage was busy more than {busiest:.0%} "
                "of the time: the input is bursty rather than slow.",
            )
    return None


def _fix_for(b: StageReport, stages: list[StageReport]) -> tuple[str, str]:
    """(verdict kind, fix) for bottleneck stage ``b``."""
    if b.kind in MAP_KINDS or b.op in ("map", "random_map"):
        return _map_fix(b, stages)
    if b.op == "cache":
        return _cache_fix(b)
    if not b.inputs:
        cache = next((s for s in _downstream(stages, b.label) if s.op == "cache"), None)
        if cache is not None:
            return (
                "reduce_work",
                f"'{cache.label}' already keeps its output after one complete pass; this run "
                "was mostly that first pass: profile a later epoch, or read "
                f"'{b.label}' in parallel to speed up the first one",
            )
        repeated = any(s.op == "repeat" for s in stages)
        if repeated:
            return (
                "cache",
                f"add .cache() right after '{b.label}' (and after deterministic maps) so that "
                "later epochs read from memory instead of the source",
            )
        return (
            "parallelize",
            f"read '{b.label}' in parallel (interleave over files with num_parallel_calls="
            "AUTOTUNE), or .cache() it when you iterate over it for several epochs",
        )
    if b.op in ("batch", "padded_batch", "interleave"):
        if b.num_parallel_calls in (None, 1) and b.parallelism <= 1:
            return "parallelize", f"set num_parallel_calls=AUTOTUNE on '{b.label}'"
        requested = "AUTOTUNE" if b.num_parallel_calls == -1 else b.num_parallel_calls
        return (
            "reduce_work",
            f"'{b.label}' already runs in parallel (num_parallel_calls={requested}): make "
            "its work cheaper, give the job more CPU cores, or .cache() its output if it is "
            "the same every epoch",
        )
    return (
        "reduce_work",
        f"make '{b.label}' cheaper, run it in parallel if it accepts num_parallel_calls, or "
        ".cache() the pipeline after it if its output is the same every epoch",
    )


def _downstream(stages: list[StageReport], label: str) -> list[StageReport]:
    """The stages fed, directly or through others, by stage ``label``."""
    out: list[StageReport] = []
    frontier = [label]
    while frontier:
        nxt = [c for c in _consumers(stages, frontier.pop()) if c not in out]
        out += nxt
        frontier += [c.label for c in nxt]
    return out


def _cache_fix(b: StageReport) -> tuple[str, str]:
    """A cache stage is slow either while it fills (its inputs ran) or while it is read."""
    if b.inputs:
        return (
            "reduce_work",
            f"'{b.label}' was filling its cache in this run (a cost paid once); profile a "
            "later pass, which reads the cache, to see the steady state",
        )
    return (
        "prefetch",
        f"'{b.label}' reads its cache and bounds the pipeline: end the pipeline with "
        ".prefetch(AUTOTUNE) so that reading overlaps the step, or cache in memory "
        "(.cache() without a filename) when the data fits in RAM",
    )


def _map_fix(b: StageReport, stages: list[StageReport]) -> tuple[str, str]:
    per_element = b.busy_s / b.elements if b.elements else 0.0
    batched_after = any(c.op in ("batch", "padded_batch") for c in _consumers(stages, b.label))
    if per_element < TINY_ELEMENT_S and batched_after:
        return (
            "batched_map",
            f"move the work of '{b.label}' into a batched map: batch first, then map a "
            f"vectorised function over whole batches (it costs {per_element * 1e6:.1f} µs per "
            "element, mostly per-call overhead)",
        )
    requested = b.num_parallel_calls
    if b.parallelism <= 1 and requested in (None, 1):
        return (
            "parallelize",
            f"set num_parallel_calls=AUTOTUNE on '{b.label}' "
            f"(it runs one call at a time, {per_element * 1e3:.2f} ms per element)",
        )
    if b.cpu_s is not None and b.busy_s > 0 and b.cpu_s < 0.5 * b.busy_s:
        return (
            "parallelize",
            f"'{b.label}' mostly waits rather than computes ({b.cpu_s / b.busy_s:.0%} of its "
            f"busy time on a CPU, with {b.parallelism} calls at once): run more calls than "
            "there are cores (a fixed num_parallel_calls, or a larger "
            "Options.autotune.cpu_budget)",
        )
    if b.parallelism > 1:
        how = f"{b.parallelism} calls"
    else:
        how = "AUTOTUNE calls" if requested == -1 else f"{requested} calls"
    return (
        "reduce_work",
        f"'{b.label}' already runs {how} in parallel: make its function cheaper, give the "
        "job more CPU cores, vectorise it over batches (batch, then map), or .cache() its "
        "output if it is the same every epoch",
    )
