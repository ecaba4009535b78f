"""One-off conversion of the breast cancer Wisconsin (diagnostic) table into
``datapipe/datasets/data/breast_cancer.npz``.

Run from the repository root with scikit-learn installed (it carries a copy of the data set;
it is not a dependency of datapipe)::

    python datapipe/datasets/make_breast_cancer.py

The npz holds ``train_features`` (455, 30) float32, ``train_labels`` (455,) int64,
``test_features`` (114, 30) float32, ``test_labels`` (114,) int64 and ``feature_names``
(30,) str: the 30 real-valued features as published (no scaling); label 1 is benign, 0
malignant (scikit-learn's coding); the split is a fixed permutation drawn with
``numpy.random.default_rng(20240502)`` (the first 114 shuffled rows are the test set), each
part kept in the original order.
"""

from __future__ import annotations

import pathlib

import numpy as np

OUT = pathlib.Path(__file__).resolve().parent / "data" / "breast_cancer.npz"
SPLIT_SEED = 20240502
NUM_TEST = 114


def main() -> None:
    from sklearn.datasets import load_breast_cancer

    table = load_breast_cancer()
    features = np.asarray(table.data)
    if features.shape != (569, 30) or not np.isfinite(features).all():
        raise ValueError(f"unexpected table: {features.shape}")
    features32 = features.astype(np.float32)
    labels = np.asarray(table.target, dtype=np.int64)
    perm = np.random.default_rng(SPLIT_SEED).permutation(len(labels))
    test, train = np.sort(perm[:NUM_TEST]), np.sort(perm[NUM_TEST:])
    np.savez_compressed(
        OUT,
        train_features=features32[train],
        train_labels=labels[train],
        test_features=features32[test],
        test_labels=labels[test],
        feature_names=np.array([str(n) for n in table.feature_names]),
    )
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes): {len(train)} train, {len(test)} test")


if __name__ == "__main__":
    main()
