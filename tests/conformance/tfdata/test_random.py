"""tf.data's ``random`` kernel tests (``kernel_tests/random_test.py``). The values are
numpy's PCG64, not TF's Philox: determinism and epochs are what is compared."""

from __future__ import annotations

import pytest

import datapipe as dp

from ._support import VERIFY_FNS, verify_checkpoint


@pytest.mark.parametrize("local_seed", [None, 20])
@pytest.mark.parametrize("global_seed", [None, 10])
def test_determinism(global_seed, local_seed):
    """kernel_tests/random_test.py::RandomTest.testDeterminism: a dataset built again (a
    graph round trip upstream) gives the same numbers exactly when a seed is set."""
    expect_determinism = global_seed is not None or local_seed is not None

    def build():
        ds = dp.Dataset.random(seed=local_seed).take(10)
        return ds.with_options(dp.Options(seed=global_seed)) if global_seed is not None else ds

    output_1, output_2 = [int(x) for x in build()], [int(x) for x in build()]
    assert all(0 <= x < 2**32 for x in output_1)
    assert (output_1 == output_2) == expect_determinism


@pytest.mark.parametrize("rerandomize", [None, True, False])
def test_rerandomize_each_iteration_epochs(rerandomize):
    """kernel_tests/random_test.py::RandomTest.testRerandomizeEachIterationEpochs."""
    ds = dp.Dataset.random(seed=42, rerandomize_each_iteration=rerandomize).take(10)
    first, second = [int(x) for x in ds], [int(x) for x in ds]
    assert (first == second) == (not rerandomize)


@pytest.mark.parametrize("rerandomize", [None, True, False])
def test_rerandomize_repeat_epochs(rerandomize):
    """kernel_tests/random_test.py::RandomTest.testRerandomizeRepeatEpochs."""
    ds = dp.Dataset.random(seed=42, rerandomize_each_iteration=rerandomize).take(10).repeat(2)
    out = [int(x) for x in ds]
    assert (out[:10] == out[10:]) == (not rerandomize)


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
@pytest.mark.parametrize("rerandomize_each_iteration", [True, False])
def test_checkpoint(verify_fn, rerandomize_each_iteration):
    """kernel_tests/random_test.py::RandomCheckpointTest.test."""

    def build():
        ds = dp.Dataset.random(seed=55, rerandomize_each_iteration=rerandomize_each_iteration)
        return ds.take(10)

    verify_checkpoint(build, 10, verify_fn)
