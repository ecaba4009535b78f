"""Bucketing variable-length sequences: datapipe vs tf.data, and vs plain padded_batch.

The workload: N token sequences (int32), lengths drawn once from a log-normal (median
40 tokens, sigma 0.9, clipped to [1, 512]; seed 0), held in memory. Every contender
delivers numpy batches of shape ``[batch, padded length]`` padded with 0; the consumer
counts the batch's cells and sums its tokens (the sums must agree: padding is 0).

- datapipe ``bucket_by_sequence_length(len, BOUNDARIES, [64] * 7)`` over
  ``from_tensor_slices`` of an object array of the sequences;
- tf.data ``bucket_by_sequence_length(lambda x: tf.shape(x)[0], ...)`` over
  ``from_tensor_slices`` of a ``tf.RaggedTensor`` of the same sequences (native ops, no
  Python per element), delivered with ``as_numpy_iterator``;
- both with ``pad_to_bucket_boundary=True`` (every batch padded to its bucket's boundary
  - 1; sequences of 512 go to a last bucket capped below);
- ``padded_batch(64)`` on both (no bucketing: the reference the bucketing is for);
- datapipe ``first_fit_pack({"tokens": 512}, 64)`` then ``batch(64)`` (Grain's packing):
  padding without bucketing's batch-shape variety, for reference.

Reported per contender: sequences/s (best of the interleaved rounds), padded cells per
real token minus 1 ("padding per token"), and datapipe's rate over tf.data's::

    .venv/bin/python benchmarks/bench_bucketing.py            # --n 50000 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this tree

BOUNDARIES = [8, 16, 32, 64, 128, 256]
BATCH = 64
MAX_LEN = 512


def make_sequences(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    lengths = np.clip(np.round(rng.lognormal(np.log(40), 0.9, n)), 1, MAX_LEN).astype(int)
    return [rng.integers(1, 30000, k, dtype=np.int32) for k in lengths]


def consume(batches) -> tuple[int, int, int]:
    """(sequences, padded cells, token sum) of an iterable of [batch, length] arrays."""
    seqs = cells = total = 0
    for b in batches:
        seqs += b.shape[0]
        cells += b.size
        total += int(b.sum(dtype=np.int64))
    return seqs, cells, total


def packed_consume(batches) -> tuple[int, int, int]:
    seqs = cells = total = 0
    for b in batches:
        ids = b["tokens_segment_ids"]
        seqs += int(ids.max(axis=1).sum())
        cells += b["tokens"].size
        total += int(b["tokens"].sum(dtype=np.int64))
    return seqs, cells, total


def dp_contenders(seqs: list[np.ndarray]) -> dict:
    import datapipe as dp

    held = np.empty(len(seqs), dtype=object)
    for i, s in enumerate(seqs):
        held[i] = s
    src = dp.from_tensor_slices(held)
    sizes = [BATCH] * (len(BOUNDARIES) + 1)
    bounded = [*BOUNDARIES, MAX_LEN + 1]
    return {
        "datapipe bucket_by_sequence_length": lambda: consume(
            src.bucket_by_sequence_length(len, BOUNDARIES, sizes)
        ),
        "datapipe bucket, pad_to_bucket_boundary": lambda: consume(
            src.bucket_by_sequence_length(
                len, bounded, [*sizes, BATCH], pad_to_bucket_boundary=True
            )
        ),
        "datapipe padded_batch(64)": lambda: consume(src.padded_batch(BATCH)),
        "datapipe first_fit_pack(512, 64 bins) + batch(64)": lambda: packed_consume(
            src.map(lambda s: {"tokens": s})
            .first_fit_pack({"tokens": MAX_LEN}, BATCH, shuffle_bins=False)
            .batch(BATCH)
        ),
    }


def tf_contenders(seqs: list[np.ndarray]) -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    ragged = tf.RaggedTensor.from_row_lengths(
        np.concatenate(seqs), np.array([len(s) for s in seqs], dtype=np.int64)
    )
    src = tf.data.Dataset.from_tensor_slices(ragged).map(lambda x: x)  # dense rows
    sizes = [BATCH] * (len(BOUNDARIES) + 1)
    bounded = [*BOUNDARIES, MAX_LEN + 1]
    length = lambda x: tf.shape(x)[0]  # noqa: E731
    return {
        "tf.data bucket_by_sequence_length": lambda: consume(
            src.bucket_by_sequence_length(length, BOUNDARIES, sizes).as_numpy_iterator()
        ),
        "tf.data bucket, pad_to_bucket_boundary": lambda: consume(
            src.bucket_by_sequence_length(
                length, bounded, [*sizes, BATCH], pad_to_bucket_boundary=True
            ).as_numpy_iterator()
        ),
        "tf.data padded_batch(64)": lambda: consume(src.padded_batch(BATCH).as_numpy_iterator()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-tf", action="store_true")
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()}")
    seqs = make_sequences(args.n)
    tokens = sum(len(s) for s in seqs)
    want = sum(int(s.sum(dtype=np.int64)) for s in seqs)
    print(f"{args.n} sequences, {tokens} tokens (mean length {tokens / args.n:.1f})")
    contenders = dp_contenders(seqs)
    if not args.no_tf:
        contenders.update(tf_contenders(seqs))
    best: dict[str, float] = {}
    stats: dict[str, tuple] = {}
    for r in range(args.rounds):  # interleaved: a change of load hits every contender
        for name, run in contenders.items():
            t0 = time.perf_counter()
            n_seqs, cells, total = run()
            dt = time.perf_counter() - t0
            if (n_seqs, total) != (args.n, want):
                raise SystemExit(f"{name}: {n_seqs} sequences, sum {total}; want {args.n}, {want}")
            best[name] = min(best.get(name, dt), dt)
            stats[name] = (cells / tokens - 1,)
        print(f"round {r + 1} done, load average {os.getloadavg()}")
    print("\n| contender | sequences/s | padding per token |")
    print("|---|---:|---:|")
    for name in contenders:
        print(f"| {name} | {args.n / best[name]:,.0f} | {stats[name][0]:.3f} |")
    for a, b in [
        ("datapipe bucket_by_sequence_length", "tf.data bucket_by_sequence_length"),
        ("datapipe bucket, pad_to_bucket_boundary", "tf.data bucket, pad_to_bucket_boundary"),
        ("datapipe padded_batch(64)", "tf.data padded_batch(64)"),
    ]:
        if a in best and b in best:
            print(f"{a} / {b}: {best[b] / best[a]:.2f}x")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
