"""``map``: tuple unpacking, spec inference, cardinality, errors naming op and index,
argument checks. (Parallel order: ``tests/parallel/test_ordering.py``; processes:
``tests/parallel/test_processes.py``.)"""

from __future__ import annotations

import numpy as np
import pytest
from harness import values

import datapipe as dp
from datapipe import TensorSpec


def test_map_unpacks_tuples_and_passes_dicts_whole() -> None:
    ds = dp.from_tensor_slices((np.arange(4), np.arange(4) * 10)).map(lambda a, b: a + b)
    assert values(ds) == [0, 11, 22, 33]
    ds = dp.from_tensor_slices({"a": np.arange(3)}).map(lambda d: d["a"] * 2)
    assert values(ds) == [0, 2, 4]


def test_map_infers_spec_and_keeps_cardinality() -> None:
    ds = dp.range(5).map(lambda x: (np.full((2,), x, np.float32), x))
    assert ds.element_spec == (TensorSpec((2,), np.float32), TensorSpec((), np.int64))
    assert ds.cardinality() == 5


def test_map_error_names_op_and_index_after_delivering_earlier_elements() -> None:
    def f(x):
        if x == 5:
            raise ValueError("bad five")
        return x

    it = iter(dp.range(10).map(f))
    got = []
    with pytest.raises(dp.PipelineError, match=r"map at element 5: ValueError: bad five") as ei:
        for x in it:
            got.append(int(x))
    assert got == [0, 1, 2, 3, 4]
    assert ei.value.op == "map" and ei.value.index == 5
    assert isinstance(ei.value.cause, ValueError)


def test_map_rejects_bad_arguments() -> None:
    with pytest.raises(TypeError, match="map: map_func must be callable"):
        dp.range(3).map(3)
    with pytest.raises(ValueError, match="num_parallel_calls"):
        dp.range(3).map(lambda x: x, num_parallel_calls=0)


def _stops_at_3(x):
    if int(x) == 3:
        raise StopIteration  # ends a bare `map()`: here only that element's failure
    return [int(x), -int(x)]


@pytest.mark.parametrize("calls", [None, 2, dp.AUTOTUNE])
def test_list_results_are_tuples_and_a_stop_iteration_fails_its_element_only(calls):
    # The map's loop runs in C over the function itself (not through ReturnsElement, a
    # frame per element); the list -> tuple rule and the StopIteration rule still hold.
    it = iter(dp.range(6).map(_stops_at_3, num_parallel_calls=calls))
    got, errors = [], []
    while True:
        try:
            got.append(next(it))
        except StopIteration:
            break
        except dp.PipelineError as e:
            errors.append(str(e))
    assert got == [(i, -i) for i in (0, 1, 2, 4, 5)] and all(type(x) is tuple for x in got)
    assert errors == ["map at element 3: StopIteration: raised by the function of 'map'"]
