"""Keras 3's ``hashed_crossing_test.py`` (keras/src/layers/preprocessing/), translated.

The crosses are ``tf.sparse.cross_hashed``'s: the expected bins are upstream's literals.
"""

import numpy as np
import pytest
import torch

import datapipe as dp
import preprocessing as pp

from ._util import assert_values

FEAT1 = np.array(["A", "B", "A", "B", "A"])
FEAT2 = np.array([101, 101, 101, 102, 102])
ONE_HOT = [
    [0.0, 1.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 1.0],
    [0.0, 1.0, 0.0, 0.0, 0.0],
    [0.0, 1.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 1.0, 0.0],
]


@pytest.mark.parametrize(
    "kwargs,shape",
    [
        ({"num_bins": 3, "output_mode": "int"}, (2,)),
        ({"num_bins": 4, "output_mode": "one_hot"}, (2, 4)),
    ],
)
def test_basics(kwargs, shape):
    """hashed_crossing_test.py::test_basics: output shapes, no weights."""
    layer = pp.HashedCrossing(**kwargs)
    out = layer((np.array([1, 2]), np.array([4, 5])))
    assert tuple(out.shape) == shape
    assert list(layer.parameters()) == [] and list(layer.state_dict()) == []


@pytest.mark.parametrize("sparse", [False, True])
def test_correctness(sparse):
    """hashed_crossing_test.py::test_correctness (int, then one_hot dense and sparse)."""
    assert_values(pp.HashedCrossing(num_bins=5)((FEAT1, FEAT2)), [1, 4, 1, 1, 3])
    out = pp.HashedCrossing(num_bins=5, output_mode="one_hot", sparse=sparse)((FEAT1, FEAT2))
    assert out.is_sparse == sparse
    assert_values(out, ONE_HOT)


def test_tf_data_compatibility():
    """hashed_crossing_test.py::test_tf_data_compatibility: a pipeline of (str, int) pairs
    batched by 5, the layer mapped over the two components."""
    layer = pp.HashedCrossing(num_bins=5)
    ds = dp.from_tensor_slices((FEAT1, FEAT2)).batch(5).map(lambda a, b: layer((a, b)))
    assert_values(next(iter(ds)), [1, 4, 1, 1, 3])


def test_static_shape_preserved():
    """hashed_crossing_test.py::test_static_shape_preserved: (5,) in, (5,) out."""
    layer = pp.HashedCrossing(num_bins=5)
    ds = dp.from_tensor_slices((FEAT1, FEAT2)).batch(5, drop_remainder=True)
    assert tuple(next(iter(ds.map(lambda a, b: layer((a, b))))).shape) == (5,)


def test_unsupported_shape_input_fails():
    """hashed_crossing_test.py::test_unsupported_shape_input_fails (upstream feeds floats of
    rank 3; integers of rank 3 here, so the shape is what is refused)."""
    with pytest.raises(ValueError, match=r"must have shape \(\), \(batch,\) or \(batch, 1\)"):
        pp.HashedCrossing(num_bins=10)((np.array([[[1]]]), np.array([[[1]]])))


@pytest.mark.parametrize(
    "kwargs,dtype",
    [
        ({}, torch.int64),
        ({"dtype": "int32"}, torch.int32),
        ({"output_mode": "one_hot"}, torch.float32),
        ({"output_mode": "one_hot", "dtype": "float64"}, torch.float64),
    ],
)
def test_cross_output_dtype(kwargs, dtype):
    """hashed_crossing_test.py::test_cross_output_dtype (an xfail upstream; it holds here)."""
    out = pp.HashedCrossing(num_bins=2, **kwargs)((np.array([1]), np.array([1])))
    assert out.dtype == dtype


def test_non_list_input_fails():
    """hashed_crossing_test.py::test_non_list_input_fails."""
    with pytest.raises(ValueError, match="must be a list or tuple of at least two features"):
        pp.HashedCrossing(num_bins=10)(np.array(1))


def test_single_input_fails():
    """hashed_crossing_test.py::test_single_input_fails."""
    with pytest.raises(ValueError, match="at least two features"):
        pp.HashedCrossing(num_bins=10)([np.array(1)])


def test_float_input_fails():
    """hashed_crossing_test.py::test_float_input_fails."""
    with pytest.raises(ValueError, match="must be integers or strings"):
        pp.HashedCrossing(num_bins=10)((np.array([1.0]), np.array([1.0])))


def test_tf_string():
    """hashed_crossing_test.py::test_tf_string: string features as numpy (datapipe's
    strings): a scalar cross, one_hot, int, and a sparse one_hot layer's config clone on
    (5, 1) features."""
    assert int(pp.HashedCrossing(num_bins=10)((np.array("A"), np.array(101)))) == 1
    assert_values(pp.HashedCrossing(num_bins=5, output_mode="one_hot")((FEAT1, FEAT2)), ONE_HOT)
    assert_values(pp.HashedCrossing(num_bins=5)((FEAT1, FEAT2)), [1, 4, 1, 1, 3])
    layer = pp.HashedCrossing(num_bins=5, output_mode="one_hot", sparse=True)
    clone = pp.HashedCrossing.from_config(layer.get_config())
    columns = (FEAT1[:, None], FEAT2[:, None])
    assert torch.equal(clone(columns).to_dense(), layer(columns).to_dense())
    assert_values(layer(columns), ONE_HOT)
