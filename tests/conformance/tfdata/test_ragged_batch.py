"""tf.data's ``ragged_batch`` kernel tests (``kernel_tests/ragged_batch_test.py``).

A ragged component here is a 1-D object array of the rows (``ragged_batch``'s docstring);
tf.data's is a ``tf.RaggedTensor``. Both give the same rows, which is what is compared."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp
from datapipe import _structure as nest


def _ragged(rows):
    out = np.empty(len(rows), dtype=object)
    for i, r in enumerate(rows):
        out[i] = np.array(r, dtype=np.int64)
    return out


def make_scalar_ds(nrows):
    return dp.from_tensor_slices(np.arange(nrows))


def make_vector_ds(nrows):
    return make_scalar_ds(nrows).map(lambda x: np.full([int(x)], x))


def make_matrix_ds1(nrows):
    return make_scalar_ds(nrows).map(lambda x: np.full([int(x), 2], x))


def make_matrix_ds2(nrows):
    return make_scalar_ds(nrows).map(lambda x: np.full([2, int(x)], x))


def make_matrix_ds_fully_defined(nrows):
    return make_scalar_ds(nrows).map(lambda x: np.full([2, 3], x))


def make_5dtensor_ds(nrows):
    return make_scalar_ds(nrows).map(lambda x: np.full([2, int(x), 3, 2 * int(x), 4], x))


def make_ragged_ds(nrows):
    """Rows of rows of different lengths (upstream: slices of a RaggedTensor)."""
    values = [[[i] * (i % 3) for i in range(j)] * (j % 3) for j in range(nrows)]
    return make_scalar_ds(nrows).map(lambda j: _ragged(values[int(j)]))


def make_dict_ds(nrows):
    def transform(x):
        n = int(x)
        return {
            "shape=[]": x,
            "shape=[x]": np.arange(n),
            "shape=[x, 2]": np.full([n, 2], x),
            "shape=[2, x]": np.full([2, n], x),
            "shape=[2, x, 3, 2x, 4]": np.full([2, n, 3, 2 * n, 4], x),
        }

    return make_scalar_ds(nrows).map(transform)


def make_tuple_ds(nrows):
    return make_scalar_ds(nrows).map(lambda x: (x, np.arange(int(x)), np.full([int(x), 2], x)))


MAKERS = [
    make_scalar_ds, make_vector_ds, make_matrix_ds1, make_matrix_ds2, make_ragged_ds,
    make_5dtensor_ds, make_dict_ds, make_tuple_ds, make_matrix_ds_fully_defined,
]  # fmt: skip


def _to_list(v):
    if isinstance(v, np.ndarray) and v.dtype == object:
        return [_to_list(r) for r in v]
    return np.asarray(v).tolist()


@pytest.mark.parametrize("drop_remainder", [True, False])
@pytest.mark.parametrize("nrows", [0, 20, 23])
@pytest.mark.parametrize("make_dataset", MAKERS, ids=[m.__name__ for m in MAKERS])
def test_basic(make_dataset, nrows, drop_remainder):
    """kernel_tests/ragged_batch_test.py::RaggedBatchTest.testBasic: each batch holds the
    rows it batched, component by component (a fully defined shape is ragged here too,
    by rank: D-TF-17)."""
    ds = make_dataset(nrows)
    rows = [nest.map_structure(_to_list, r) for r in ds]
    assert len(rows) == nrows
    batches = list(ds.ragged_batch(4, drop_remainder))
    starts = [s for s in range(0, nrows, 4) if not (drop_remainder and s + 4 > nrows)]
    assert len(batches) == len(starts)
    for start, batch in zip(starts, batches):
        want = rows[start : start + 4]
        got_leaves = [_to_list(leaf) for leaf in nest.flatten(batch)]
        want_leaves = [list(col) for col in zip(*[nest.flatten(r) for r in want])]
        assert got_leaves == want_leaves


def test_with_structured_elements():
    """kernel_tests/ragged_batch_test.py::RaggedBatchTest.testWithStructuredElements (its
    dense and ragged components; the SparseTensor one has no counterpart here)."""

    def make_structure(x):
        return {"dense": np.full([int(x)], x), "ragged": _ragged([[x], [x, x]])}

    ds = dp.from_tensor_slices(np.arange(20)).map(make_structure).ragged_batch(4)
    for i, result in zip(range(0, 20, 4), ds):
        rows = range(i, i + 4)
        assert _to_list(result["dense"]) == [[r] * r for r in rows]
        assert _to_list(result["ragged"]) == [[[r], [r, r]] for r in rows]
