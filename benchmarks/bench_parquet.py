"""W5: a Parquet file read as numpy batches — raw pyarrow vs datapipe vs tf.data.

The file: 1,000,000 rows, an int64 ``label`` and 64 float32 ``features`` as a fixed-size
list, row groups of 50,000 (written once, reused). Each contender delivers 1,024-row
batches as numpy arrays ``label (1024,)`` and ``features (1024, 64)`` and the same
consumer work (a checksum) runs on each batch; the checksums must agree.

- raw: ``pyarrow.parquet.ParquetFile.iter_batches(1024)`` + ``to_numpy`` per column;
- datapipe: ``datapipe.ParquetDataset(path, batch_size=1024)``;
- tf.data: ``tf.data.Dataset.from_generator`` over the raw batches (tensorflow-cpu).

Rounds are interleaved and each contender's best round is kept (other jobs on a shared
machine slow all contenders alike)::

    .venv/bin/python benchmarks/bench_parquet.py                 # --rounds 6 --rows 1000000
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

BATCH, FEATURES, ROW_GROUP = 1024, 64, 50_000


def make_file(path: str, rows: int) -> str:
    if os.path.exists(path) and pq.read_metadata(path).num_rows == rows:
        return path
    rng = np.random.default_rng(0)
    label = rng.integers(0, 10, rows).astype(np.int64)
    feats = rng.standard_normal((rows, FEATURES)).astype(np.float32)
    table = pa.table(
        {"label": label, "features": pa.FixedSizeListArray.from_arrays(feats.ravel(), FEATURES)}
    )
    tmp = f"{path}.tmp"
    pq.write_table(table, tmp, row_group_size=ROW_GROUP)
    os.replace(tmp, path)
    return path


def checksum(state: list, label: np.ndarray, feats: np.ndarray) -> None:
    state[0] += int(label.sum())
    state[1] += float(feats[:, 0].sum(dtype=np.float64))
    state[2] += len(label)


def raw_batches(path: str):
    for b in pq.ParquetFile(path).iter_batches(BATCH):
        yield b.column(0).to_numpy(), b.column(1).flatten().to_numpy().reshape(-1, FEATURES)


def run_raw(path: str) -> list:
    s = [0, 0.0, 0]
    for label, feats in raw_batches(path):
        checksum(s, label, feats)
    return s


def run_datapipe(path: str) -> list:
    import datapipe as dp

    s = [0, 0.0, 0]
    for b in dp.ParquetDataset(path, batch_size=BATCH):
        checksum(s, b["label"], b["features"])
    return s


def make_tf(path: str):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        import tensorflow as tf
    except ImportError:
        return None
    sig = (
        tf.TensorSpec((None,), tf.int64),
        tf.TensorSpec((None, FEATURES), tf.float32),
    )

    def run_tf(p: str) -> list:
        s = [0, 0.0, 0]
        ds = tf.data.Dataset.from_generator(lambda: raw_batches(p), output_signature=sig)
        for label, feats in ds.as_numpy_iterator():
            checksum(s, label, feats)
        return s

    return run_tf


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--path", default=os.path.join(tempfile.gettempdir(), "datapipe_w5.parquet"))
    args = ap.parse_args(argv)
    path = make_file(args.path, args.rows)
    contenders = {"raw pyarrow iter_batches": run_raw, "datapipe ParquetDataset": run_datapipe}
    tf_run = make_tf(path)
    if tf_run is not None:
        contenders["tf.data from_generator"] = tf_run
    for fn in contenders.values():  # warm up: page cache, imports, first-use costs
        fn(path)
    best: dict[str, float] = {}
    sums: dict[str, list] = {}
    for _ in range(args.rounds):
        for name, fn in contenders.items():
            t0 = time.perf_counter()
            sums[name] = fn(path)
            rate = args.rows / (time.perf_counter() - t0)
            best[name] = max(best.get(name, 0.0), rate)
    print(f"W5: {args.rows:,} rows, batches of {BATCH}, best of {args.rounds} rounds")
    for name, rate in best.items():
        print(f"  {name:28s} {rate / 1e6:6.3f} M rows/s   checksum {sums[name]}")
    ours, raw = best["datapipe ParquetDataset"], best["raw pyarrow iter_batches"]
    print(f"  datapipe / raw pyarrow: {ours / raw:.2f} (target >= 0.90)")
    if tf_run is not None:
        print(f"  datapipe / tf.data: {ours / best['tf.data from_generator']:.2f} (target >= 2)")
    first = next(iter(sums.values()))
    same = all(
        s[0] == first[0] and s[2] == first[2] and np.isclose(s[1], first[1]) for s in sums.values()
    )
    print(f"  checksums equal: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
