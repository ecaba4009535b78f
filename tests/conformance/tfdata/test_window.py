"""tf.data's ``window`` kernel tests (``kernel_tests/window_test.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp
from datapipe._spec import UnknownSpec
from datapipe.errors import BatchShapeError

from ._support import VERIFY_FNS, assert_produces, verify_checkpoint

COMPONENTS = (
    np.arange(7),
    np.array([[1, 2, 3]]) * np.arange(7)[:, np.newaxis],
    np.array(37.0) * np.arange(7),
)

WINDOW_CASES = [
    (20, size, shift, stride, drop)
    for size in (10, 14, 17)
    for shift in (7, 14)
    for stride in (1, 2, 6)
    for drop in (True, False)
] + [(count, 10, 4, 1, drop) for count in (0, 1) for drop in (True, False)]


@pytest.mark.parametrize("count,size,shift,stride,drop_remainder", WINDOW_CASES)
def test_window_dataset(count, size, shift, stride, drop_remainder):
    """kernel_tests/window_test.py::WindowTest.testWindowDataset (with no window at all,
    flat_map has no element to infer its spec from: ``UnknownSpec``, D-TF-13)."""
    ds = (
        dp.from_tensor_slices(COMPONENTS)
        .map(lambda x, y, z: (np.square(x), np.square(y), np.square(z)))
        .repeat(count)
        .window(size=size, shift=shift, stride=stride, drop_remainder=drop_remainder)
        .flat_map(lambda x, y, z: dp.zip((x.batch(size), y.batch(size), z.batch(size))))
    )
    n = count * 7
    if n < (10 if drop_remainder else 1):  # no window: D-TF-13
        assert isinstance(ds.element_spec, UnknownSpec)
    else:
        assert [s.shape for s in ds.element_spec] == [(None, *c.shape[1:]) for c in COMPONENTS]
    num_full = max(0, (n - ((size - 1) * stride + 1)) // shift + 1)
    expected = []
    for i in range(num_full):
        rows = [(i * shift + j * stride) % 7 for j in range(size)]
        expected.append(tuple(c[rows] ** 2 for c in COMPONENTS))
    if not drop_remainder:
        num_partial = n // shift + (n % shift > 0) - num_full
        for i in range(num_partial):
            remaining = n - (num_full + i) * shift
            num_elements = remaining // stride + (remaining % stride > 0)
            rows = [((num_full + i) * shift + j * stride) % 7 for j in range(num_elements)]
            expected.append(tuple(c[rows] ** 2 for c in COMPONENTS))
    assert_produces(ds, expected)


@pytest.mark.parametrize("size,shift,stride", [(0, 3, 1), (3, 0, 1), (3, 3, 0)])
def test_window_dataset_invalid(size, shift, stride):
    """kernel_tests/window_test.py::WindowTest.testWindowDatasetInvalid."""
    with pytest.raises(ValueError, match="window: .* must be >= 1, got 0"):
        dp.range(10).map(lambda x: x).repeat(20).window(size=size, shift=shift, stride=stride)


def test_window_different_nested_structures():
    """kernel_tests/window_test.py::WindowTest.testWindowDifferentNestedStructures."""
    a, b = next(iter(dp.from_tensor_slices(([1, 2], [3, 4])).window(2)))
    assert [int(x) for x in a] == [1, 2] and [int(x) for x in b] == [3, 4]
    d = next(iter(dp.from_tensor_slices({"a": [1, 2]}).window(2)))
    assert list(d) == ["a"] and [int(x) for x in d["a"]] == [1, 2]


def test_window_shape_error():
    """kernel_tests/window_test.py::WindowTest.testWindowShapeError."""

    def generator():
        yield [1.0, 2.0, 3.0]
        yield [4.0, 5.0, 6.0]
        yield [7.0, 8.0, 9.0, 10.0]

    ds = dp.from_generator(generator, dp.TensorSpec([None], np.float32)).window(size=3, shift=1)
    ds = ds.flat_map(lambda x: x.batch(batch_size=3))
    with pytest.raises(
        BatchShapeError,
        match=r"cannot stack element 2 of shape \(4,\) with element 0 of shape \(3,\)",
    ):
        next(iter(ds))


def check_numerics(x):
    if np.isnan(x):
        raise ValueError("message : Tensor had NaN values")
    return x


def test_window_ignore_errors():
    """kernel_tests/window_test.py::WindowTest.testWindowIgnoreErrors: the failing elements
    (positions 1 and 3) are in no window (stride 2), so no error is raised."""
    input_values = np.float32([1.0, np.nan, 2.0, np.nan, 3.0])
    ds = dp.from_tensor_slices(input_values).map(check_numerics)
    ds = ds.window(size=2, shift=2, stride=2, drop_remainder=True)
    ds = ds.flat_map(lambda x: x.batch(batch_size=2))
    assert_produces(ds, [np.float32([1.0, 2.0]), np.float32([2.0, 3.0])])


def test_nested_output():
    """kernel_tests/window_test.py::WindowTest.testNestedOutput."""
    ds = dp.range(100)
    ds = dp.zip((ds, ds)).window(10)
    windows = list(ds)
    assert len(windows) == 10
    for i, (x, y) in enumerate(windows):
        assert_produces(x, [np.int64(v) for v in range(i * 10, (i + 1) * 10)])
        assert_produces(y, [np.int64(v) for v in range(i * 10, (i + 1) * 10)])


def test_drop_remainder_output():
    """kernel_tests/window_test.py::WindowTest.testDropRemainderOutput."""
    ds = dp.range(100).window(30, drop_remainder=True).flat_map(lambda x: x.batch(30)).batch(4)
    assert_produces(ds, [np.array([[y + 30 * x for y in range(30)] for x in range(3)])])


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
def test_checkpoint(verify_fn):
    """kernel_tests/window_test.py::WindowCheckpointTest.test."""

    def build():
        return dp.range(42).window(6).interleave(lambda x: x, cycle_length=2, num_parallel_calls=2)

    verify_checkpoint(build, 42, verify_fn)
