"""``choose_from_datasets``: follows the choices, ``stop_on_empty_dataset``, errors naming
the value and index, cardinality, resume and no random access."""

from __future__ import annotations

import numpy as np
import pytest
from harness import assert_resumes, py, values

import datapipe as dp
from datapipe import INFINITE_CARDINALITY as INF
from datapipe import UNKNOWN_CARDINALITY as UNK
from datapipe import TensorSpec
from datapipe.errors import PipelineError, RandomAccessError


def _choices(values):
    return dp.from_tensor_slices(np.array(values, dtype=np.int64))


def test_choose_follows_the_choices():
    a, b = dp.range(0, 3), dp.range(10, 14)
    ds = dp.choose_from_datasets([a, b], _choices([0, 1, 1, 0, 1]))
    assert values(ds) == [0, 10, 11, 1, 12]
    assert ds.element_spec == TensorSpec((), "int64")


def test_choose_stop_on_empty_dataset():
    a, b = dp.range(0, 2), dp.range(10, 14)
    choices = _choices([0, 0, 0, 1, 1, 0, 1])
    assert values(dp.choose_from_datasets([a, b], choices)) == [0, 1]
    skipping = dp.choose_from_datasets([a, b], choices, stop_on_empty_dataset=False)
    assert values(skipping) == [0, 1, 10, 11, 12]
    assert_resumes(skipping)


def test_choose_out_of_range_names_value_and_index():
    ds = dp.choose_from_datasets([dp.range(3), dp.range(10, 13)], _choices([0, 1, 5, 1, -1]))
    it = iter(ds)
    assert py([next(it), next(it)]) == [0, 10]
    with pytest.raises(PipelineError) as info:
        next(it)
    assert info.value.index == 2
    assert "choice_dataset element 2 is 5, outside the valid range [0, 2)" in str(info.value)
    assert py(next(it)) == 11  # iteration may go on past the bad choice
    with pytest.raises(PipelineError, match="choice_dataset element 4 is -1"):
        next(it)


def test_choose_choice_dataset_must_be_scalar_int64():
    for bad in (dp.range(2, dtype="int32"), dp.from_tensor_slices(np.zeros((2, 1), np.int64))):
        with pytest.raises(TypeError, match="must be scalar int64 values"):
            dp.choose_from_datasets([dp.range(2)], bad)


def test_choose_cardinality():
    inf = dp.range(3).repeat()
    assert dp.choose_from_datasets([inf, inf], _choices([0, 1, 0])).cardinality() == 3
    assert dp.choose_from_datasets([inf], dp.range(1).repeat()).cardinality() == INF
    assert dp.choose_from_datasets([dp.range(3), inf], _choices([0, 1])).cardinality() == UNK
    assert dp.choose_from_datasets([dp.range(3)], _choices([])).cardinality() == 0


def test_choose_resume_and_no_random_access():
    choices = dp.range(30).map(lambda i: (i * 7) % 3)
    inputs = [dp.range(0, 12), dp.range(100, 110), dp.range(200, 220)]
    ds = dp.choose_from_datasets(inputs, choices, stop_on_empty_dataset=False)
    assert_resumes(ds)
    with pytest.raises(RandomAccessError, match="'choose_from_datasets'"):
        ds.global_shuffle()
