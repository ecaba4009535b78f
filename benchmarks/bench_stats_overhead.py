"""Overhead of per-stage statistics on W1 (``from_tensor_slices(np.arange(1_000_000)) ->
map(x*2+1) -> batch(256)``).

Three runs of the same pipeline, interleaved and repeated; minimum and median wall time:

* unhooked: ``datapipe._context.ITERATOR_HOOKS`` emptied (no statistics code at all);
* stats off: the hook installed, ``Options.stats.enabled`` unset (the default);
* stats on: every stage wrapped and timed.

The issue's targets: stats off within noise of unhooked; stats on at most 10% slower.

Usage: ``python benchmarks/bench_stats_overhead.py [--repeats 7] [--json out.json]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import datapipe as dp
from datapipe._context import ITERATOR_HOOKS
from datapipe._progress import track

N = 1_000_000


def w1(stats: bool) -> dp.Dataset:
    ds = dp.from_tensor_slices(np.arange(N)).map(lambda x: x * 2 + 1).batch(256)
    if stats:
        ds = ds.with_options(dp.Options(stats=dp.StatsOptions(enabled=True)))
    return ds


def run_once(ds: dp.Dataset) -> float:
    t0 = time.perf_counter()
    n = 0
    for batch in ds:
        n += len(batch)
    dt = time.perf_counter() - t0
    assert n == N, n
    return dt


def run_unhooked() -> float:
    saved = list(ITERATOR_HOOKS)
    ITERATOR_HOOKS.clear()
    try:
        return run_once(w1(False))
    finally:
        ITERATOR_HOOKS.extend(saved)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args()
    times: dict[str, list[float]] = {"unhooked": [], "stats_off": [], "stats_on": []}
    run_once(w1(False))  # warm-up (imports, allocator)
    for _ in track(range(args.repeats), desc="W1 x3", enabled=False if args.no_progress else None):
        times["unhooked"].append(run_unhooked())
        times["stats_off"].append(run_once(w1(False)))
        times["stats_on"].append(run_once(w1(True)))
    # On a shared machine the minimum is the steadier estimate of a run's own cost; the
    # median is printed too.
    med = {k: statistics.median(v) for k, v in times.items()}
    best = {k: min(v) for k, v in times.items()}
    result = {
        "elements": N,
        "median_s": med,
        "min_s": best,
        "elements_per_s_min": {k: N / v for k, v in best.items()},
        "overhead_vs_unhooked_min": {k: v / best["unhooked"] - 1 for k, v in best.items()},
        "overhead_vs_unhooked_median": {k: v / med["unhooked"] - 1 for k, v in med.items()},
        "runs_s": times,
    }
    for k in times:
        print(
            f"{k:10s} min {best[k]:.4f} s  {N / best[k] / 1e6:6.2f} M elements/s  overhead "
            f"{100 * (best[k] / best['unhooked'] - 1):+5.1f}%   (median {med[k]:.4f} s, "
            f"{100 * (med[k] / med['unhooked'] - 1):+5.1f}%)"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
