"""Cost of ``iter(ds)`` on an undistributed pipeline: graph rewrites + building the chain.

Three pipelines, each built once and iterated many times (one ``iter()`` and one
``next()`` per round, then ``close()``), so the figure is the per-``iter()`` cost a
training loop pays once per epoch and a profiler or a spec inference pays every time:

* ``range``: ``dp.range(1000)``;
* ``map_batch``: ``from_tensor_slices(np.arange(1000)) -> map(x*2+1) -> batch(32)``;
* ``train``: ``range(1000) -> shuffle(100, seed=1) -> map(x*2+1) -> batch(32) ->
  prefetch(2)`` (a thread is started and stopped each round).

No worker context is set (no ``RANK``/``WORLD_SIZE``, no ``Options.distribute``): the
auto-shard rewrite resolves the context, finds one worker and leaves the graph alone.
Prints the median and minimum microseconds per round over ``--repeats`` runs of
``--rounds`` rounds.

Usage: ``python benchmarks/bench_iter_overhead.py [--rounds 2000] [--repeats 7]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import datapipe as dp  # noqa: E402


def pipelines() -> dict[str, dp.Dataset]:
    return {
        "range": dp.range(1000),
        "map_batch": dp.Dataset.from_tensor_slices(np.arange(1000)).map(lambda x: x * 2 + 1)
        .batch(32),
        "train": dp.range(1000).shuffle(100, seed=1).map(lambda x: x * 2 + 1).batch(32)
        .prefetch(2),
    }  # fmt: skip


def per_round_us(ds: dp.Dataset, rounds: int) -> float:
    t0 = time.perf_counter()
    for _ in range(rounds):
        it = iter(ds)
        next(it)
        it.close()
    return (time.perf_counter() - t0) / rounds * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000, help="iter() calls per run")
    parser.add_argument("--repeats", type=int, default=7, help="runs per pipeline")
    args = parser.parse_args()
    for name in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"):
        os.environ.pop(name, None)
    print(f"load average: {os.getloadavg()}")
    for name, ds in pipelines().items():
        per_round_us(ds, 50)  # warm up
        runs = [per_round_us(ds, args.rounds) for _ in range(args.repeats)]
        print(f"{name:10s} median {statistics.median(runs):8.1f} us  min {min(runs):8.1f} us")
    print(f"load average: {os.getloadavg()}")


if __name__ == "__main__":
    main()
