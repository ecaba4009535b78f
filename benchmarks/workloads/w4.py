"""W4 AUTOTUNE quality: AUTOTUNE's throughput against the best fixed ``num_parallel_calls``
from a sweep, for three map functions:

* numpy (releases the GIL): ``np.sort`` of 200,000 float64 values;
* I/O latency: ``time.sleep(0.002)`` (a 2 ms remote read);
* JPEG decode: W2's Pillow read + decode + resize 224 + flip.

Each setting runs for the same wall time from a fresh iterator (AUTOTUNE's time to find
its setting counts against it), ``dp.range(...).map(f, n).batch(32)``; the figure is
elements per second.
"""

from __future__ import annotations

import glob
import os
import time

import numpy as np

from .common import Result

SWEEP = (1, 2, 3, 4, 6, 8, 16, 32, 64)


def _functions():
    from . import w2

    big = np.random.default_rng(0).random(200_000)
    files = sorted(glob.glob(os.path.join(w2.make_photos(), "*.jpg")))

    def numpy_sort(i):
        return np.sort(big)[int(i) % 1000]

    def io_latency(i):
        time.sleep(0.002)
        return i

    def jpeg(i):
        return w2.load(files[int(i) % len(files)])[0, 0]

    return {
        "numpy sort (GIL released)": (numpy_sort, (1, 2, 3, 4, 8)),
        "2 ms I/O latency": (io_latency, SWEEP),
        "JPEG decode+resize": (jpeg, (1, 2, 3, 4, 8)),
    }


def _rate(fn, calls, seconds: float) -> tuple[float, list]:
    import datapipe as dp

    it = iter(dp.range(10**9).map(fn, num_parallel_calls=calls).batch(32))
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        n += len(next(it))
    dt = time.perf_counter() - t0
    history = list(it._root.inputs[0].stage.history) if calls == -1 else []
    it.close()
    return n / dt, history


def run(quick: bool, repeats: int) -> list[tuple[str, dict, float, list]]:
    import datapipe as dp

    seconds = 1.5 if quick else 6.0
    out = []
    for name, (fn, sweep) in _functions().items():
        fixed = {p: _rate(fn, p, seconds)[0] for p in sweep}
        autos = [_rate(fn, dp.AUTOTUNE, seconds) for _ in range(max(1, repeats))]
        autos.sort(key=lambda r: r[0])
        rate, history = autos[len(autos) // 2]
        out.append((name, fixed, rate, history))
    return out


def report(rows) -> tuple[str, list[Result]]:
    lines = [
        f"{'function':<28} {'best fixed':>16} {'AUTOTUNE':>10} {'ratio':>7}  sweep / AUTOTUNE path"
    ]
    for name, fixed, auto, history in rows:
        best_p = max(fixed, key=fixed.get)
        ratio = auto / fixed[best_p]
        sweep = " ".join(f"{p}:{r:,.0f}" for p, r in fixed.items())
        lines.append(
            f"{name:<28} {fixed[best_p]:>10,.0f} (p={best_p:<2}) {auto:>10,.0f} {ratio:>6.0%}"
            f"  [{sweep}] auto {history}"
        )
    return "\n".join(lines), []
