"""What two cores can do with W2's per-image work, without any pipeline around it.

    .venv/bin/python benchmarks/bench_w2_ceiling.py [--images 800] [--rounds 3]

``w2.load`` (read, decode, resize 224x224, flip; torch's and OpenCV's intra-op threads at 1)
over the same photos: in one process, in two processes at once (fork; each does all the
photos), and in two threads of one process. Prints images/s (medians of ``--rounds``), the
ratio to one process, and CPU time per image. The two-process figure is the ceiling of any
two-worker W2 pipeline here before its consumer's work (batching, the checksum).
"""

from __future__ import annotations

import argparse
import glob
import multiprocessing as mp
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from workloads import w2  # noqa: E402


def _load_all(files: list[str]) -> float:
    """Load every photo; the CPU seconds this thread used."""
    import numpy as np

    rng = np.random.default_rng(0)
    start = time.thread_time()
    for path in files:
        w2.load(path, rng)
    return time.thread_time() - start


def _child(files: list[str], ready, go, out) -> None:
    _load_all(files[:50])  # warm: imports, allocator
    ready.put(1)
    go.wait()
    out.put(_load_all(files))


def in_processes(files: list[str], n: int) -> tuple[float, float]:
    """(images/s of n processes started together, CPU µs per image)."""
    ctx = mp.get_context("fork")
    ready, out, go = ctx.SimpleQueue(), ctx.SimpleQueue(), ctx.Event()
    procs = [ctx.Process(target=_child, args=(files, ready, go, out)) for _ in range(n)]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get()
    t0 = time.perf_counter()
    go.set()
    cpu = [out.get() for _ in procs]
    for p in procs:
        p.join()
    wall = time.perf_counter() - t0
    return n * len(files) / wall, statistics.mean(cpu) / len(files) * 1e6


def in_threads(files: list[str], n: int) -> tuple[float, float]:
    """(images/s of n threads of this process, CPU µs per image)."""
    cpu: list[float] = []
    threads = [threading.Thread(target=lambda: cpu.append(_load_all(files))) for _ in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return n * len(files) / wall, statistics.mean(cpu) / len(files) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=800)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    import cv2
    import torch

    cv2.setNumThreads(1)
    torch.set_num_threads(1)
    files = sorted(glob.glob(os.path.join(w2.make_photos(), "*.jpg")))[: args.images]
    _load_all(files[:50])
    print(f"{len(files)} photos, load average at start {os.getloadavg()[0]:.2f}")
    rows: dict[str, list[tuple[float, float]]] = {
        "1 process": [],
        "2 processes": [],
        "2 threads": [],
    }
    for _ in range(args.rounds):  # in turn, so a change of load hits every row alike
        rows["1 process"].append(in_processes(files, 1))
        rows["2 processes"].append(in_processes(files, 2))
        rows["2 threads"].append(in_threads(files, 2))
    base = statistics.median(r for r, _ in rows["1 process"])
    for name, runs in rows.items():
        rate = statistics.median(r for r, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(
            f"{name:<12} {rate:>7,.0f} images/s  {rate / base:.2f}x one process  "
            f"CPU {cpu:,.0f} µs/image  runs {[round(r) for r, _ in runs]}"
        )
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
