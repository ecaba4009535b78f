"""tf.data's ``rejection_resample`` kernel tests (``kernel_tests/rejection_resample_test.py``).
The draws are numpy's, not TF's: the distributions are what is compared, as upstream."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp

RNG = np.random.default_rng(27)


@pytest.mark.parametrize("initial_known", [True, False])
def test_distribution(initial_known):
    """kernel_tests/rejection_resample_test.py::RejectionResampleTest.testDistribution."""
    classes = RNG.integers(5, size=(10000,)).astype(np.int64)
    target_dist = [0.9, 0.05, 0.05, 0.0, 0.0]
    initial_dist = [0.2] * 5 if initial_known else None
    ds = dp.from_tensor_slices(classes).shuffle(200, seed=21).map(lambda c: (c, str(c))).repeat()
    ds = ds.rejection_resample(
        class_func=lambda c, _: c, target_dist=target_dist, initial_dist=initial_dist, seed=27
    )
    it = iter(ds)
    returned = [next(it) for _ in range(2000)]
    returned_classes, returned_classes_and_data = zip(*returned)
    _, returned_data = zip(*returned_classes_and_data)
    assert [str(c) for c in returned_classes] == list(returned_data)
    counts = np.array([sum(1 for v in returned_classes if v == c) for c in range(5)])
    np.testing.assert_allclose(counts / len(returned_classes), target_dist, atol=1e-2)


@pytest.mark.parametrize("only_initial_dist", [True, False])
def test_edge_cases_sample_from_initial_dataset(only_initial_dist):
    """kernel_tests/rejection_resample_test.py::RejectionResampleTest.testEdgeCasesSampleFromInitialDataset:
    a finite input ends the resampled dataset."""
    init_dist = [0.5, 0.5]
    target_dist = [0.5, 0.5] if only_initial_dist else [0.0, 1.0]
    data_np = RNG.choice(2, 100, p=init_dist)
    ds = dp.from_tensor_slices(data_np).rejection_resample(
        class_func=lambda x: x, target_dist=target_dist, initial_dist=init_dist
    )
    returned = list(ds)
    assert 0 < len(returned) <= 100
    if not only_initial_dist:
        assert all(c == 1 for c, _ in returned)


def test_random_classes():
    """kernel_tests/rejection_resample_test.py::RejectionResampleTest.testRandomClasses (the
    random remap as a seeded random_map)."""
    init_dist, target_dist = [0.25, 0.25, 0.25, 0.25], [0.0, 0.0, 0.0, 1.0]
    data_np = RNG.choice(4, 100, p=init_dist)
    ds = dp.from_tensor_slices(data_np).random_map(
        lambda _, rng: np.int32(rng.uniform() * 4), seed=11
    )
    ds = ds.rejection_resample(
        class_func=lambda x: x, target_dist=target_dist, initial_dist=init_dist
    )
    classes = [int(c) for c, _ in ds]
    bincount = np.bincount(np.array(classes), minlength=4).astype(np.float32) / len(classes)
    np.testing.assert_allclose(bincount, target_dist, atol=1e-2)


def test_exhaustion():
    """kernel_tests/rejection_resample_test.py::RejectionResampleTest.testExhaustion."""
    init_dist, target_dist = [0.5, 0.5], [0.9, 0.1]
    ds = dp.range(10000).rejection_resample(
        class_func=lambda x: x % 2, target_dist=target_dist, initial_dist=init_dist, seed=3
    )
    classes = [int(c) for c, _ in ds]
    bincount = np.bincount(np.array(classes), minlength=2).astype(np.float32) / len(classes)
    np.testing.assert_allclose(bincount, target_dist, atol=1e-2)


@pytest.mark.parametrize(
    "target_dtype,init_dtype",
    [("float32", "float64"), ("float64", "float32"), ("float64", "float64"), ("float64", None)],
)
def test_other_dtypes(target_dtype, init_dtype):
    """kernel_tests/rejection_resample_test.py::RejectionResampleTest.testOtherDtypes."""
    target_dist = np.array([0.5, 0.5], dtype=target_dtype)
    init_dist = None if init_dtype is None else np.array([0.5, 0.5], dtype=init_dtype)
    ds = dp.range(10).rejection_resample(
        class_func=lambda x: x % 2, target_dist=target_dist, initial_dist=init_dist
    )
    c, x = next(iter(ds))
    assert c == x % 2
