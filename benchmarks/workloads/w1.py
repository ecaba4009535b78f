"""W1 per-element overhead: int64 scalars, ``from_tensor_slices -> map(x*2+1) -> batch(256)``.

Every system runs the same Python function per element (``x * 2 + 1``): datapipe's
``map``, ``tf.numpy_function`` inside tf.data's ``map`` (the per-element Python map; a
traced TF graph is also shown, for reference), and a ``Dataset.__getitem__`` for torch's
DataLoader. Checksum: the sum of all output values.
"""

from __future__ import annotations

import numpy as np

from .common import Result, measure_rounds

N = 1_000_000
BATCH = 256
# A run lasts ~0.3 s, so one of them is at the mercy of a load spike: W1 runs at least this
# many rounds (a system whose run is long, tf.data's numpy_function, still runs once).
MIN_REPEATS = 9


def f(x):
    return x * 2 + 1


def _sum_batches(batches) -> tuple[int, float]:
    count, total = 0, 0
    for b in batches:
        a = np.asarray(b)
        count += a.shape[0]
        total += int(a.sum())
    return count, float(total)


def run_datapipe(data: np.ndarray, autotune: bool = False, prefetch: bool = False):
    import datapipe as dp

    def run():
        ds = dp.from_tensor_slices(data)
        ds = ds.map(f, num_parallel_calls=dp.AUTOTUNE) if autotune else ds.map(f)
        ds = ds.batch(BATCH)
        return _sum_batches(ds.prefetch(dp.AUTOTUNE) if prefetch else ds)

    return run


def run_generator(data: np.ndarray):
    def run():
        values = data.tolist()  # plain Python ints, as a bare generator would see them

        def batches():
            buf = []
            for x in values:
                buf.append(x * 2 + 1)
                if len(buf) == BATCH:
                    yield buf
                    buf = []
            if buf:
                yield buf

        count = total = 0
        for b in batches():
            count += len(b)
            total += sum(b)
        return count, float(total)

    return run


def run_torch(data: np.ndarray, workers: int):
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Scalars(Dataset):
        def __len__(self):
            return len(data)

        def __getitem__(self, i):
            return f(data[i])

    def run():
        loader = DataLoader(Scalars(), batch_size=BATCH, num_workers=workers)
        count, total = 0, 0
        for b in loader:
            count += b.shape[0]
            total += int(torch.sum(b))
        return count, float(total)

    return run


def run_tf(data: np.ndarray, graph: bool, autotune: bool):
    import tensorflow as tf

    def run():
        ds = tf.data.Dataset.from_tensor_slices(data)
        calls = tf.data.AUTOTUNE if autotune else None
        if graph:
            ds = ds.map(lambda x: x * 2 + 1, num_parallel_calls=calls)
        else:
            ds = ds.map(
                lambda x: tf.numpy_function(f, [x], tf.int64, stateful=False),
                num_parallel_calls=calls,
            )
        return _sum_batches(b.numpy() for b in ds.batch(BATCH))

    return run


def run(quick: bool, repeats: int, with_tf: bool = True) -> list[Result]:
    n = 100_000 if quick else N
    data = np.arange(n, dtype=np.int64)
    systems = [
        ("datapipe map (sequential)", run_datapipe(data)),
        ("datapipe map(AUTOTUNE)", run_datapipe(data, True)),
        ("datapipe map(AUTOTUNE) .prefetch(AUTOTUNE)", run_datapipe(data, True, True)),
        ("bare Python generator", run_generator(data)),
        ("torch DataLoader num_workers=0", run_torch(data, 0)),
        ("torch DataLoader num_workers=2", run_torch(data, 2)),
    ]
    if with_tf:
        systems += [
            ("tf.data map(numpy_function)", run_tf(data, False, False)),
            ("tf.data map(numpy_function, AUTOTUNE)", run_tf(data, False, True)),
            (
                "tf.data map(graph op, AUTOTUNE)",
                run_tf(data, True, True),
                "reference: no Python per element",
            ),
        ]
    return measure_rounds("W1", systems, repeats if quick else max(repeats, MIN_REPEATS))
