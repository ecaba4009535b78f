"""The UCI optical recognition of handwritten digits data set, shipped with the package.

Alpaydin, E. & Kaynak, C. (1998). Optical Recognition of Handwritten Digits. UCI Machine
Learning Repository, https://doi.org/10.24432/C50P49, licensed CC BY 4.0 (see
``data/CITATION.txt``). ``make_digits.py`` (beside this module) made ``data/digits.npz``
from the copy in scikit-learn.
"""

from __future__ import annotations

import importlib.resources
from typing import Any

import numpy as np

from datapipe.dataset_ops import Dataset

NUM_CLASSES = 10
NUM_TRAIN = 1437
NUM_TEST = 360


def load_digits_arrays() -> dict[str, np.ndarray]:
    """The raw arrays: ``train_images`` (1437, 8, 8) uint8, ``train_labels`` (1437,) int64,
    ``test_images`` (360, 8, 8) uint8, ``test_labels`` (360,) int64."""
    path = importlib.resources.files("datapipe.datasets") / "data" / "digits.npz"
    with path.open("rb") as f, np.load(f) as npz:
        return {k: npz[k] for k in npz.files}


def load_digits() -> tuple[Dataset, Dataset]:
    """The handwritten digits as ``(train_ds, test_ds)`` datasets.

    Elements are ``(image, label)``: ``image`` a uint8 array of shape ``[8, 8]`` whose
    values are the data set's own pixel counts ``0..16`` (each pixel counts the set bits of
    a 4x4 block of the original 32x32 bitmap; divide by 16 to scale to ``[0, 1]``),
    ``label`` an int64 scalar in ``0..9``. The split is fixed: 1,437 training and 360 test
    images (a seeded random split, stored in the file; see ``datapipe/datasets/make_digits.py``), in
    the data set's original order. Both datasets keep random access, so
    ``global_shuffle`` works on them.

    Source: Alpaydin & Kaynak (1998), UCI Machine Learning Repository,
    DOI 10.24432/C50P49, CC BY 4.0.

    Example:
        >>> from datapipe.datasets import load_digits
        >>> train, test = load_digits()
        >>> len(train), len(test)
        (1437, 360)
        >>> image, label = next(iter(train))
        >>> image.shape, image.dtype.name, label.dtype.name
        ((8, 8), 'uint8', 'int64')
    """
    arrays: Any = load_digits_arrays()
    train = Dataset.from_tensor_slices((arrays["train_images"], arrays["train_labels"]))
    test = Dataset.from_tensor_slices((arrays["test_images"], arrays["test_labels"]))
    return train, test
