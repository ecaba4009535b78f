"""One-off conversion of the UCI handwritten digits into ``datapipe/datasets/data/digits.npz``.

Run from the repository root with scikit-learn installed (it carries a copy of the data set;
it is not a dependency of datapipe)::

    python datapipe/datasets/make_digits.py

The npz holds ``train_images`` (1437, 8, 8) uint8, ``train_labels`` (1437,) int64,
``test_images`` (360, 8, 8) uint8 and ``test_labels`` (360,) int64: pixel values are the
data set's own 0..16 counts, unscaled; the split is a fixed permutation drawn with
``numpy.random.default_rng(20240501)`` (the first 360 shuffled samples are the test set).
"""

from __future__ import annotations

import pathlib

import numpy as np

OUT = pathlib.Path(__file__).resolve().parent / "data" / "digits.npz"
SPLIT_SEED = 20240501
NUM_TEST = 360


def main() -> None:
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = np.asarray(digits.images)
    if images.min() < 0 or images.max() > 16 or not np.all(images == np.round(images)):
        raise ValueError("expected integer pixel values in 0..16")
    images = images.astype(np.uint8)
    labels = np.asarray(digits.target, dtype=np.int64)
    perm = np.random.default_rng(SPLIT_SEED).permutation(len(labels))
    test, train = np.sort(perm[:NUM_TEST]), np.sort(perm[NUM_TEST:])
    np.savez_compressed(
        OUT,
        train_images=images[train],
        train_labels=labels[train],
        test_images=images[test],
        test_labels=labels[test],
    )
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes): {len(train)} train, {len(test)} test")


if __name__ == "__main__":
    main()
