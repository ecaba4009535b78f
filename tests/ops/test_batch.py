"""Core ops: sources, map, batch, take/skip/repeat, shuffle, to_torch, options, state."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import torch

import datapipe as dp
from datapipe import TensorSpec
from datapipe._batching import BatchShapeError

Point = collections.namedtuple("Point", ["x", "y"])


def ints(ds) -> list:
    return [int(v) for v in ds]


# ---- sources -----------------------------------------------------------------------------
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


def test_range_matches_python_range() -> None:
    for args in [(5,), (2, 9), (10, 0, -3), (0, 10, 4), (3, 3)]:
        ds = dp.range(*args)
        assert ints(ds) == list(range(*args))
        assert ds.cardinality() == len(range(*args))
    assert dp.range(3).element_spec == TensorSpec((), np.int64)
    assert list(dp.range(2, dtype="int32"))[0].dtype == np.int32


# ---- map ---------------------------------------------------------------------------------
def test_map_unpacks_tuples_and_passes_dicts_whole() -> None:
    ds = dp.from_tensor_slices((np.arange(4), np.arange(4) * 10)).map(lambda a, b: a + b)
    assert ints(ds) == [0, 11, 22, 33]
    ds = dp.from_tensor_slices({"a": np.arange(3)}).map(lambda d: d["a"] * 2)
    assert ints(ds) == [0, 2, 4]


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


# ---- batch -------------------------------------------------------------------------------
def test_batch_stacks_and_reports_spec_and_cardinality() -> None:
    ds = dp.from_tensor_slices((np.arange(10), np.ones((10, 2), np.float32))).batch(4)
    out = list(ds)
    assert [len(b[0]) for b in out] == [4, 4, 2]
    assert out[1][0].tolist() == [4, 5, 6, 7] and out[0][1].shape == (4, 2)
    assert ds.cardinality() == 3
    assert ds.element_spec == (TensorSpec((None,), np.int64), TensorSpec((None, 2), np.float32))
    dropped = dp.range(10).batch(4, drop_remainder=True)
    assert [b.tolist() for b in dropped] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert dropped.cardinality() == 2 and dropped.element_spec == TensorSpec((4,), np.int64)


def test_batch_of_torch_elements_is_torch() -> None:
    b = next(iter(dp.from_tensor_slices(torch.ones(5, 3)).batch(2)))
    assert isinstance(b, torch.Tensor) and tuple(b.shape) == (2, 3)


def test_batch_shape_mismatch_names_index_shapes_and_fix() -> None:
    ds = dp.range(4).map(lambda x: np.zeros((2, 2) if x < 3 else (3, 2)))
    with pytest.raises(BatchShapeError) as ei:
        list(ds.batch(4))
    msg = str(ei.value)
    assert "element 3 of shape (3, 2)" in msg and "element 0 of shape (2, 2)" in msg
    assert "padded_batch" in msg and "Resizing" in msg


def test_batch_rejects_bad_size() -> None:
    with pytest.raises(ValueError, match="batch: batch_size must be >= 1"):
        dp.range(3).batch(0)


# ---- take / skip / repeat ----------------------------------------------------------------
def test_take_skip_repeat_elements_and_cardinality() -> None:
    assert ints(dp.range(10).take(3)) == [0, 1, 2]
    assert ints(dp.range(10).skip(7)) == [7, 8, 9]
    assert ints(dp.range(3).repeat(2)) == [0, 1, 2, 0, 1, 2]
    assert dp.range(10).take(3).cardinality() == 3
    assert dp.range(10).skip(12).cardinality() == 0
    assert dp.range(3).repeat().cardinality() == dp.INFINITE_CARDINALITY
    assert dp.range(3).repeat().take(7).cardinality() == 7
    assert ints(dp.range(3).repeat().take(7)) == [0, 1, 2, 0, 1, 2, 0]
    assert dp.range(3).repeat(0).cardinality() == 0 and list(dp.range(3).repeat(0)) == []
    assert ints(dp.range(5).take(-1)) == [0, 1, 2, 3, 4]
    assert list(dp.range(5).skip(-1)) == []


def test_take_never_computes_past_what_it_needs() -> None:
    seen = []
    ds = dp.range(1000).map(lambda x: seen.append(int(x)) or x).take(3)
    assert ints(ds) == [0, 1, 2]
    assert seen == [0, 1, 2]


def test_repeat_of_empty_dataset_forever_terminates() -> None:
    assert list(dp.range(0).repeat()) == []


# ---- shuffle -----------------------------------------------------------------------------
def test_shuffle_is_a_reproducible_permutation() -> None:
    a = ints(dp.range(100).shuffle(10, seed=3))
    assert sorted(a) == list(range(100)) and a != list(range(100))
    assert a == ints(dp.range(100).shuffle(10, seed=3))
    assert a != ints(dp.range(100).shuffle(10, seed=4))


def test_shuffle_reshuffles_each_iteration_reproducibly() -> None:
    ds = dp.range(50).shuffle(50, seed=1)
    first, second = ints(ds), ints(ds)
    assert sorted(first) == sorted(second) == list(range(50)) and first != second
    again = dp.range(50).shuffle(50, seed=1)
    assert ints(again) == first and ints(again) == second
    fixed = dp.range(50).shuffle(50, seed=1, reshuffle_each_iteration=False)
    assert ints(fixed) == ints(fixed)
    rep = ints(dp.range(20).shuffle(20, seed=2).repeat(2))
    assert rep[:20] != rep[20:] and sorted(rep[20:]) == list(range(20))


def test_global_seed_from_options_fixes_the_order() -> None:
    def run(seed):
        return ints(dp.range(30).shuffle(30).with_options(dp.Options(seed=seed)))

    assert run(5) == run(5) and run(5) != run(6)


def test_shuffle_buffer_keeps_references_not_copies() -> None:
    src = np.arange(40, dtype=np.float64).reshape(10, 4)
    out = list(dp.from_tensor_slices(src).shuffle(4, seed=0))
    assert all(np.shares_memory(x, src) for x in out)


# ---- to_torch ----------------------------------------------------------------------------
def test_to_torch_converts_without_copying() -> None:
    src = np.arange(12, dtype=np.float32).reshape(6, 2)
    ds = dp.from_tensor_slices((src, np.arange(6), np.array(["a"] * 6))).batch(3).to_torch()
    x, y, s = next(iter(ds))
    assert isinstance(x, torch.Tensor) and x.dtype == torch.float32 and tuple(x.shape) == (3, 2)
    assert y.dtype == torch.int64 and isinstance(s, np.ndarray)
    spec = ds.element_spec
    assert spec[0] == TensorSpec((None, 2), torch.float32) and spec[2].dtype == s.dtype == object
    view = next(iter(dp.from_tensor_slices(src).to_torch()))
    assert view.data_ptr() == src.ctypes.data  # shares the numpy buffer


# ---- options -----------------------------------------------------------------------------
def test_options_merge_later_wins() -> None:
    ds = dp.range(3).with_options(dp.Options(seed=1, deterministic=False))
    ds = ds.with_options(dp.Options(seed=2))
    opts = ds.options
    assert opts.seed == 2 and opts.deterministic is False
    with pytest.raises(TypeError, match="with_options"):
        dp.range(3).with_options({"seed": 1})


# ---- checkpointing -----------------------------------------------------------------------
CHAINS = {
    "map-batch": lambda: dp.range(50).map(lambda x: x * 3).batch(4),
    "shuffle-repeat-take": lambda: dp.range(23).shuffle(7, seed=1).repeat(3).take(60),
    "skip-shuffle-batch": lambda: dp.range(40).skip(5).shuffle(10, seed=9).batch(3),
    "repeat-forever-take": lambda: dp.range(4).shuffle(4, seed=2).repeat().take(30),
    "torch": lambda: dp.from_tensor_slices(torch.arange(20)).shuffle(5, seed=0).batch(6),
}


def _norm(x):
    return x.tolist() if hasattr(x, "tolist") else x


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_get_state_set_state_resumes_exactly_at_every_cut(name: str) -> None:
    make = CHAINS[name]
    full = [_norm(x) for x in make()]
    for k in range(len(full) + 1):
        it = iter(make())
        head = [_norm(next(it)) for _ in range(k)]
        state = it.get_state()
        resumed = iter(make())
        resumed.set_state(state)
        assert head + [_norm(x) for x in resumed] == full, f"cut at {k}"


def test_state_dict_aliases_and_epoch_restore() -> None:
    ds = dp.range(10).shuffle(10, seed=1)
    epoch0 = ints(ds)
    it = iter(ds)  # epoch 1: a different order
    head = [int(next(it)) for _ in range(4)]
    state = it.state_dict()
    assert state["epoch"] == [1]
    fresh = iter(ds)  # an epoch-2 iterator, restored to epoch 1's position
    fresh.load_state_dict(state)
    rest = ints(fresh)
    ref = dp.range(10).shuffle(10, seed=1)
    assert ints(ref) == epoch0
    epoch1 = ints(ref)
    assert epoch1 != epoch0 and head + rest == epoch1


def test_batch_rejects_elements_of_different_structures() -> None:
    keys = dp.range(4).map(lambda i: {"a": i} if i % 2 else {"b": i})
    with pytest.raises(
        BatchShapeError,
        match=r"element 1 has structure \{'a': int64\}.*"
        r"element 0 has \{'b': int64\}",
    ):
        list(keys.batch(2))
    lengths = dp.range(4).map(lambda i: (i, i) if i % 2 else (i,))
    with pytest.raises(BatchShapeError, match=r"element 1 has structure \(int64, int64\)"):
        list(lengths.batch(2))
    inner = dp.range(4).map(lambda i: (i, {"a": i}) if i % 2 else (i, i))
    with pytest.raises(BatchShapeError, match="same structure"):
        list(inner.batch(2))
    mixed = dp.range(4).map(lambda i: {"a": i} if i % 2 else i)
    with pytest.raises(BatchShapeError, match=r"element 0 has int64"):
        list(mixed.batch(2))


def test_every_public_dataset_method_is_documented() -> None:
    names = [m for m in dir(dp.Dataset) if not m.startswith("_")]
    undocumented = [m for m in names if len((getattr(dp.Dataset, m).__doc__ or "").strip()) < 20]
    assert undocumented == []
    assert "num_parallel_calls" in dp.Dataset.map.__doc__
    assert "drop_remainder" in dp.Dataset.batch.__doc__
    assert "filename" in dp.Dataset.cache.__doc__.lower()


def test_ragged_list_and_foreign_state_get_clear_errors() -> None:
    with pytest.raises(ValueError, match=r"from_tensor_slices: component element is ragged"):
        dp.from_tensor_slices([np.zeros(3), np.zeros(4)])
    it = iter(dp.range(20).shuffle(10, seed=0).batch(4))
    next(it)
    state = it.get_state()
    with pytest.raises(ValueError, match="does not fit this pipeline"):
        iter(dp.range(20).batch(4)).set_state(state)
