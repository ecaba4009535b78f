"""W3 shuffle memory: 200,000 rows of 3 KiB float32 (768 values), ``shuffle(10_000) ->
batch(128)``; throughput and peak RSS.

Memory is reported as the peak RSS of the process (plus DataLoader workers) during the
run minus the RSS before the source array existed, so it counts the source (600 MB) plus
whatever the system copies and buffers. Targets: datapipe <= source + 1.5x the shuffle
buffer's bytes. torch's DataLoader has no buffer shuffle; it runs ``shuffle=True`` (a
random permutation sampler) over the same array, the nearest thing a torch user writes.
Checksum: the sum of all values (float64), compared within 1e-9 relative.
"""

from __future__ import annotations

import numpy as np

from .common import Result, measure_rounds, release_memory, total_rss

ROWS = 200_000
WIDTH = 768  # 3 KiB of float32
BUFFER = 10_000
BATCH = 128


def _consume(batches) -> tuple[int, float]:
    count, total = 0, 0.0
    for b in batches:
        a = np.asarray(b)
        count += a.shape[0]
        total += float(a.sum(dtype=np.float64))
    return count, total


def run_datapipe(data):
    import datapipe as dp

    def run():
        ds = dp.from_tensor_slices(data).shuffle(BUFFER, seed=0).batch(BATCH)
        return _consume(ds)

    return run


def run_python_buffer(data):
    def run():
        rng = np.random.default_rng(0)
        buf, out, count, total = [], [], 0, 0.0
        picks = iter(rng.integers(0, BUFFER, size=len(data)).tolist())
        for row in data:
            if len(buf) < BUFFER:
                buf.append(row)
                continue
            i = next(picks)
            out.append(buf[i])
            buf[i] = row
            if len(out) == BATCH:
                a = np.stack(out)
                count, total, out = count + len(a), total + float(a.sum(dtype=np.float64)), []
        rng.shuffle(buf)
        out += buf
        for s in range(0, len(out), BATCH):
            a = np.stack(out[s : s + BATCH])
            count, total = count + len(a), total + float(a.sum(dtype=np.float64))
        return count, total

    return run


def run_torch(data, workers: int):
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Rows(Dataset):
        def __len__(self):
            return len(data)

        def __getitem__(self, i):
            return data[i]

    def run():
        g = torch.Generator().manual_seed(0)
        loader = DataLoader(
            Rows(), batch_size=BATCH, shuffle=True, num_workers=workers, generator=g
        )
        return _consume(b.numpy() for b in loader)

    return run


def run_tf(data):
    import tensorflow as tf

    def run():
        ds = tf.data.Dataset.from_tensor_slices(data).shuffle(BUFFER, seed=0).batch(BATCH)
        return _consume(b.numpy() for b in ds)

    return run


def run(quick: bool, repeats: int, with_tf: bool = True) -> tuple[list[Result], int, int]:
    """Returns the results, the RSS before the source existed, and the source's bytes."""
    rows = 40_000 if quick else ROWS
    import torch  # noqa: F401

    import datapipe  # noqa: F401 - libraries load before the baseline is taken

    if with_tf:
        import tensorflow  # noqa: F401
    release_memory()
    base = total_rss()
    data = np.random.default_rng(0).random((rows, WIDTH), dtype=np.float32)
    systems = [
        ("datapipe shuffle(10k)", run_datapipe(data)),
        ("plain Python buffer shuffle", run_python_buffer(data)),
        ("torch DataLoader shuffle=True nw=0", run_torch(data, 0)),
        ("torch DataLoader shuffle=True nw=2", run_torch(data, 2)),
    ]
    if with_tf:
        systems.append(("tf.data shuffle(10k)", run_tf(data)))
    out = measure_rounds("W3", systems, repeats, "rows")
    nbytes = data.nbytes
    del data
    release_memory()
    return out, base, nbytes
