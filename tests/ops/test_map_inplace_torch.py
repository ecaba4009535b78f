"""An in-place torch op on ``torch.from_numpy(x)`` / ``torch.as_tensor(x)`` inside a map
function never writes into the source array or the cache (issue 35, item 6; D-TF-28).

Elements of ``from_tensor_slices``, ``from_tensors`` and ``cache`` are read-only numpy
views; ``torch.from_numpy`` of a read-only array shares its memory (with a warning), so
``torch.from_numpy(x).float().div_(2)`` (``.float()`` of float32 is the same tensor)
halved the user's array, and epoch 2 differed from epoch 1. The map function now gets
writable copies of such views.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import datapipe as dp

torch = pytest.importorskip("torch")


def _halve_in_place(x):
    return torch.from_numpy(x).float().div_(2).numpy()


def _double_in_place(x):
    return torch.as_tensor(x).mul_(2).numpy()


def _source() -> np.ndarray:
    return np.arange(48, dtype=np.float32).reshape(12, 4)


def _epochs(ds, n: int = 2) -> list[np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # from_numpy of a read-only array warns: none here
        return [np.stack([np.asarray(x) for x in ds]) for _ in range(n)]


@pytest.mark.parametrize("calls", [None, 2, dp.AUTOTUNE])
@pytest.mark.parametrize(
    ("fn", "factor"), [(_halve_in_place, 0.5), (_double_in_place, 2.0)], ids=["div_", "mul_"]
)
def test_in_place_op_in_map_leaves_the_source_unchanged(calls, fn, factor):
    src = _source()
    before = src.copy()
    ds = dp.from_tensor_slices(src).map(fn, num_parallel_calls=calls)
    first, second = _epochs(ds)
    np.testing.assert_array_equal(src, before)
    np.testing.assert_array_equal(first, before * factor)
    np.testing.assert_array_equal(second, first)
    assert first.dtype == np.float32 and first.shape == (12, 4)


@pytest.mark.parametrize("calls", [None, 2])
def test_in_place_op_in_map_leaves_the_cache_unchanged(calls):
    src = _source()
    before = src.copy()
    # the cache holds the rows ``x + 1`` made (not views of src): its own arrays
    ds = dp.from_tensor_slices(src).map(lambda x: x + 1).cache()
    ds = ds.map(_halve_in_place, num_parallel_calls=calls)
    first, second = _epochs(ds)
    np.testing.assert_array_equal(src, before)
    np.testing.assert_array_equal(first, (before + 1) * 0.5)
    np.testing.assert_array_equal(second, first)


def test_in_place_op_in_map_of_from_tensors_and_random_access():
    src = _source()
    before = src.copy()
    ds = dp.from_tensors(src).map(_double_in_place)
    first, second = _epochs(ds)
    np.testing.assert_array_equal(src, before)
    np.testing.assert_array_equal(first[0], before * 2)
    np.testing.assert_array_equal(second, first)
    sliced = dp.from_tensor_slices(src).map(_double_in_place)
    np.testing.assert_array_equal(np.asarray(sliced[3]), before[3] * 2)
    np.testing.assert_array_equal(np.asarray(sliced[3]), before[3] * 2)  # read twice
    np.testing.assert_array_equal(src, before)


def test_structured_elements_get_writable_copies_and_the_rest_is_left_as_it_is():
    images, labels = _source(), np.arange(24, dtype=np.int64).reshape(12, 2)
    before = images.copy()

    def f(image, label):
        torch.from_numpy(image).mul_(0)
        torch.from_numpy(label).add_(100)
        return image, label

    ds = dp.from_tensor_slices((images, labels)).map(f)
    for _ in range(2):
        got = list(ds)
        assert [lab.tolist() for _, lab in got] == [[100 + 2 * i, 101 + 2 * i] for i in range(12)]
        assert all(not image.any() for image, _ in got)
    np.testing.assert_array_equal(images, before)
    np.testing.assert_array_equal(labels, np.arange(24).reshape(12, 2))


def test_no_copy_where_no_source_hands_out_views():
    from datapipe._functions import hands_out_views

    assert not hands_out_views(dp.range(10).map(lambda x: x))
    assert hands_out_views(dp.from_tensor_slices(_source()).shuffle(4))
    assert hands_out_views(dp.from_tensor_slices(_source()).map(lambda x: x).cache())
    # elements of rank 0 are numpy scalars (immutable): nothing to copy (W1's source)
    assert not hands_out_views(dp.range(4).cache())
    assert not hands_out_views(dp.from_tensor_slices(np.arange(4)).shuffle(4))
