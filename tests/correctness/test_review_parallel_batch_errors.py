"""Review of issues 10-11: parallel ``batch`` and failing input elements. The sequential
batch keeps the elements read before a failure (the batch minus the failing element, filled
with the next ones); the parallel one dropped them silently."""

from __future__ import annotations

import os

import numpy as np
import pytest

import datapipe as dp
from datapipe.distribute.state_io import load_state, save_state

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
