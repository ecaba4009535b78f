"""``from_tensor_slices``: numpy and torch elements, nested structures, specs, byte strings
with trailing NULs, and errors naming the components."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import torch

import datapipe as dp
from datapipe import TensorSpec

Point = collections.namedtuple("Point", ["x", "y"])


def test_from_tensor_slices_numpy_keeps_type_and_spec() -> None:
    arr = np.arange(12, dtype=np.float32).reshape(4, 3)
    ds = dp.from_tensor_slices(arr)
    out = list(ds)
    assert len(out) == 4 and all(isinstance(x, np.ndarray) for x in out)
    np.testing.assert_array_equal(out[2], [6, 7, 8])
    assert out[0].dtype == np.float32
    assert ds.element_spec == TensorSpec((3,), np.float32)
    assert ds.cardinality() == 4
    assert np.shares_memory(out[1], arr)  # slices are views: no copy of the source
    assert not out[1].flags.writeable and arr.flags.writeable  # read-only views only


def test_from_tensor_slices_torch_in_torch_out() -> None:
    t = torch.arange(6).reshape(3, 2)
    out = list(dp.from_tensor_slices(t))
    assert all(isinstance(x, torch.Tensor) for x in out)
    assert out[2].tolist() == [4, 5]
    assert dp.from_tensor_slices(t).element_spec == TensorSpec((2,), torch.int64)


def test_from_tensor_slices_nested_structures() -> None:
    ds = dp.from_tensor_slices({"a": np.arange(3), "b": (np.ones((3, 2)), [7, 8, 9])})
    el = list(ds)[1]
    assert set(el) == {"a", "b"} and int(el["a"]) == 1 and int(el["b"][1]) == 8
    assert el["b"][0].shape == (2,)
    spec = ds.element_spec
    assert spec["a"] == TensorSpec((), np.int64) and spec["b"][0] == TensorSpec((2,), np.float64)
    pts = list(dp.from_tensor_slices(Point(np.arange(2), np.arange(2) * 10)))
    assert isinstance(pts[1], Point) and int(pts[1].y) == 10


def test_from_tensor_slices_mismatched_first_dims_names_components() -> None:
    with pytest.raises(ValueError, match=r"\['a'\]: 3.*\['b'\]: 4"):
        dp.from_tensor_slices({"a": np.zeros(3), "b": np.zeros(4)})
    with pytest.raises(ValueError, match="scalar"):
        dp.from_tensor_slices(np.float32(1))


def test_lists_of_strings_keep_trailing_nul_bytes():
    # numpy's fixed-width "S"/"U" arrays drop trailing NULs; tf.data keeps b"a\x00".
    raw = [b"a\x00", b"", b"xyz\x00\x00"]
    assert list(dp.from_tensor_slices(raw)) == raw
    assert type(next(iter(dp.from_tensor_slices(raw)))) is bytes
    assert list(dp.from_tensor_slices(["a\x00", "b"])) == ["a\x00", "b"]
    (one,) = list(dp.from_tensors(raw))
    assert one.dtype == object and one.tolist() == raw
    grid = next(iter(dp.from_tensor_slices([[b"p\x00", b"q"], [b"r", b"s"]])))
    assert grid.dtype == object and grid.tolist() == [b"p\x00", b"q"]
    assert dp.from_tensor_slices(raw).element_spec == dp.TensorSpec((), object)


def _add_one_in_place(x):
    x += 1  # what `x /= 255` on a float image does
    return x


@pytest.mark.parametrize(
    "map_kwargs",
    [
        {},
        {"num_parallel_calls": 2, "executor": "thread"},
        {"num_parallel_calls": 2, "executor": "process"},
        {"num_parallel_calls": dp.AUTOTUNE},
    ],
    ids=["sequential", "thread", "process", "autotune"],
)
def test_an_in_place_map_works_on_a_copy_and_leaves_the_source_alone(map_kwargs):
    # breaker: sequential and thread maps wrote into the user's array through the slices
    # (epoch 2 gave 2 where epoch 1 gave 1), processes did not: AUTOTUNE's choice changed
    # the results. The elements are read-only views; a map's function gets writable
    # copies of them (issue 35 item 6: torch.from_numpy of a view shared the source), so
    # every executor gives the same results and the source stays as it was.
    source = np.zeros((40, 3), np.float32)
    ds = dp.from_tensor_slices(source).map(_add_one_in_place, **map_kwargs)
    for _ in range(2):
        assert [x.tolist() for x in ds] == [[1.0, 1.0, 1.0]] * 40
    assert float(np.abs(source).sum()) == 0.0 and source.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        _add_one_in_place(dp.from_tensor_slices(source)[3])  # random access: a view
    shuffled = dp.from_tensor_slices(source).global_shuffle(seed=1)
    with pytest.raises(ValueError, match="read-only"):
        _add_one_in_place(next(iter(shuffled)))  # an index list's gathered copy too
    assert float(np.abs(source).sum()) == 0.0


def test_opencv_writing_into_an_element_gets_the_hint_too():
    cv2 = pytest.importorskip("cv2")
    images = dp.from_tensor_slices(np.zeros((2, 8, 8, 3), np.uint8))
    ds = images.map(lambda x: cv2.rectangle(x, (0, 0), (2, 2), (255, 0, 0), 1))
    with pytest.raises(dp.PipelineError, match="marked as readonly") as e:
        next(iter(ds))
    assert "compute a new array, x = x / 255" in str(e.value)
    drawn = images.map(lambda x: cv2.rectangle(x.copy(), (0, 0), (2, 2), (255, 0, 0), 1))
    assert int(next(iter(drawn))[0, 0, 0]) == 255


def test_torch_elements_are_views_as_in_tensor_dataset():
    # D-TF-28: torch has no read-only tensors (and a clone per row costs ~6 us)
    source = torch.zeros(4, 3)
    first = next(iter(dp.from_tensor_slices(source)))
    assert first.data_ptr() == source.data_ptr()


def test_layers_take_read_only_elements_without_a_warning():
    # torch warns on (and would write through) a read-only numpy array: layers copy one
    import warnings

    import preprocessing as pp

    source = np.full((2, 3, 8, 8), 300.0, np.float32)
    layer = pp.RandomContrast(0.5, value_range=(0, 255), seed=1, data_format="channels_first")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = [layer(x) for x in dp.from_tensor_slices(source)]
    assert [tuple(o.shape) for o in out] == [(3, 8, 8)] * 2 and float(source.max()) == 300.0


def test_read_only_elements_reach_torch_without_a_warning_or_a_write_through():
    # breaker3: Normalization (and its adapt), Discretization, Rescaling, IntegerLookup,
    # CategoryEncoding and a DataLoader's collate over as_torch_dataset() made tensors of
    # read-only arrays: torch's "not writable" UserWarning, and writes went to the source
    import warnings

    import preprocessing as pp

    source = np.linspace(0.0, 0.9, 48, dtype=np.float32).reshape(16, 3)
    kept = source.copy()
    ds = dp.from_tensor_slices(source)
    ints = dp.from_tensor_slices(np.arange(12).reshape(6, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        norm = pp.Normalization()
        norm.adapt(ds.batch(4))
        assert norm(next(iter(ds))).shape == (3,)
        bins = pp.Discretization(bin_boundaries=[0.5])(next(iter(ds)))
        assert bins.tolist() == [0, 0, 0]
        assert pp.Rescaling(2.0)(next(iter(ds))).tolist() == [
            0.0,
            2 * source[0, 1].item(),
            2 * source[0, 2].item(),
        ]
        assert pp.IntegerLookup(vocabulary=[1, 2, 3])(next(iter(ints))).tolist() == [0, 1]
        encoded = pp.CategoryEncoding(num_tokens=4, output_mode="multi_hot")(next(iter(ints)))
        assert encoded.tolist() == [1.0, 1.0, 0.0, 0.0]
        loader = torch.utils.data.DataLoader(ds.as_torch_dataset(), batch_size=4)
        first = next(iter(loader))
        first += 1
        one = next(iter(torch.utils.data.DataLoader(ds.as_torch_dataset(), batch_size=None)))
        one += 1
    assert (source == kept).all()


def test_a_batch_of_slices_is_not_a_view_of_the_source():
    source = np.arange(12, dtype=np.int64)
    batch = next(iter(dp.from_tensor_slices(source).batch(4)))
    batch[:] = -1  # a batch is a new array (stacked): writable, the source untouched
    assert source.tolist() == list(range(12))
    assert [b.tolist() for b in dp.from_tensor_slices(source).batch(4)][0] == [0, 1, 2, 3]
