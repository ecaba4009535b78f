"""A small text classification corpus: Python standard library docstrings by topic.

The first paragraphs of the docstrings of public functions, classes and methods of CPython
3.11's standard library modules in four groups (``files``, ``network``, ``concurrency``,
``numbers``), labelled by group: 1,051 texts. CPython's docstrings are licensed under the
PSF License Version 2 (see ``data/CITATION.txt``); ``make_stdlib_docs.py`` (beside this
module) made ``data/stdlib_docs.npz``.
"""

from __future__ import annotations

import importlib.resources

import numpy as np

from datapipe.dataset_ops import Dataset

LABEL_NAMES = ("files", "network", "concurrency", "numbers")
NUM_TRAIN = 841
NUM_TEST = 210


def load_stdlib_docs_arrays() -> dict[str, np.ndarray]:
    """The raw arrays: ``train_texts`` (841,) str, ``train_labels`` (841,) int64,
    ``test_texts`` (210,) str, ``test_labels`` (210,) int64, ``label_names`` (4,) str."""
    path = importlib.resources.files("datapipe.datasets") / "data" / "stdlib_docs.npz"
    with path.open("rb") as f, np.load(f) as npz:
        return {k: npz[k] for k in npz.files}


def load_stdlib_docs() -> tuple[Dataset, Dataset]:
    """The docstring corpus as ``(train_ds, test_ds)`` datasets of ``(text, label)``.

    ``text`` is a numpy ``str_`` (one whitespace-normalised paragraph, 4 to about 120
    words), ``label`` an int64 scalar indexing ``LABEL_NAMES`` (``files``, ``network``,
    ``concurrency``, ``numbers``). The split is fixed (841 training and 210 test texts; see
    ``datapipe/datasets/make_stdlib_docs.py``).

    Source: CPython 3.11 standard library docstrings, PSF License Version 2.

    Example:
        >>> from datapipe.datasets import load_stdlib_docs
        >>> train, test = load_stdlib_docs()
        >>> len(train), len(test)
        (841, 210)
        >>> text, label = train[0]
        >>> str(text)
        'Abstract base class for implementing the file system path protocol.'
        >>> int(label)
        0
    """
    arrays = load_stdlib_docs_arrays()
    train = Dataset.from_tensor_slices((arrays["train_texts"], arrays["train_labels"]))
    test = Dataset.from_tensor_slices((arrays["test_texts"], arrays["test_labels"]))
    return train, test
