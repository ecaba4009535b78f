"""W6 GIL-bound map: a pure-Python function (~210 µs per element here, holding the GIL the
whole time) over 20,000 integer elements, then batch 64.

``f(x)``: 2,000 steps of ``s = (s * 31 + i) % 1000003`` from ``s = x``; the same function
in every system: datapipe's ``map`` (sequential, AUTOTUNE, 2 threads, 2 worker processes),
a ``Dataset.__getitem__`` for torch's DataLoader (batch_size 64, default collate), and
Grain's ``MapDataset.range(N).map(f).batch(64)`` prefetched by 2 worker processes
(``mp_prefetch``). Checksum: the sum of all outputs.
"""

from __future__ import annotations

import numpy as np

from .common import Result, measure_rounds

N = 20_000
BATCH = 64
STEPS = 2_000


def f(x):
    s = int(x)
    for i in range(STEPS):
        s = (s * 31 + i) % 1000003
    return s


def _sum_batches(batches) -> tuple[int, float]:
    count, total = 0, 0
    for b in batches:
        a = np.asarray(b)
        count += a.shape[0]
        total += int(a.sum())
    return count, float(total)


def run_datapipe(n: int, calls=None, executor=None):
    import datapipe as dp

    def run():
        ds = dp.range(n).map(f, num_parallel_calls=calls, executor=executor)
        return _sum_batches(ds.batch(BATCH))

    return run


def run_torch(n: int, workers: int):
    from torch.utils.data import DataLoader, Dataset

    class Items(Dataset):
        def __len__(self):
            return n

        def __getitem__(self, i):
            return f(i)

    def run():
        return _sum_batches(DataLoader(Items(), batch_size=BATCH, num_workers=workers))

    return run


def run_grain(n: int, workers: int):
    import grain.python as gp

    def run():
        ds = gp.MapDataset.range(n).map(f).batch(BATCH).to_iter_dataset()
        if workers:
            ds = ds.mp_prefetch(gp.MultiprocessingOptions(num_workers=workers))
        return _sum_batches(ds)

    return run


def grain_available() -> bool:
    try:
        import grain.python  # noqa: F401
    except Exception:  # noqa: BLE001 - not installed (or not importable here)
        return False
    return True


def run(quick: bool, repeats: int) -> list[Result]:
    import datapipe as dp

    n = 4_000 if quick else N
    systems = [
        ("datapipe map(AUTOTUNE)", run_datapipe(n, dp.AUTOTUNE)),
        ("datapipe map (sequential)", run_datapipe(n)),
        ("datapipe map(2, executor='process')", run_datapipe(n, 2, "process")),
        ("datapipe map(2 threads)", run_datapipe(n, 2, "thread")),
        ("torch DataLoader num_workers=0", run_torch(n, 0)),
        ("torch DataLoader num_workers=2", run_torch(n, 2)),
    ]
    if grain_available():
        systems.append(("Grain mp_prefetch(num_workers=2)", run_grain(n, 2)))
    return measure_rounds("W6", systems, repeats)
