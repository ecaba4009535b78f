"""Worker exceptions reach the consumer at the element's position; ignore_errors counts."""

from __future__ import annotations

import logging
import time

import pytest

import datapipe as dp
from datapipe._batching import BatchShapeError
from datapipe.errors import PipelineError

pytestmark = pytest.mark.timeout(30)


def _fail_at(bad: set[int]):
    def f(x):
        if int(x) in bad:
            raise ValueError(f"bad element {int(x)}")
        time.sleep(0.0002)
        return int(x)

    return f


@pytest.mark.parametrize("calls", [2, 4, dp.AUTOTUNE])
def test_map_error_at_its_position_with_op_and_index(calls):
    it = iter(dp.range(100).map(_fail_at({37}), num_parallel_calls=calls, name="decode"))
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
    ds = dp.range(50).map(_fail_at({20}), num_parallel_calls=4, deterministic=False)
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


def test_error_in_interleave_sub_dataset_position():
    def sub(n):
        return dp.range(3).map(_fail_at({1} if int(n) == 1 else set()))

    it = iter(dp.range(2).interleave(sub, cycle_length=2, num_parallel_calls=2))
    assert [int(next(it)) for _ in range(3)] == [0, 0, 1]
    with pytest.raises(PipelineError) as info:
        next(it)
    assert info.value.index == 1
    it.close()


def test_prefetch_delivers_error_in_place():
    it = iter(dp.range(30).map(_fail_at({12})).prefetch(4))
    got = []
    with pytest.raises(PipelineError, match="map at element 12"):
        for x in it:
            got.append(int(x))
    assert got == list(range(12))
    assert [int(x) for x in it] == list(range(13, 30))


@pytest.mark.parametrize("calls", [None, 3])
def test_ignore_errors_drops_and_counts(calls):
    bad = {0, 5, 6, 41, 99}
    ds = dp.range(100).map(_fail_at(bad), num_parallel_calls=calls).prefetch(2).ignore_errors()
    it = iter(ds)
    assert [int(x) for x in it] == [i for i in range(100) if i not in bad]
    assert dp.ignored_count(it) == 5
    assert it._root.num_ignored == 5


def test_ignore_errors_logs_each_path_once(caplog):
    def read(x):
        raise PipelineError("read_file", int(x), OSError("truncated"), path=f"/d/{int(x) % 2}.jpg")

    ds = dp.range(6).map(read).ignore_errors(log_warning=True)
    with caplog.at_level(logging.WARNING, logger="datapipe"):
        it = iter(ds)
        assert list(it) == []
    assert dp.ignored_count(it) == 6
    msgs = [r.getMessage() for r in caplog.records]
    assert len(msgs) == 2
    assert "/d/0.jpg" in msgs[0] and "/d/1.jpg" in msgs[1]


def test_ignore_errors_state_round_trip():
    ds = dp.range(20).map(_fail_at({3, 15}), num_parallel_calls=2).ignore_errors()
    it = iter(ds)
    first = [int(next(it)) for _ in range(5)]
    state = it.get_state()
    rest = [int(x) for x in it]
    it2 = iter(ds)
    it2.set_state(state)
    assert [int(x) for x in it2] == rest
    assert first + rest == [i for i in range(20) if i not in (3, 15)]
    assert dp.ignored_count(it2) == 2
