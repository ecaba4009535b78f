"""tf.data's ``zip`` kernel tests (``kernel_tests/zip_test.py``), against datapipe."""

from __future__ import annotations

import collections

import attr
import numpy as np
import pytest

import datapipe as dp

from ._support import VERIFY_FNS, assert_produces, verify_checkpoint

EQUAL = [
    np.tile(np.array([[1], [2], [3], [4]]), 20),
    np.tile(np.array([[12], [13], [14], [15]]), 22),
    np.array([37.0, 38.0, 39.0, 40.0]),
]


def _dataset_factory(components):
    return dp.zip(tuple(dp.from_tensor_slices(c) for c in components))


def test_zip_equal():
    """kernel_tests/zip_test.py::ZipTest.testZipEqual."""
    assert_produces(_dataset_factory(EQUAL), [tuple(c[i] for c in EQUAL) for i in range(4)])


def test_zip_unequal():
    """kernel_tests/zip_test.py::ZipTest.testZipUnequal."""
    components = [[1, 2, 3, 4], [1, 2, 3, 4, 5], [1.0, 2.0]]
    ds = _dataset_factory(components)
    assert ds.cardinality() == 2
    assert_produces(ds, [tuple(c[i] for c in components) for i in range(2)])


def test_nested():
    """kernel_tests/zip_test.py::ZipTest.testNested."""
    datasets = [dp.from_tensor_slices(c) for c in EQUAL]
    ds = dp.zip((datasets[0], (datasets[1], datasets[2])))
    shapes = (ds.element_spec[0].shape, tuple(s.shape for s in ds.element_spec[1]))
    assert shapes == ((20,), ((22,), ()))
    assert_produces(ds, [(EQUAL[0][i], (EQUAL[1][i], EQUAL[2][i])) for i in range(4)])


def test_named_tuple():
    """kernel_tests/zip_test.py::ZipTest.testNamedTuple."""
    Foo = collections.namedtuple("Foo", ["x", "y"])
    ds = dp.zip(Foo(x=dp.range(3), y=dp.range(3, 6)))
    out = list(ds)
    assert all(isinstance(e, Foo) for e in out)
    assert out == [Foo(x=0, y=3), Foo(x=1, y=4), Foo(x=2, y=5)]


def test_attrs():
    """kernel_tests/zip_test.py::ZipTest.testAttrs: an attrs class is a leaf here, not a
    structure (D-TF-10): zip refuses it, naming the component; a namedtuple zips."""

    @attr.s
    class Foo:
        x = attr.ib()
        y = attr.ib()

    with pytest.raises(TypeError, match="zip: component element must be a Dataset, got Foo"):
        dp.zip(Foo(x=dp.range(3), y=dp.range(3, 6)))


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
@pytest.mark.parametrize("arr,num_outputs", [([37.0, 38.0, 39.0, 40.0], 4), ([1.0, 2.0], 2)])
def test_checkpoint_core(verify_fn, arr, num_outputs):
    """kernel_tests/zip_test.py::ZipCheckpointTest.testCore."""

    def build():
        components = [EQUAL[0], EQUAL[1], np.array(arr)]
        datasets = [dp.from_tensor_slices(c) for c in components]
        return dp.zip((datasets[0], (datasets[1], datasets[2])))

    verify_checkpoint(build, num_outputs, verify_fn)
