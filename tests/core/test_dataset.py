"""``Dataset`` itself: every public method documented, always truthy (as in tf.data), and
``element_spec`` inferred past a failing first element (re-raised when none can be computed)."""

from __future__ import annotations

import numpy as np
import pytest
from harness import values

import datapipe as dp


def test_a_dataset_is_always_truthy_as_in_tf_data():
    # Dataset defines __len__, which raises for infinite/unknown cardinality; without
    # __bool__, `if ds:` raised (and sample_from_datasets(weights=<infinite Dataset>) did).
    assert bool(dp.range(3).repeat()) and bool(dp.range(0))
    weights = dp.from_tensors(np.array([0.5, 0.5])).repeat()
    ds = dp.sample_from_datasets([dp.range(3), dp.range(10, 13)], weights=weights, seed=1)
    assert sorted(values(ds)) == [0, 1, 2, 10, 11, 12]


def _fails_on_zero(x):
    if x == 0:
        raise ValueError("corrupt record")
    return np.arange(int(x))


def test_element_spec_is_inferred_past_a_failing_first_element():
    # map's spec comes from a computed element (no tracing); a bad first record made
    # element_spec raise, so map(decode).ignore_errors().padded_batch(...) failed to build.
    ds = dp.range(4).map(_fails_on_zero)
    assert ds.element_spec == dp.TensorSpec((1,), "int64")  # from element 1, the first good one
    padded = ds.ignore_errors().padded_batch(2)
    assert [b.tolist() for b in padded] == [[[0, 0], [0, 1]], [[0, 1, 2]]]


def test_element_spec_reraises_when_no_element_can_be_computed():
    def always(x):
        raise ValueError("nope")

    with pytest.raises(dp.PipelineError, match=r"map at element 0: ValueError: nope"):
        _ = dp.range(3).map(always).element_spec


def test_every_public_dataset_method_is_documented() -> None:
    names = [m for m in dir(dp.Dataset) if not m.startswith("_")]
    undocumented = [m for m in names if len((getattr(dp.Dataset, m).__doc__ or "").strip()) < 20]
    assert undocumented == []
    assert "num_parallel_calls" in dp.Dataset.map.__doc__
    assert "drop_remainder" in dp.Dataset.batch.__doc__
    assert "filename" in dp.Dataset.cache.__doc__.lower()
