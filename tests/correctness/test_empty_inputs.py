"""Issue 11: a valid pipeline does not fail to build because one of its inputs is empty.

``map`` (and ``flat_map``, ``interleave``, ``scan``, ``random_map``) learn their element spec
from a first element; over an empty input there is none. They reported their *input's*
spec, which the function may change, so ``.concatenate(...)`` or ``.unique()`` after them
raised a TypeError at build time although tf.data (which traces the function) runs it."""

from __future__ import annotations

import os

import numpy as np
import pytest

import datapipe as dp
from datapipe._spec import UnknownSpec


def _empty():
    return dp.range(6).filter(lambda x: x > 100)


EMPTY_OPS = {
    "map": lambda: _empty().map(lambda x: x * 2.5),
    "map_to_tuple": lambda: _empty().map(lambda x: (x, "label")),
    "random_map": lambda: _empty().random_map(lambda x, rng: float(x), seed=0),
    "flat_map": lambda: _empty().flat_map(lambda x: dp.range(x)),
    "interleave": lambda: _empty().interleave(lambda x: dp.range(x), cycle_length=2),
    "scan": lambda: _empty().scan(0, lambda s, x: (s, x * 1.5)),
    "empty_shard": lambda: dp.range(1).shard(2, 1).map(lambda x: x * 2.5),
}


@pytest.mark.parametrize("op", sorted(EMPTY_OPS))
def test_an_empty_input_gives_an_unknown_spec(op):
    assert EMPTY_OPS[op]().element_spec == UnknownSpec()


@pytest.mark.parametrize("op", sorted(EMPTY_OPS))
def test_concatenate_after_an_empty_map_runs(op):
    ds = EMPTY_OPS[op]().concatenate(dp.from_tensor_slices(np.array([7.5, 8.5])))
    assert [float(x) for x in ds] == [7.5, 8.5]
    first = dp.from_tensor_slices(np.array([1.5])).concatenate(EMPTY_OPS[op]())
    assert [float(x) for x in first] == [1.5]
    assert first.element_spec == dp.TensorSpec((), np.float64)


def test_the_issue_examples():
    empty = _empty().map(lambda x: x * 2)
    assert [int(x) for x in empty.concatenate(dp.range(3))] == [0, 1, 2]
    assert list(empty.unique()) == []
    assert [int(x) for x in dp.sample_from_datasets([empty, dp.range(3)], seed=0)] == [0, 1, 2]
    choices = dp.range(0).map(lambda x: x)
    assert list(dp.choose_from_datasets([dp.range(3)], choices)) == []


def test_ops_after_an_unknown_spec_build_and_run():
    empty = _empty().map(lambda x: (x, x * 2.0))
    for ds in (
        empty.batch(4),
        empty.padded_batch(4),
        empty.batch(2).unbatch(),
        empty.window(2),
        empty.to_torch(),
        empty.enumerate(),
        empty.shuffle(3, seed=0),
        dp.zip(empty, empty),
    ):
        assert list(ds) == []
    assert empty.batch(4).element_spec == UnknownSpec()


def test_the_spec_is_learned_once_the_input_has_elements():
    ds = dp.range(3).map(lambda x: x * 2.5)
    assert ds.element_spec == dp.TensorSpec((), np.float64)
    with pytest.raises(TypeError, match="incompatible dataset elements"):
        dp.range(3).map(lambda x: (x, x)).concatenate(dp.range(3))


def test_an_empty_dataset_with_an_unknown_spec_saves_and_loads(tmp_path):
    path = os.path.join(tmp_path, "empty")
    _empty().map(lambda x: x * 2.5).save(path)
    loaded = dp.Dataset.load(path)
    assert loaded.element_spec == UnknownSpec()
    assert list(loaded) == []
