"""Measurement helpers shared by the workloads: timing, peak memory, checksums, tables."""

from __future__ import annotations

import ctypes
import gc
import os
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes(pid: int | str = "self") -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


def child_pids() -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children") as f:
                out.extend(int(p) for p in f.read().split())
    except OSError:
        pass
    return out


def total_rss() -> int:
    """RSS of this process plus its children (DataLoader workers; shared pages count twice)."""
    return rss_bytes() + sum(rss_bytes(p) for p in child_pids())


class PeakSampler:
    """Samples ``total_rss`` every 5 ms in a thread; ``peak`` is the highest seen."""

    def __init__(self, period_s: float = 0.005):
        self.period_s, self.peak = period_s, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-rss", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, total_rss())
            self._stop.wait(self.period_s)

    def __enter__(self) -> PeakSampler:
        self.peak = total_rss()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, total_rss())


def release_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS, so one system's leftovers
    do not count in the next one's peak."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass


@dataclass
class Result:
    workload: str
    system: str
    count: int
    checksum: float
    seconds: list[float] = field(default_factory=list)
    growth: list[int] = field(default_factory=list)  # peak RSS above the run's start, per run
    unit: str = "elements"
    note: str = ""

    @property
    def peak_growth(self) -> int:
        """Median over runs of the memory a run added at its peak (process + children)."""
        return int(statistics.median(self.growth))

    @property
    def rate(self) -> float:
        return self.count / statistics.median(self.seconds)


def measure(
    workload: str,
    system: str,
    run: Callable[[], tuple[int, float]],
    repeats: int,
    unit: str = "elements",
    note: str = "",
    long_run_s: float = 15.0,
) -> Result:
    """Run ``run() -> (count, checksum)`` ``repeats`` times (once if a run is long); keep
    the median time and the peak RSS (process + children) over all runs."""
    res: Result | None = None
    for _ in range(repeats):
        release_memory()
        start_rss = total_rss()
        with PeakSampler() as mem:
            t0 = time.perf_counter()
            count, checksum = run()
            dt = time.perf_counter() - t0
        if res is None:
            res = Result(workload, system, count, checksum, unit=unit, note=note)
        elif (count, round(checksum, 6)) != (res.count, round(res.checksum, 6)):
            raise RuntimeError(f"{workload}/{system}: runs disagree ({count}, {checksum})")
        res.seconds.append(dt)
        res.growth.append(mem.peak - start_rss)
        if dt > long_run_s:
            break
    assert res is not None
    return res


def check_same(results: list[Result], rel_tol: float = 0.0) -> list[str]:
    """Every system produced the same count and checksum (within ``rel_tol``)."""
    ref = results[0]
    problems = []
    for r in results[1:]:
        same_sum = abs(r.checksum - ref.checksum) <= rel_tol * abs(ref.checksum) + 1e-9
        if r.count != ref.count or not same_sum:
            problems.append(
                f"{r.system}: count {r.count} checksum {r.checksum!r} differs from "
                f"{ref.system}: count {ref.count} checksum {ref.checksum!r}"
            )
    return problems


def table(results: list[Result], resident: int = 0) -> str:
    """One row per system; memory is ``resident`` bytes (inputs that exist before the run,
    e.g. W3's source array) plus the median peak growth of RSS during a run."""
    ours = results[0]
    lines = [
        f"{'system':<42} {'rate (' + ours.unit + '/s)':>22} {'peak MB':>12} "
        f"{'datapipe/this':>14}  runs(s)"
    ]
    for r in results:
        ratio = ours.rate / r.rate if r.rate else float("inf")
        runs = ", ".join(f"{s:.2f}" for s in r.seconds)
        peak = (resident + r.peak_growth) / 2**20
        lines.append(
            f"{r.system:<42} {r.rate:>22,.0f} {peak:>12,.0f} {ratio:>13.2f}x  {runs}"
            + (f"  [{r.note}]" if r.note else "")
        )
    return "\n".join(lines)


def measure_rounds(
    workload: str, systems: list[tuple], repeats: int, unit: str = "elements"
) -> list[Result]:
    """Like ``measure`` for several systems ``(name, run[, note])``, in interleaved rounds
    (system A, B, C, then A, B, C again, ...), so a change of load on the shared machine
    hits every system alike; a system whose run is long (> 15 s) runs once."""
    results: dict[str, Result] = {}
    for r in range(repeats):
        for spec in systems:
            name, run = spec[0], spec[1]
            note = spec[2] if len(spec) > 2 else ""
            if r and name in results and results[name].seconds[0] > 15.0:
                continue
            one = measure(workload, name, run, 1, unit, note)
            if name not in results:
                results[name] = one
            else:
                prev = results[name]
                if (one.count, round(one.checksum, 6)) != (prev.count, round(prev.checksum, 6)):
                    raise RuntimeError(f"{workload}/{name}: runs disagree")
                prev.seconds += one.seconds
                prev.growth += one.growth
    return [results[spec[0]] for spec in systems]


def paired_ratio(ours: Result, base: Result) -> float:
    """Median over rounds of ``ours``'s rate over ``base``'s in the same round.

    ``measure_rounds`` runs the systems in turn, so the two runs of one round saw the same
    load; the median of those per-round ratios is steadier than a ratio of two medians when
    a run lasts a fraction of a second (W1: ~0.3 s) and the load drifts between rounds.
    """
    pairs = list(zip(ours.seconds, base.seconds))
    return statistics.median(b / a * (ours.count / base.count) for a, b in pairs)


def tree_pss() -> int:
    """Proportional set size of this process and its children (psutil), in bytes: a page
    shared by k processes counts 1/k in each, so forked workers' shared pages count once."""
    import psutil

    me = psutil.Process()
    total = 0
    for p in [me, *me.children(recursive=True)]:
        try:
            total += p.memory_full_info().pss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total


class PssSampler(PeakSampler):
    """``PeakSampler`` over ``tree_pss`` (reading smaps costs ~ms: every 20 ms)."""

    def __init__(self, period_s: float = 0.02):
        super().__init__(period_s)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_pss())
            self._stop.wait(self.period_s)

    def __enter__(self) -> PssSampler:
        self.peak = tree_pss()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, tree_pss())
