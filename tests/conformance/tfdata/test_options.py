"""tf.data's ``Options`` kernel tests (``kernel_tests/options_test.py``): tf.data's
``experimental_optimization.autotune`` is ``Options.autotune.enabled`` here and
``experimental_deterministic`` is ``Options.deterministic``."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp

from ._support import assert_produces


def _autotune(enabled):
    return dp.Options(autotune=dp.AutotuneOptions(enabled=enabled))


def test_options_default():
    """kernel_tests/options_test.py::OptionsTest.testOptionsDefault."""
    assert dp.range(0).options == dp.Options()


def test_options_once():
    """kernel_tests/options_test.py::OptionsTest.testOptionsOnce."""
    options = dp.Options()
    assert dp.range(0).with_options(options).cache().options == options


def test_options_twice_same():
    """kernel_tests/options_test.py::OptionsTest.testOptionsTwiceSame."""
    options = _autotune(True)
    assert dp.range(0).with_options(options).with_options(options).options == options


def test_options_twice_different_options():
    """kernel_tests/options_test.py::OptionsTest.testOptionsTwiceDifferentOptions."""
    ds = dp.range(0).with_options(_autotune(True)).with_options(dp.Options(deterministic=False))
    assert ds.options.autotune.enabled is True
    assert ds.options.deterministic is False


def test_options_twice_same_option():
    """kernel_tests/options_test.py::OptionsTest.testOptionsTwiceSameOption."""
    ds = dp.range(0).with_options(_autotune(False)).with_options(_autotune(True))
    assert ds.options.autotune.enabled is True


def test_options_merge_options_from_multiple_inputs():
    """kernel_tests/options_test.py::OptionsTest.testOptionsMergeOptionsFromMultipleInputs."""
    ds1 = dp.range(0).with_options(_autotune(True))
    ds2 = dp.range(0).with_options(dp.Options(deterministic=True))
    options = dp.zip((ds1, ds2)).options
    assert options.autotune.enabled is True
    assert options.deterministic is True


def test_options_have_defaults():
    """kernel_tests/options_test.py::OptionsTest.testOptionsHaveDefaults."""
    options1, options2 = dp.Options(), dp.Options()
    assert options1.autotune is not options2.autotune
    assert options1.threading is not options2.threading
    assert options1.autotune == dp.AutotuneOptions()
    assert options1.threading == dp.ThreadingOptions()


def test_mutating_options_raise_value_error():
    """kernel_tests/options_test.py::OptionsTest.testMutatingOptionsRaiseValueError."""
    ds = dp.range(0).with_options(dp.Options(seed=1)).map(lambda x: 2 * x)
    ds = ds.with_options(_autotune(True))
    dataset_options = ds.options
    with pytest.raises(ValueError, match="read-only"):
        dataset_options.deterministic = True
    with pytest.raises(ValueError, match="read-only"):
        dataset_options.autotune.enabled = False
    assert ds.options.autotune.enabled is True


def test_nested_dataset():
    """kernel_tests/options_test.py::OptionsTest.testNestedDataset: a chain of 1000
    concatenations."""
    ds = dp.from_tensors(0)
    result = ds
    for _ in range(999):
        result = result.concatenate(ds)
    assert result.cardinality() == 1000
    assert_produces(result, [np.int64(0)] * 1000)
