"""W7 process-worker memory on W2: the peak PSS (proportional set size, psutil) of the
process tree while W2's pipeline runs -- ``list_files -> read -> decode (Pillow) -> resize
224 bilinear (torch) -> random flip -> batch 64 -> prefetch`` over 2,000 photos, the
function being ``workloads/w2.py:load`` as it is -- with datapipe's worker processes
(``random_map(load, num_parallel_calls=2, executor="process")``) against torch's
``DataLoader(num_workers=2)`` (and datapipe's threads and AUTOTUNE for reference).

PSS counts a page shared by k processes 1/k in each, so forked workers' shared pages
(the interpreter, numpy, torch) count once; the figures are the tree's peak PSS during a
run and its rise above the tree's PSS just before it.
"""

from __future__ import annotations

import gc
import os
import statistics
import time

from . import w2
from .common import PssSampler, release_memory, tree_pss


def run_datapipe(folder: str, calls, executor=None):
    import datapipe as dp

    def run():
        ds = dp.list_files(os.path.join(folder, "*.jpg"), shuffle=False)
        ds = ds.random_map(w2.load, seed=0, num_parallel_calls=calls, executor=executor)
        return w2._consume(ds.batch(w2.BATCH).prefetch(dp.AUTOTUNE))

    return run


def systems(folder: str) -> list[tuple]:
    return [
        ("datapipe random_map(2, executor='process')", run_datapipe(folder, 2, "process")),
        ("torch DataLoader num_workers=2", w2.run_torch(folder, 2)),
        ("datapipe random_map(2 threads)", run_datapipe(folder, 2, "thread")),
        ("datapipe random_map(AUTOTUNE)", run_datapipe(folder, -1)),
    ]


def run(quick: bool, repeats: int) -> list[dict]:
    import torch

    folder = w2.make_photos(200 if quick else w2.N_IMAGES)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread per image, as W2: parallelism from the pipeline
    try:
        return _run(folder, repeats)
    finally:
        torch.set_num_threads(threads)


def _run(folder: str, repeats: int) -> list[dict]:
    rows: dict[str, dict] = {}
    for _ in range(max(1, repeats)):
        for name, fn in systems(folder):
            release_memory()
            gc.collect()
            base = tree_pss()
            with PssSampler() as mem:
                t0 = time.perf_counter()
                count, checksum = fn()
                dt = time.perf_counter() - t0
            r = rows.setdefault(name, {"count": count, "sum": checksum, "s": [], "peak": [],
                                       "rise": []})  # fmt: skip
            r["s"].append(dt)
            r["peak"].append(mem.peak)
            r["rise"].append(mem.peak - base)
    out = []
    for name, r in rows.items():
        med = statistics.median
        out.append({"system": name, "count": r["count"], "checksum": r["sum"],
                    "rate": r["count"] / med(r["s"]), "peak": med(r["peak"]),
                    "rise": med(r["rise"])})  # fmt: skip
    return out


def table(rows: list[dict]) -> str:
    lines = [f"{'system':<44} {'images/s':>9} {'peak PSS MB':>12} {'rise MB':>8}"]
    for r in rows:
        lines.append(
            f"{r['system']:<44} {r['rate']:>9,.0f} {r['peak'] / 2**20:>12,.0f} "
            f"{r['rise'] / 2**20:>8,.0f}"
        )
    return "\n".join(lines)
