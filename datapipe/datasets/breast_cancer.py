"""The breast cancer Wisconsin (diagnostic) table, shipped with the package.

Wolberg, W., Mangasarian, O., Street, N. & Street, W. (1993). Breast Cancer Wisconsin
(Diagnostic). UCI Machine Learning Repository, https://doi.org/10.24432/C5DW2B, licensed
CC BY 4.0 (see ``data/CITATION.txt``). ``make_breast_cancer.py`` (beside this module) made
``data/breast_cancer.npz`` from the copy in scikit-learn.
"""

from __future__ import annotations

import importlib.resources

import numpy as np

from datapipe.dataset_ops import Dataset

NUM_FEATURES = 30
NUM_TRAIN = 455
NUM_TEST = 114


def load_breast_cancer_arrays() -> dict[str, np.ndarray]:
    """The raw arrays: ``train_features`` (455, 30) float32, ``train_labels`` (455,) int64,
    ``test_features`` (114, 30) float32, ``test_labels`` (114,) int64, ``feature_names``
    (30,) str."""
    path = importlib.resources.files("datapipe.datasets") / "data" / "breast_cancer.npz"
    with path.open("rb") as f, np.load(f) as npz:
        return {k: npz[k] for k in npz.files}


def load_breast_cancer() -> tuple[Dataset, Dataset]:
    """The breast cancer table as ``(train_ds, test_ds)`` datasets.

    Elements are ``(features, label)``: ``features`` a float32 array of shape ``[30]`` (the
    published values, unscaled: means, standard errors and worst values of ten cell-nucleus
    measurements, in ``feature_names`` order: ``load_breast_cancer_arrays()["feature_names"]``),
    ``label`` an int64 scalar, 1 benign, 0 malignant. The split is fixed: 455 training and
    114 test rows (a seeded random split, stored in the file; see
    ``datapipe/datasets/make_breast_cancer.py``), in the table's original order. Both keep
    random access.

    Source: Wolberg, Mangasarian, Street & Street (1993), UCI Machine Learning Repository,
    DOI 10.24432/C5DW2B, CC BY 4.0.

    Example:
        >>> from datapipe.datasets import load_breast_cancer
        >>> train, test = load_breast_cancer()
        >>> len(train), len(test)
        (455, 114)
        >>> features, label = train[0]
        >>> features.shape, features.dtype.name, label.dtype.name
        ((30,), 'float32', 'int64')
    """
    arrays = load_breast_cancer_arrays()
    train = Dataset.from_tensor_slices((arrays["train_features"], arrays["train_labels"]))
    test = Dataset.from_tensor_slices((arrays["test_features"], arrays["test_labels"]))
    return train, test
