"""StringLookup and Hashing throughput: preprocessing vs Keras 3 on the same strings.

The workload: N strings drawn once (seed 0) from a Zipf(1.2) distribution over a
vocabulary of V random lowercase words of 3-12 letters (rank r has probability ~ r^-1.2,
so frequent words repeat as in text; ~8% of the draws fall outside the lookup's
vocabulary, which keeps the V/2 most frequent words). They are held as numpy ``U`` arrays
of ``--batch`` strings, the form a ``Dataset.batch`` of text delivers; every contender is
called on the same arrays, one call per batch, and its int64 output is summed (the sums
of ours and Keras's must agree: the outputs are equal).

- ``StringLookup(vocabulary=...)`` (``int`` mode, 1 OOV index) and the same with
  ``num_oov_indices=4`` (OOV strings hashed with FarmHash64);
- ``Hashing(num_bins=2**20)`` (FarmHash64) and ``Hashing(num_bins=2**20, salt=7)``
  (SipHash-2-4);
- Keras 3 with its TensorFlow backend (``keras.layers.StringLookup`` / ``Hashing``, which
  convert the numpy batch to a ``tf.string`` tensor and run TensorFlow's kernels).

Reported: strings/s of each (best of the interleaved rounds) and ours over Keras's, with
the load average: the machine is shared, so figures are noisy; compare the ratios::

    .venv/bin/python benchmarks/bench_lookup_hashing.py     # --n 200000 --batch 1024 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import string
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this tree


def make_words(n_vocab: int, rng: np.random.Generator) -> list[str]:
    letters = np.array(list(string.ascii_lowercase))
    words: set[str] = set()
    while len(words) < n_vocab:
        words.add("".join(rng.choice(letters, rng.integers(3, 13))))
    return sorted(words)


def make_batches(n: int, n_vocab: int, batch: int) -> tuple[list[np.ndarray], list[str]]:
    rng = np.random.default_rng(0)
    words = make_words(n_vocab, rng)
    rng.shuffle(words)  # rank order unrelated to spelling
    p = 1.0 / np.arange(1, n_vocab + 1) ** 1.2
    draws = rng.choice(n_vocab, size=n, p=p / p.sum())
    strings = np.array(words)[draws]
    return [strings[i : i + batch] for i in range(0, n, batch)], words[: n_vocab // 2]


def contenders(vocab: list[str], with_keras: bool) -> dict[str, tuple]:
    import preprocessing as pp

    ours = {
        "StringLookup": pp.StringLookup(vocabulary=vocab),
        "StringLookup, 4 OOV buckets": pp.StringLookup(vocabulary=vocab, num_oov_indices=4),
        "Hashing": pp.Hashing(num_bins=2**20),
        "Hashing, salt": pp.Hashing(num_bins=2**20, salt=7),
    }
    theirs = dict.fromkeys(ours)
    if with_keras:
        import keras

        L = keras.layers
        theirs = {
            "StringLookup": L.StringLookup(vocabulary=vocab),
            "StringLookup, 4 OOV buckets": L.StringLookup(vocabulary=vocab, num_oov_indices=4),
            "Hashing": L.Hashing(num_bins=2**20),
            "Hashing, salt": L.Hashing(num_bins=2**20, salt=7),
        }
    return {name: (ours[name], theirs[name]) for name in ours}


def run(layer, batches) -> tuple[float, int]:
    start = time.perf_counter()
    total = 0
    for b in batches:
        total += int(np.asarray(layer(b)).sum(dtype=np.int64))
    return time.perf_counter() - start, total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--vocab", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-keras", action="store_true")
    args = parser.parse_args(argv)

    batches, vocab = make_batches(args.n, args.vocab, args.batch)
    layers = contenders(vocab, not args.no_keras)
    best: dict[tuple[str, str], float] = {}
    for ours, theirs in layers.values():
        run(ours, batches[:2])  # warm-up: imports, first allocations
        if theirs is not None:
            run(theirs, batches[:2])
    for _ in range(args.rounds):  # interleaved, so load changes hit both sides alike
        for name, (ours, theirs) in layers.items():
            t, s_ours = run(ours, batches)
            best[(name, "ours")] = min(best.get((name, "ours"), np.inf), t)
            if theirs is not None:
                t, s_theirs = run(theirs, batches)
                best[(name, "keras")] = min(best.get((name, "keras"), np.inf), t)
                assert s_ours == s_theirs, f"{name}: outputs differ ({s_ours} vs {s_theirs})"
    print(
        f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (cores: {os.cpu_count()})"
    )
    print(
        f"{args.n:,} strings in batches of {args.batch}, "
        f"vocabulary {len(vocab):,} of {args.vocab:,} words"
    )
    print(
        f"{'layer':32s} {'ours (strings/s)':>18s} {'Keras 3 (strings/s)':>20s} {'ours/Keras':>10s}"
    )
    for name in layers:
        ours_rate = args.n / best[(name, "ours")]
        if (name, "keras") in best:
            keras_rate = args.n / best[(name, "keras")]
            print(
                f"{name:32s} {ours_rate:18,.0f} {keras_rate:20,.0f} {ours_rate / keras_rate:10.2f}"
            )
        else:
            print(f"{name:32s} {ours_rate:18,.0f} {'-':>20s} {'-':>10s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
