"""StringLookup and Hashing throughput: preprocessing (compiled bindings / numpy) vs Keras 3.

The workload: N strings drawn once (seed 0) from a Zipf(1.2) distribution over a
vocabulary of V random lowercase words of 3-12 letters (rank r has probability ~ r^-1.2,
so frequent words repeat as in text; ~8% of the draws fall outside the lookup's
vocabulary, which keeps the V/2 most frequent words). They are held as numpy ``U`` arrays
of ``--batch`` strings, the form a ``Dataset.batch`` of text delivers; every contender is
called on the same arrays, one call per batch, and its int64 output is summed (the sums
of all contenders of a layer must agree: the outputs are equal).

Layers:

- ``StringLookup(vocabulary=...)`` (``int`` mode, 1 OOV index) and the same with
  ``num_oov_indices=4`` (OOV strings hashed with FarmHash64);
- ``Hashing(num_bins=2**20)`` (FarmHash64) and ``Hashing(num_bins=2**20, salt=7)``
  (SipHash-2-4);

each as ours with the compiled bindings of the ``hashing`` extra (pyfarmhash, siphashc;
what runs when they are installed), ours on the numpy code (the bindings switched off),
and Keras 3 with its TensorFlow backend (``keras.layers.StringLookup`` / ``Hashing``,
which convert the numpy batch to a ``tf.string`` tensor and run TensorFlow's kernels).
Then the bare 64-bit hashes of the same batches: numpy, the bindings (and siphash24,
measured, not adopted), ``tf.strings.to_hash_bucket_fast`` / ``_strong``.

Reported: strings/s of each (best of the alternating rounds; who goes first rotates) and
the ratios, with the load average at the start and the end: the machine is shared, so
figures are noisy; compare the ratios::

    .venv/bin/python benchmarks/bench_lookup_hashing.py     # --n 200000 --batch 1024 --rounds 5
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


LAYERS = ("StringLookup", "StringLookup, 4 OOV buckets", "Hashing", "Hashing, salt")


def _ours(vocab: list[str]) -> dict[str, object]:
    import preprocessing as pp

    return {
        "StringLookup": pp.StringLookup(vocabulary=vocab),
        "StringLookup, 4 OOV buckets": pp.StringLookup(vocabulary=vocab, num_oov_indices=4),
        "Hashing": pp.Hashing(num_bins=2**20),
        "Hashing, salt": pp.Hashing(num_bins=2**20, salt=7),
    }


def _keras(vocab: list[str]) -> dict[str, object]:
    import keras

    L = keras.layers
    return {
        "StringLookup": L.StringLookup(vocabulary=vocab),
        "StringLookup, 4 OOV buckets": L.StringLookup(vocabulary=vocab, num_oov_indices=4),
        "Hashing": L.Hashing(num_bins=2**20),
        "Hashing, salt": L.Hashing(num_bins=2**20, salt=7),
    }


def _numpy_path(layer):
    """The layer with the compiled bindings switched off (``_hash_native.disabled``)."""
    from preprocessing import _hash_native

    def call(batch):
        with _hash_native.disabled():
            return layer(batch)

    return call


def contenders(vocab: list[str], with_keras: bool) -> dict[str, dict[str, object]]:
    """``{layer: {system: callable}}``: ours with the bindings (what ``auto`` picks when
    the ``hashing`` extra is installed), ours on the numpy code, Keras 3."""
    from preprocessing import _hash_native

    ours = _ours(vocab)
    keras = _keras(vocab) if with_keras else {}
    out: dict[str, dict[str, object]] = {}
    for name in LAYERS:
        row: dict[str, object] = {}
        if _hash_native.available(7 if "salt" in name else None):
            row["ours, bindings"] = ours[name]
        row["ours, numpy"] = _numpy_path(ours[name])
        if name in keras:
            row["Keras 3"] = keras[name]
        out[name] = row
    return out


def hash_functions(salt_key: bytes) -> dict[str, dict[str, object]]:
    """The bare 64-bit hashes (no layer, no modulo) on one batch: our numpy code, the
    bindings (pyfarmhash; siphashc, adopted; siphash24, measured: a hasher object per
    call), TensorFlow's ``to_hash_bucket_fast/strong`` with 2**63 - 1 buckets."""
    from preprocessing import _hash

    fns: dict[str, dict[str, object]] = {"Fingerprint64": {}, "SipHash-2-4": {}}
    fns["Fingerprint64"]["numpy"] = lambda b: _hash.hash_strings_numpy(b, None, backend="numpy")
    fns["SipHash-2-4"]["numpy"] = lambda b: _hash.hash_strings_numpy(b, (7, 7), backend="numpy")
    try:
        import farmhash

        fp = farmhash.fingerprint64
        fns["Fingerprint64"]["pyfarmhash"] = lambda b: np.fromiter(
            map(fp, b.tolist()), np.uint64, len(b)
        )
    except ImportError:
        pass
    try:
        import siphashc

        sc = siphashc.siphash
        fns["SipHash-2-4"]["siphashc"] = lambda b: np.fromiter(
            (sc(salt_key, s) for s in b.tolist()), np.uint64, len(b)
        )
    except ImportError:
        pass
    try:
        import siphash24

        s24 = siphash24.siphash24
        fns["SipHash-2-4"]["siphash24"] = lambda b: np.fromiter(
            (s24(s.encode(), key=salt_key).intdigest() & (2**64 - 1) for s in b.tolist()),
            np.uint64,
            len(b),
        )
    except ImportError:
        pass
    return fns


def _tf_hashes(fns: dict[str, dict[str, object]]) -> None:
    import tensorflow as tf

    fast, strong = tf.strings.to_hash_bucket_fast, tf.strings.to_hash_bucket_strong
    fns["Fingerprint64"]["tf.strings"] = lambda b: fast(tf.constant(b), 2**63 - 1).numpy()
    fns["SipHash-2-4"]["tf.strings"] = lambda b: strong(tf.constant(b), 2**63 - 1, [7, 7]).numpy()


def run(fn, batches) -> tuple[float, int]:
    start = time.perf_counter()
    total = 0
    for b in batches:
        # Summed as int64 (wrapping), so 64-bit hashes and bins compare alike.
        total += int(np.asarray(fn(b)).astype(np.int64).sum(dtype=np.int64))
    return time.perf_counter() - start, total


def measure(groups, batches, rounds: int) -> dict[tuple[str, str], float]:
    """Best seconds of each (group, system), systems alternating round by round; within a
    group every system's checksum must agree (TensorFlow's bare hashes, reduced modulo
    2**63 - 1, are left out of that)."""
    for row in groups.values():
        for fn in row.values():
            run(fn, batches[:2])  # warm-up: imports, first allocations
    best: dict[tuple[str, str], float] = {}
    for r in range(rounds):
        for group, row in groups.items():
            names = list(row)
            names = names[r % len(names) :] + names[: r % len(names)]  # who goes first
            sums = {}
            for name in names:
                t, sums[name] = run(row[name], batches)
                best[(group, name)] = min(best.get((group, name), np.inf), t)
            checked = {k: v for k, v in sums.items() if k != "tf.strings"}
            if len(set(checked.values())) != 1:
                raise AssertionError(f"{group}: outputs differ: {sums}")
    return best


def report(groups, best, n: int, unit: str) -> None:
    for group, row in groups.items():
        ref = next(iter(row))
        print(f"  {group}")
        for name in row:
            rate = n / best[(group, name)]
            ratio = best[(group, name)] / best[(group, ref)]
            print(f"    {name:22s} {rate:14,.0f} {unit}/s   {ref} / this: {ratio:5.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--vocab", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-keras", action="store_true")
    args = parser.parse_args(argv)

    batches, vocab = make_batches(args.n, args.vocab, args.batch)
    load_start = os.getloadavg()
    layers = contenders(vocab, not args.no_keras)
    best_layers = measure(layers, batches, args.rounds)
    fns = hash_functions((7).to_bytes(8, "little") * 2)
    if not args.no_keras:
        _tf_hashes(fns)
    best_fns = measure(fns, batches, args.rounds)
    load_end = os.getloadavg()
    print(
        f"load average (1, 5, 15 min): start {' '.join(f'{x:.2f}' for x in load_start)}, "
        f"end {' '.join(f'{x:.2f}' for x in load_end)} (cores: {os.cpu_count()})"
    )
    print(
        f"{args.n:,} strings in batches of {args.batch}, vocabulary {len(vocab):,} of "
        f"{args.vocab:,} words; best of {args.rounds} alternating rounds"
    )
    print("layers (outputs checked equal):")
    report(layers, best_layers, args.n, "strings")
    print("bare hashes of the same batches:")
    report(fns, best_fns, args.n, "strings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
