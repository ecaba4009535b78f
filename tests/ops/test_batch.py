"""``batch``: stacking, specs, cardinality, torch elements, shape and structure errors, good
batches before an error, resume, and the parallel batch with failing input elements (the
sequential batch keeps the elements read before a failure; the parallel one must too)."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
import torch
from harness import assert_resumes, consume_with_errors, py

import datapipe as dp
from datapipe import TensorSpec
from datapipe.distribute.state_io import load_state, save_state
from datapipe.errors import BatchShapeError

pytestmark = pytest.mark.timeout(120)


VALUES = np.array([1.0, 0.0, 2.0, 1.0, 0.0, 4.0, 5.0, 0.0, 0.0, 3.0, 6.0, 7.0, 0.0])


GOOD = [1 / v for v in VALUES if v != 0]


def _inv(x):
    if x == 0:
        raise ZeroDivisionError("zero")
    return 1 / x


def _batches(parallel, map_parallel=None, drop=False, executor=None):
    kw = {"num_parallel_calls": 2, "executor": executor} if map_parallel else {}
    ds = dp.from_tensor_slices(VALUES).map(_inv, **kw)
    return ds.batch(3, drop_remainder=drop, num_parallel_calls=2 if parallel else None)


def test_batch_stacks_and_reports_spec_and_cardinality() -> None:
    ds = dp.from_tensor_slices((np.arange(10), np.ones((10, 2), np.float32))).batch(4)
    out = list(ds)
    assert [len(b[0]) for b in out] == [4, 4, 2]
    assert out[1][0].tolist() == [4, 5, 6, 7] and out[0][1].shape == (4, 2)
    assert ds.cardinality() == 3
    assert ds.element_spec == (TensorSpec((None,), np.int64), TensorSpec((None, 2), np.float32))
    dropped = dp.range(10).batch(4, drop_remainder=True)
    assert [b.tolist() for b in dropped] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert dropped.cardinality() == 2 and dropped.element_spec == TensorSpec((4,), np.int64)


def test_batch_of_torch_elements_is_torch() -> None:
    b = next(iter(dp.from_tensor_slices(torch.ones(5, 3)).batch(2)))
    assert isinstance(b, torch.Tensor) and tuple(b.shape) == (2, 3)


def test_batch_shape_mismatch_names_index_shapes_and_fix() -> None:
    ds = dp.range(4).map(lambda x: np.zeros((2, 2) if x < 3 else (3, 2)))
    with pytest.raises(BatchShapeError) as ei:
        list(ds.batch(4))
    msg = str(ei.value)
    assert "element 3 of shape (3, 2)" in msg and "element 0 of shape (2, 2)" in msg
    assert "padded_batch" in msg and "Resizing" in msg


def test_batch_rejects_bad_size() -> None:
    with pytest.raises(ValueError, match="batch: batch_size must be >= 1"):
        dp.range(3).batch(0)


def test_batch_rejects_elements_of_different_structures() -> None:
    keys = dp.range(4).map(lambda i: {"a": i} if i % 2 else {"b": i})
    with pytest.raises(
        BatchShapeError,
        match=r"element 1 has structure \{'a': int64\}.*"
        r"element 0 has \{'b': int64\}",
    ):
        list(keys.batch(2))
    lengths = dp.range(4).map(lambda i: (i, i) if i % 2 else (i,))
    with pytest.raises(BatchShapeError, match=r"element 1 has structure \(int64, int64\)"):
        list(lengths.batch(2))
    inner = dp.range(4).map(lambda i: (i, {"a": i}) if i % 2 else (i, i))
    with pytest.raises(BatchShapeError, match="same structure"):
        list(inner.batch(2))
    mixed = dp.range(4).map(lambda i: {"a": i} if i % 2 else i)
    with pytest.raises(BatchShapeError, match=r"element 0 has int64"):
        list(mixed.batch(2))


def test_batch_delivers_good_batches_before_stacking_error() -> None:
    ds = dp.range(6).map(lambda x: np.zeros(3 if x == 3 else 2)).batch(2)
    out, errors = consume_with_errors(ds)
    assert out == [[[0.0, 0.0]] * 2, [[0.0, 0.0]] * 2]
    assert len(errors) == 1
    assert "cannot stack element 3 of shape (3,) with element 2 of shape (2,)" in errors[0]
    with pytest.raises(BatchShapeError):
        list(ds)


def test_batch_resume_after_error_and_with_remainder() -> None:
    assert_resumes(dp.range(11).batch(3))
    assert_resumes(dp.range(11).batch(3, drop_remainder=True))
    ds = dp.range(7).map(lambda x: np.zeros(3 if x == 2 else 1)).batch(2)
    it = iter(ds)
    assert py(next(it)) == [[0.0], [0.0]]
    with pytest.raises(BatchShapeError):
        next(it)
    state = pickle.loads(pickle.dumps(it.get_state()))
    fresh = iter(ds)
    fresh.set_state(state)
    assert [py(x) for x in fresh] == [[[0.0], [0.0]], [[0.0]]]


@pytest.mark.parametrize("map_parallel", [False, True], ids=["map", "parallel_map"])
@pytest.mark.parametrize("drop", [False, True], ids=["keep", "drop_remainder"])
def test_parallel_batch_under_ignore_errors_equals_the_sequential_batch(map_parallel, drop):
    seq = [b.tolist() for b in _batches(False, map_parallel, drop).ignore_errors()]
    assert [x for b in seq for x in b] == (GOOD if not drop else GOOD[: len(GOOD) // 3 * 3])
    par = [b.tolist() for b in _batches(True, map_parallel, drop).ignore_errors()]
    assert par == seq


def test_parallel_batch_raises_each_failure_at_its_position_and_goes_on():
    it = iter(_batches(True))
    got, errors = [], []
    while True:
        try:
            got.append(next(it).tolist())
        except StopIteration:
            break
        except dp.PipelineError as e:
            errors.append(e.index)
    assert errors == [1, 4, 7, 8, 12]  # the map's failing elements, each raised once
    assert [x for b in got for x in b] == GOOD
    assert [len(b) for b in got] == [3, 3, 2]


def test_parallel_batch_checkpoint_between_failures(tmp_path):
    expected = [b.tolist() for b in _batches(True).ignore_errors()]
    for k in range(len(expected)):
        it = iter(_batches(True).ignore_errors())
        head = [next(it).tolist() for _ in range(k)]
        path = os.path.join(tmp_path, f"s{k}")
        save_state(it.get_state(), path)
        fresh = iter(_batches(True).ignore_errors())
        fresh.set_state(load_state(path))
        assert head + [b.tolist() for b in fresh] == expected, k
        it.close()
        fresh.close()


def test_parallel_batch_over_process_workers_under_ignore_errors():
    par = [b.tolist() for b in _batches(True, True, executor="process").ignore_errors()]
    assert [x for b in par for x in b] == GOOD
