"""tf.data's ``sample_from_datasets`` kernel tests
(``kernel_tests/sample_from_datasets_test.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp

from ._support import VERIFY_FNS, assert_produces, verify_checkpoint

WEIGHTS_TYPES = ["list", "tensor", "dataset"]


def _weights(weights_list, weights_type):
    """Upstream ``_get_weights_of_type``: a list, an array (tensor), or a dataset of them."""
    if weights_type == "list":
        return list(weights_list)
    if weights_type == "tensor":
        return np.asarray(weights_list)
    return dp.from_tensors(np.asarray(weights_list)).repeat()


def _chi2(expected, actual):
    diff = np.asarray(actual) - np.asarray(expected)
    return np.sum(diff * diff / np.asarray(expected), axis=0)


@pytest.mark.parametrize("weights_type", WEIGHTS_TYPES)
def test_sample_from_datasets(weights_type):
    """kernel_tests/sample_from_datasets_test.py::SampleFromDatasetsTest.testSampleFromDatasets."""
    num_samples = 5000
    rand_probs = np.random.default_rng(1619).random(5)
    rand_probs /= rand_probs.sum()
    for probs in [[0.85, 0.05, 0.1], rand_probs, [1.0]]:
        classes = len(probs)
        ds = dp.sample_from_datasets(
            [dp.from_tensors(i).repeat() for i in range(classes)],
            _weights(np.asarray(probs), weights_type),
            seed=1619,
        ).take(num_samples)
        freqs = np.zeros([classes])
        for x in ds:
            freqs[int(x)] += 1
        assert freqs.sum() == num_samples
        assert _chi2(probs, freqs / num_samples) < 1e-2


def _three(weights_type, stop):
    datasets = [
        dp.from_tensors(np.int64(-1)),
        dp.from_tensors(np.int64(1)).repeat(),
        dp.range(10).repeat(),
    ]
    weights = _weights(np.asarray([0.5, 0.1, 0.4]), weights_type)
    return dp.sample_from_datasets(datasets, weights=weights, stop_on_empty_dataset=stop, seed=3)


@pytest.mark.parametrize("weights_type", WEIGHTS_TYPES)
def test_stopping_on_empty_dataset(weights_type):
    """kernel_tests/sample_from_datasets_test.py::SampleFromDatasetsTest.testSampleFromDatasetsStoppingOnEmptyDataset."""
    samples = [int(x) for x in _three(weights_type, True)]
    assert samples.count(-1) == 1


@pytest.mark.parametrize("weights_type", WEIGHTS_TYPES)
def test_skipping_empty_dataset(weights_type):
    """kernel_tests/sample_from_datasets_test.py::SampleFromDatasetsTest.testSampleFromDatasetsSkippingEmptyDataset."""
    samples = [int(x) for x in _three(weights_type, False).take(100)]
    assert len(samples) == 100
    assert samples.count(-1) == 1


@pytest.mark.parametrize("weights_type", WEIGHTS_TYPES)
def test_with_zero_weight(weights_type):
    """kernel_tests/sample_from_datasets_test.py::SampleFromDatasetsTest.testSampleFromDatasetsWithZeroWeight."""
    datasets = [dp.from_tensors(-1).repeat(2), dp.from_tensors(1).repeat(2)]
    ds = dp.sample_from_datasets(
        datasets, weights=_weights(np.asarray([0.0, 1.0]), weights_type), stop_on_empty_dataset=True
    )
    assert_produces(ds, [1, 1])


@pytest.mark.parametrize("weights_type", WEIGHTS_TYPES)
def test_sample_from_empty_dataset(weights_type):
    """kernel_tests/sample_from_datasets_test.py::SampleFromDatasetsTest.testSampleFromEmptyDataset."""
    datasets = [dp.range(0), dp.range(1).repeat()]
    ds = dp.sample_from_datasets(
        datasets, weights=_weights(np.asarray([1.0, 0.0]), weights_type), stop_on_empty_dataset=True
    )
    assert_produces(ds, [])


def test_skipping_datasets_with_zero_weight():
    """kernel_tests/sample_from_datasets_test.py::SampleFromDatasetsTest.testSampleFromDatasetsSkippingDatasetsWithZeroWeight."""
    datasets = [dp.from_tensors(-1).repeat(), dp.from_tensors(1)]
    ds = dp.sample_from_datasets(
        datasets, weights=np.asarray([0.0, 1.0]), stop_on_empty_dataset=False
    )
    assert_produces(ds, [1])


def test_all_weights_are_zero():
    """kernel_tests/sample_from_datasets_test.py::SampleFromDatasetsTest.testSampleFromDatasetsAllWeightsAreZero."""
    datasets = [dp.from_tensors(-1).repeat(), dp.from_tensors(1).repeat()]
    ds = dp.sample_from_datasets(
        datasets, weights=np.asarray([0.0, 0.0]), stop_on_empty_dataset=False
    )
    assert_produces(ds, [])


def test_cardinality():
    """kernel_tests/sample_from_datasets_test.py::SampleFromDatasetsTest.testSampleFromDatasetsCardinality."""
    ds1, ds2 = dp.from_tensors([1.0]).repeat(), dp.from_tensors([2.0]).repeat()
    assert dp.sample_from_datasets([ds1, ds2]).cardinality() == dp.INFINITE_CARDINALITY


def test_nested():
    """kernel_tests/sample_from_datasets_test.py::SampleFromDatasetsTest.testSampleFromDatasetsNested."""
    ds1, ds2 = dp.range(10).window(2), dp.range(10, 20).window(2)
    ds = dp.sample_from_datasets([ds1, ds2], weights=[0.3, 0.7]).flat_map(lambda x: x)
    out = [int(x) for x in ds]
    assert sorted(out) == list(range(20))


@pytest.mark.parametrize("rerandomize", [None, True, False])
def test_rerandomize_each_iteration_epochs(rerandomize):
    """kernel_tests/sample_from_datasets_test.py::SampleFromDatasetsTest.testSampleFromDatasetsRerandomizeEachIterationEpochs."""
    ds = dp.sample_from_datasets(
        [dp.range(0, 10), dp.range(100, 110)], seed=42, weights=[0.5, 0.5],
        stop_on_empty_dataset=True, rerandomize_each_iteration=bool(rerandomize),
    )  # fmt: skip
    first, second = [int(x) for x in ds], [int(x) for x in ds]
    assert (first != second) if rerandomize else (first == second)


@pytest.mark.parametrize("rerandomize", [None, True, False])
def test_rerandomize_repeat_epochs(rerandomize):
    """kernel_tests/sample_from_datasets_test.py::SampleFromDatasetsTest.testSampleFromDatasetsRerandomizeRepeatEpochs."""
    ds = dp.sample_from_datasets(
        [dp.range(0, 10), dp.range(100, 110)], seed=42, weights=[0.5, 0.5],
        stop_on_empty_dataset=True, rerandomize_each_iteration=bool(rerandomize),
    ).repeat(2)  # fmt: skip
    epochs = [int(x) for x in ds]
    first, second = epochs[: len(epochs) // 2], epochs[len(epochs) // 2 :]
    assert (first != second) if rerandomize else (first == second)


def test_errors():
    """kernel_tests/sample_from_datasets_test.py::SampleFromDatasetsTest.testErrors
    (integer weights are accepted here, as weights: D-TF-18)."""
    with pytest.raises(ValueError, match=r"weights must have shape \(2,\)"):
        dp.sample_from_datasets([dp.range(10), dp.range(20)], weights=[0.25, 0.25, 0.25, 0.25])
    ds = dp.sample_from_datasets([dp.range(10), dp.range(20)], weights=[1, 1], seed=1)
    assert sorted(int(x) for x in ds) == sorted([*range(10), *range(20)])  # D-TF-18
    with pytest.raises(TypeError, match="incompatible dataset elements"):
        dp.sample_from_datasets([dp.from_tensors(0), dp.from_tensors(0.0)])
    with pytest.raises(ValueError, match="datasets must not be empty"):
        dp.sample_from_datasets(datasets=[], weights=[])


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
def test_checkpoint(verify_fn):
    """kernel_tests/sample_from_datasets_test.py::SampleFromDatasetsCheckpointTest.test."""

    def build():
        datasets = [dp.from_tensors(i).repeat(None) for i in range(2)]
        return dp.sample_from_datasets(datasets, [0.5, 0.5], seed=1813).take(100)

    verify_checkpoint(build, 100, verify_fn)
