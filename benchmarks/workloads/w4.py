"""W4 AUTOTUNE quality: AUTOTUNE's throughput against the best fixed setting from a sweep
-- inline (``num_parallel_calls=None``), threads and worker processes -- for five map
functions:

* cheap: ``x * 2 + 1`` (W1's function, ~0.2 µs);
* numpy (releases the GIL): ``np.sort`` of 200,000 float64 values;
* I/O latency: ``time.sleep(0.002)`` (a 2 ms remote read);
* GIL-bound Python: W6's ``f`` (~210 µs of pure Python);
* JPEG decode: W2's ``load`` (read + decode + bilinear resize 224 + flip).

Each setting runs for the same wall time from a fresh iterator (AUTOTUNE's time to find
its setting counts against it), ``dp.range(...).map(f, n[, executor]).batch(32)``; the
figure is elements per second. The sweep runs every setting once; the best of it then runs
in ``max(repeats, MIN_PAIRS)`` rounds with AUTOTUNE, the two taking turns at going first,
and the target is the median of the per-round ratios (``AUTOTUNE / best``): the two runs of
a round see the same load. The sweep's maximum alone is biased upwards by the noise of
single 5-s runs (~10% on 2 cores), and medians of three runs each still let the load's
drift between runs through: the cheap row, where AUTOTUNE runs the very code of the fixed
inline setting, read 82-102% that way.
"""

from __future__ import annotations

import glob
import os
import statistics
import time

import numpy as np

from .common import Result

THREADS = (1, 2, 3, 4, 8)
MIN_PAIRS = 5
SWEEP_IO = (1, 2, 4, 8, 16, 32, 64)


def _functions():
    from . import w2, w6

    big = np.random.default_rng(0).random(200_000)
    files = sorted(glob.glob(os.path.join(w2.make_photos(), "*.jpg")))

    def cheap(i):
        return i * 2 + 1

    def numpy_sort(i):
        return np.sort(big)[int(i) % 1000]

    def io_latency(i):
        time.sleep(0.002)
        return i

    def jpeg(i):
        return w2.load(files[int(i) % len(files)])[0, 0]

    # (function, thread counts, process counts) of the sweep; inline always
    return {
        "cheap x*2+1": (cheap, (2,), (2,)),
        "numpy sort (GIL released)": (numpy_sort, THREADS, (2,)),
        "2 ms I/O latency": (io_latency, SWEEP_IO, ()),
        "GIL-bound Python": (w6.f, (2, 4), (1, 2)),
        "JPEG decode+resize": (jpeg, THREADS, (2,)),
    }


def _rate(fn, calls, seconds: float, executor=None) -> tuple[float, list]:
    import datapipe as dp

    it = iter(dp.range(10**9).map(fn, num_parallel_calls=calls, executor=executor).batch(32))
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        n += len(next(it))
    dt = time.perf_counter() - t0
    path = []
    if calls == -1:
        stage = it.root.inputs[0]  # the map's stage iterator, under the batch
        path = [(k, o, v) for _, k, o, v in stage.autotune_events]
    it.close()
    return n / dt, path


def run(quick: bool, repeats: int) -> list[tuple[str, dict, str, float, float, list]]:
    """Per function: (name, the sweep's rates with the best's replaced by its median over
    the rounds, the best setting, AUTOTUNE's median rate, the median per-round ratio,
    AUTOTUNE's path in its median run)."""
    import torch

    seconds = 1.5 if quick else 5.0
    pairs = 1 if quick else max(repeats, MIN_PAIRS)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    out = []
    try:
        for name, (fn, sweep, procs) in _functions().items():
            settings = {"inline": (None, None)}
            settings.update({f"t{p}": (p, None) for p in sweep})
            settings.update({f"p{p}": (p, "process") for p in procs})
            fixed = {k: _rate(fn, c, seconds, e)[0] for k, (c, e) in settings.items()}
            best = max(fixed, key=fixed.get)
            runs, autos = _paired(fn, settings[best], seconds, pairs)
            ratio = statistics.median(a[0] / f for a, f in zip(autos, runs))
            fixed[best] = statistics.median(runs)
            autos_sorted = sorted(autos, key=lambda r: r[0])
            rate, path = autos_sorted[len(autos) // 2]
            out.append((name, fixed, best, rate, ratio, path))
    finally:
        torch.set_num_threads(threads)
    return out


def _paired(fn, setting, seconds: float, pairs: int) -> tuple[list[float], list[tuple]]:
    """``pairs`` rounds of (AUTOTUNE, the fixed ``setting``), the two taking turns at
    going first (a run right after another may find the cores warmer or the allocator
    fuller): the fixed setting's rates and AUTOTUNE's (rate, path) per round."""
    import datapipe as dp

    calls, executor = setting
    runs, autos = [], []
    for i in range(pairs):
        if i % 2:
            runs.append(_rate(fn, calls, seconds, executor)[0])
            autos.append(_rate(fn, dp.AUTOTUNE, seconds))
        else:
            autos.append(_rate(fn, dp.AUTOTUNE, seconds))
            runs.append(_rate(fn, calls, seconds, executor)[0])
    return runs, autos


def report(rows) -> tuple[str, list[Result]]:
    lines = [
        f"{'function':<28} {'best fixed':>18} {'AUTOTUNE':>10} {'ratio':>7}  sweep "
        "(t: threads, p: processes) / AUTOTUNE's path"
    ]
    for name, fixed, best, auto, ratio, path in rows:
        sweep = " ".join(f"{k}:{r:,.0f}" for k, r in fixed.items())
        steps = ", ".join(f"{k} {o}->{v}" for k, o, v in path) or "stayed inline"
        lines.append(
            f"{name:<28} {fixed[best]:>10,.0f} ({best:<5}) {auto:>10,.0f} {ratio:>6.0%}"
            f"  [{sweep}] [{steps}]"
        )
    return "\n".join(lines), []
