"""Cost of the ``torch.profiler`` ranges per stage (``datapipe.stats.torch_ranges``) while no
profiler records: this tree against a baseline revision, in alternating processes (ABBA order).

* W1: ``from_tensor_slices(np.arange(1_000_000)) -> map(x*2+1) -> batch(256)`` iterated to
  the end (the sum of the batches is checked); per process the best of ``--runs`` in
  wall time and in process CPU time.
* ``iter()``: ``from_tensor_slices(np.arange(1000)) -> map(x*2+1) -> batch(32)``; one
  ``iter()``, one ``next()`` and ``close()`` per round; best of ``--runs`` runs of 200
  rounds, µs per round (the ranges' hook labels each op iterator as it is built).

What the ranges add with no profiler: one check of a flag of torch's profiler module per
call of the public iterator into the chain (and per chunk on worker threads), and one hook
call per op iterator built. The baseline's source is taken with ``git archive`` (default
``main``); both trees run in processes of the same interpreter, alternated, so load on a
shared machine hits both alike. Then, in this tree, W1 inside
``torch.profiler.profile()`` shows the cost while ranges are recorded.

Usage: ``python benchmarks/bench_torch_ranges.py [--baseline main] [--processes 6]
[--runs 5] [--json out.json]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N = 1_000_000


def child(tree: str, runs: int) -> dict:
    sys.path.insert(0, tree)
    import numpy as np

    import datapipe as dp

    assert os.path.dirname(os.path.dirname(os.path.abspath(dp.__file__))) == tree, dp.__file__
    w1 = dp.from_tensor_slices(np.arange(N)).map(lambda x: x * 2 + 1).batch(256)
    small = dp.from_tensor_slices(np.arange(1000)).map(lambda x: x * 2 + 1).batch(32)
    want = N * N  # sum of 2x+1 over 0..N-1
    out: dict = {"w1_wall": [], "w1_cpu": [], "iter_us": []}
    for i in range(runs + 1):  # the first run warms up (imports, allocator)
        t0, c0 = time.perf_counter(), time.process_time()
        total = sum(int(b.sum()) for b in w1)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        assert total == want, total
        t0 = time.perf_counter()
        for _ in range(200):
            it = iter(small)
            next(it)
            it.close()
        per = (time.perf_counter() - t0) / 200 * 1e6
        if i:
            out["w1_wall"].append(wall)
            out["w1_cpu"].append(cpu)
            out["iter_us"].append(per)
    return out


def added_work_bound() -> dict:
    """An upper bound of what this tree adds to one W1 epoch with no profiler, that load on
    the machine cannot blur: how often the added checks run in an epoch (counted) times
    their cost per call (``timeit``, best of 7 x 200,000 calls)."""
    import timeit

    sys.path.insert(0, HERE)
    import numpy as np

    import datapipe as dp
    from datapipe import _batching, _iterator

    calls = {"refill": 0, "stack_leaf": 0}
    check, stack_leaf = _iterator._profiler_records, _batching.stack_leaf

    def counting_check() -> bool:
        calls["refill"] += 1
        return check()

    def counting_stack(*a, **k):
        calls["stack_leaf"] += 1
        return stack_leaf(*a, **k)

    _iterator._profiler_records, _batching.stack_leaf = counting_check, counting_stack
    try:
        w1 = dp.from_tensor_slices(np.arange(N)).map(lambda x: x * 2 + 1).batch(256)
        sum(int(b.sum()) for b in w1)
    finally:
        _iterator._profiler_records, _batching.stack_leaf = check, stack_leaf
    target = _batching._target
    per = {
        "refill": min(timeit.repeat(check, number=200_000, repeat=7)) / 200_000,
        "stack_leaf": min(timeit.repeat(lambda: target.alloc, number=200_000, repeat=7)) / 200_000,
    }
    added = sum(calls[k] * per[k] for k in calls)
    return {"calls": calls, "per_call_s": per, "added_s": added}


def profiled_w1(runs: int) -> dict:
    """W1 in this tree with and without a recording ``torch.profiler.profile()``."""
    sys.path.insert(0, HERE)
    import numpy as np
    from torch.profiler import profile

    import datapipe as dp

    w1 = dp.from_tensor_slices(np.arange(N)).map(lambda x: x * 2 + 1).batch(256)
    times: dict = {"off": [], "profiler": []}
    ranges = 0
    for _ in range(runs):
        t0 = time.perf_counter()
        sum(int(b.sum()) for b in w1)
        times["off"].append(time.perf_counter() - t0)
        with profile() as prof:
            t0 = time.perf_counter()
            sum(int(b.sum()) for b in w1)
            times["profiler"].append(time.perf_counter() - t0)
        ranges = sum(e.name.startswith("datapipe::") for e in prof.events())
    return {"wall_s": times, "ranges_per_epoch": ranges}


def baseline_tree(rev: str, where: str) -> str:
    """The baseline revision's ``datapipe`` (and ``preprocessing``) sources in ``where``."""
    archive = subprocess.run(
        ["git", "-C", HERE, "archive", rev, "datapipe", "preprocessing"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", where], input=archive, check=True)
    return where


def run_child(tree: str, runs: int) -> dict:
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", tree, "--runs", str(runs)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def summary(results: list[dict], key: str) -> tuple[float, float]:
    """(best, median of the per-process bests) of ``key``."""
    bests = [min(r[key]) for r in results]
    return min(bests), statistics.median(bests)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="main", help="git revision to compare with")
    parser.add_argument("--processes", type=int, default=6, help="processes per tree")
    parser.add_argument("--runs", type=int, default=5, help="runs per process")
    parser.add_argument("--json", default=None)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.runs)))
        return
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        base = baseline_tree(args.baseline, tmp)
        res: dict[str, list] = {"baseline": [], "this tree": []}
        trees = {"baseline": base, "this tree": HERE}
        for i in range(args.processes):  # ABBA..., so load changes hit both alike
            for name in ("baseline", "this tree") if i % 2 == 0 else ("this tree", "baseline"):
                res[name].append(run_child(trees[name], args.runs))
    load.append(os.getloadavg()[0])
    prof = profiled_w1(args.runs)
    bound = added_work_bound()
    load.append(os.getloadavg()[0])
    print(f"load average (1 min) at start / after A-B / at end: {load}")
    table = {}
    for key, unit, scale in (("w1_wall", "M el/s", None), ("w1_cpu", "M el/s CPU", None),
                             ("iter_us", "us/round", 1.0)):  # fmt: skip
        row = {}
        for tree, results in res.items():
            best, med = summary(results, key)
            row[tree] = (N / best / 1e6, N / med / 1e6) if scale is None else (best, med)
        table[key] = row
        (b_best, b_med), (t_best, t_med) = row["baseline"], row["this tree"]
        print(
            f"{key:8s} baseline best {b_best:7.2f} median {b_med:7.2f} | this tree best "
            f"{t_best:7.2f} median {t_med:7.2f} {unit} | ratio best {t_best / b_best:.3f} "
            f"median {t_med / b_med:.3f}"
        )
    off, on = min(prof["wall_s"]["off"]), min(prof["wall_s"]["profiler"])
    print(
        f"W1 in this tree: no profiler {N / off / 1e6:.2f} M el/s, inside "
        f"torch.profiler.profile() {N / on / 1e6:.2f} M el/s ({on / off:.2f}x the time; "
        f"{prof['ranges_per_epoch']} datapipe ranges per epoch)"
    )
    c, p = bound["calls"], bound["per_call_s"]
    print(
        f"added per W1 epoch (upper bound): {c['refill']} profiler-flag checks x "
        f"{1e9 * p['refill']:.0f} ns + {c['stack_leaf']} stack_leaf checks x "
        f"{1e9 * p['stack_leaf']:.0f} ns = {1e6 * bound['added_s']:.0f} us, "
        f"{100 * bound['added_s'] / (N / (table['w1_wall']['this tree'][0] * 1e6)):.3f}% "
        "of the best W1 epoch above"
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            out = {"load": load, "ab": res, "table": table, "profiled": prof, "bound": bound}
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
