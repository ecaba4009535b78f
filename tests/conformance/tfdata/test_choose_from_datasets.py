"""tf.data's ``choose_from_datasets`` kernel tests
(``kernel_tests/choose_from_datasets_test.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp
from datapipe.errors import PipelineError

from ._support import VERIFY_FNS, assert_produces, verify_checkpoint

WORDS = [b"foo", b"bar", b"baz"]


def test_choose_from_datasets():
    """kernel_tests/choose_from_datasets_test.py::ChooseFromDatasetsTest.testChooseFromDatasets."""
    datasets = [dp.from_tensors(w).repeat() for w in WORDS]
    choice_array = np.random.default_rng(0).integers(3, size=(15,), dtype=np.int64)
    ds = dp.choose_from_datasets(datasets, dp.from_tensor_slices(choice_array))
    assert_produces(ds, [WORDS[i] for i in choice_array])


def _stopping(stop):
    datasets = [
        dp.from_tensors(b"foo").repeat(2),
        dp.from_tensors(b"bar").repeat(),
        dp.from_tensors(b"baz").repeat(),
    ]
    choice = dp.from_tensor_slices(np.asarray([0, 0, 0, 1, 1, 1, 2, 2, 2], dtype=np.int64))
    return dp.choose_from_datasets(datasets, choice, stop_on_empty_dataset=stop)


def test_stopping_on_empty_dataset():
    """kernel_tests/choose_from_datasets_test.py::ChooseFromDatasetsTest.testChooseFromDatasetsStoppingOnEmptyDataset."""
    assert_produces(_stopping(True), [b"foo", b"foo"])


def test_skipping_empty_datasets():
    """kernel_tests/choose_from_datasets_test.py::ChooseFromDatasetsTest.testChooseFromDatasetsSkippingEmptyDatasets."""
    assert_produces(
        _stopping(False), [b"foo", b"foo", b"bar", b"bar", b"bar", b"baz", b"baz", b"baz"]
    )


def test_choice_dataset_is_empty():
    """kernel_tests/choose_from_datasets_test.py::ChooseFromDatasetsTest.testChooseFromDatasetsChoiceDatasetIsEmpty."""
    datasets = [dp.from_tensors(w).repeat() for w in WORDS]
    ds = dp.choose_from_datasets(datasets, choice_dataset=dp.range(0), stop_on_empty_dataset=False)
    assert_produces(ds, [])


def test_nested():
    """kernel_tests/choose_from_datasets_test.py::ChooseFromDatasetsTest.testChooseFromDatasetsNested."""
    ds1, ds2 = dp.range(10).window(2), dp.range(10, 20).window(2)
    ds = dp.choose_from_datasets([ds1, ds2], dp.range(2).repeat(5)).flat_map(lambda x: x)
    expected = [v for i in range(5) for j in range(2) for v in (10 * j + 2 * i, 10 * j + 2 * i + 1)]
    assert_produces(ds, [np.int64(v) for v in expected])


def test_errors():
    """kernel_tests/choose_from_datasets_test.py::ChooseFromDatasetsTest.testErrors."""
    two = [dp.from_tensors(0), dp.from_tensors(1)]
    with pytest.raises(TypeError, match="int64"):
        dp.choose_from_datasets(two, choice_dataset=dp.from_tensors(1.0))
    with pytest.raises(TypeError, match="scalar"):
        dp.choose_from_datasets(two, choice_dataset=dp.from_tensors([1.0]))
    ds = dp.choose_from_datasets([dp.from_tensors(0)], choice_dataset=dp.from_tensors(np.int64(1)))
    with pytest.raises(PipelineError, match="outside the valid range"):
        next(iter(ds))
    with pytest.raises(ValueError, match="datasets must not be empty"):
        dp.choose_from_datasets(datasets=[], choice_dataset=dp.from_tensors(1.0))
    with pytest.raises(TypeError, match="choice_dataset must be a Dataset"):
        dp.choose_from_datasets([dp.range(42)], choice_dataset=None)


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
def test_checkpoint(verify_fn):
    """kernel_tests/choose_from_datasets_test.py::ChooseFromDatasetsCheckpointTest.test
    (the choice indices shuffled by numpy, not tf.random.experimental.stateless_shuffle)."""
    indices = np.repeat(np.arange(5, dtype=np.int64), 20)
    shuffled = np.random.default_rng([1, 2]).permutation(indices)

    def build():
        datasets = [dp.range(20) for _ in range(5)]
        return dp.choose_from_datasets(datasets, dp.from_tensor_slices(shuffled))

    verify_checkpoint(build, 100, verify_fn)
