"""Worker exceptions reach the consumer at the element's position (parallel map, batch,
prefetch). ``ignore_errors`` and ``interleave`` have their own files under ``tests/ops``."""

from __future__ import annotations

import pytest
from harness import fail_at

import datapipe as dp
from datapipe.errors import BatchShapeError, PipelineError

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("calls", [2, 4, dp.AUTOTUNE])
def test_map_error_at_its_position_with_op_and_index(calls):
    it = iter(dp.range(100).map(fail_at({37}), num_parallel_calls=calls, name="decode"))
    got = []
    with pytest.raises(PipelineError) as info:
        for x in it:
            got.append(int(x))
    assert got == list(range(37))
    err = info.value
    assert (err.op, err.index) == ("decode", 37)
    assert isinstance(err.cause, ValueError)
    assert str(err) == "decode at element 37: ValueError: bad element 37"
    # The pipeline goes on after the failing element (tf.data lets iteration continue).
    assert [int(x) for x in it] == list(range(38, 100))


def test_nondeterministic_error_names_the_element():
    ds = dp.range(50).map(fail_at({20}), num_parallel_calls=4, deterministic=False)
    got, errors = [], []
    it = iter(ds)
    while True:
        try:
            got.append(int(next(it)))
        except StopIteration:
            break
        except PipelineError as e:
            errors.append((e.op, e.index))
    assert errors == [("map", 20)]
    assert sorted(got) == [i for i in range(50) if i != 20]


def test_parallel_batch_shape_error_names_batch_and_element():
    import numpy as np

    ds = (
        dp.range(10).map(lambda x: np.zeros(3 if int(x) != 5 else 4)).batch(4, num_parallel_calls=2)
    )
    it = iter(ds)
    assert next(it).shape == (4, 3)
    # the same error as the sequential batch raises (it already names op and elements)
    with pytest.raises(BatchShapeError, match=r"batch: cannot stack element 5 of shape \(4,\)"):
        next(it)
    assert next(it).shape == (2, 3)  # elements 8 and 9: the pipeline goes on


def test_prefetch_delivers_error_in_place():
    it = iter(dp.range(30).map(fail_at({12})).prefetch(4))
    got = []
    with pytest.raises(PipelineError, match="map at element 12"):
        for x in it:
            got.append(int(x))
    assert got == list(range(12))
    assert [int(x) for x in it] == list(range(13, 30))
