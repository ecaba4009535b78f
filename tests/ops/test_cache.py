"""Single-input stream ops: filter, flat_map, unbatch, padded_batch, enumerate, scan,
take_while, unique, window, shard, cache, and batch's error delivery.

Expected elements are hand-computed from tf.data's documented semantics (checked once
against tf.data 2.21 while writing these tests, not at test time).
"""

from __future__ import annotations

import pickle
import threading

import numpy as np
import pytest
import torch
from harness import assert_resumes, consume_with_errors, py, values

import datapipe as dp
from datapipe import TensorSpec
from datapipe._batching import BatchShapeError
from datapipe._context import IterContext
from datapipe._spec import DatasetSpec
from datapipe.errors import PipelineError


# ---- filter ------------------------------------------------------------------------------
def test_filter_elements_spec_cardinality() -> None:
    ds = dp.range(10).filter(lambda x: x % 3 == 0)
    assert values(ds) == [0, 3, 6, 9]
    assert ds.element_spec == TensorSpec((), np.int64)
    assert ds.cardinality() == dp.UNKNOWN_CARDINALITY
    assert dp.range(5).repeat().filter(lambda x: x > 1).cardinality() == dp.UNKNOWN_CARDINALITY
    pairs = dp.from_tensor_slices((np.arange(4), np.arange(4) * 10)).filter(lambda a, b: b > 15)
    assert values(pairs) == [(2, 20), (3, 30)]
    assert values(dp.range(4).filter(lambda x: torch.tensor(bool(x % 2)))) == [1, 3]
    assert values(dp.range(4).filter(lambda x: np.array(x < 2))) == [0, 1]


def test_filter_rejects_non_boolean_predicate() -> None:
    with pytest.raises(PipelineError, match=r"filter at element 0: TypeError: .*scalar boolean"):
        list(dp.range(3).filter(lambda x: x % 2))
    with pytest.raises(PipelineError, match=r"shape \(2,\) and dtype bool"):
        list(dp.range(3).filter(lambda x: np.array([True, False])))
    with pytest.raises(TypeError, match="filter: predicate must be callable"):
        dp.range(3).filter(3)


def test_filter_error_delivers_good_elements_then_continues() -> None:
    ds = dp.range(8).filter(lambda x: 10 // (int(x) - 3) != 99)  # fails on element 3 only
    out, errors = consume_with_errors(ds)
    assert out == [0, 1, 2, 4, 5, 6, 7]
    assert len(errors) == 1 and errors[0].startswith("filter at element 3: ZeroDivisionError")


def test_filter_resume() -> None:
    assert_resumes(dp.range(20).filter(lambda x: x % 3 != 1))
    assert_resumes(dp.range(30).filter(lambda x: x > 25))


# ---- flat_map ----------------------------------------------------------------------------
def test_flat_map_elements_spec_cardinality() -> None:
    ds = dp.range(1, 4).flat_map(lambda n: dp.range(n).map(lambda x: x * 10 + n))
    assert values(ds) == [1, 2, 12, 3, 13, 23]
    assert ds.element_spec == TensorSpec((), np.int64)
    assert ds.cardinality() == dp.UNKNOWN_CARDINALITY
    assert values(dp.range(3).flat_map(lambda n: dp.range(0))) == []
    t = dp.from_tensor_slices((np.arange(2), np.arange(2) + 5))
    out = values(t.flat_map(lambda a, b: dp.from_tensor_slices(np.array([a, b]))))
    assert out == [0, 5, 1, 6]
    nested = dp.from_tensor_slices(np.arange(6).reshape(3, 2)).flat_map(dp.from_tensor_slices)
    assert values(nested) == [0, 1, 2, 3, 4, 5]


def test_flat_map_errors_name_op_and_index() -> None:
    with pytest.raises(PipelineError, match="flat_map at element 1: TypeError: map_func must "):
        list(dp.range(3).flat_map(lambda n: dp.range(n) if n != 1 else 5))
    out, errors = consume_with_errors(dp.range(4).flat_map(lambda n: dp.range(10 // (int(n) - 2))))
    assert out == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]  # n = 0, 1: 10 // -2, 10 // -1 -> empty
    assert errors == [
        "flat_map at element 2: ZeroDivisionError: integer division or modulo by zero"
    ]


def test_flat_map_resume_inside_sub_datasets() -> None:
    ds = dp.range(1, 5).flat_map(lambda n: dp.range(n).map(lambda x: x + 100 * n))
    assert_resumes(ds)


def test_flat_map_random_sub_datasets_are_seeded_per_element() -> None:
    ds = dp.range(4).flat_map(lambda n: dp.range(6).shuffle(6)).with_options(dp.Options(seed=3))
    a, b = values(ds), values(ds)
    perms = [a[i : i + 6] for i in range(0, 24, 6)]
    assert all(sorted(p) == list(range(6)) for p in perms)
    assert len({tuple(p) for p in perms}) > 1  # each input element gets its own draw
    assert len(a) == len(b) == 24
    assert_resumes(ds, cuts=[0, 5, 6, 13, 24])


# ---- unbatch -----------------------------------------------------------------------------
def test_unbatch_elements_spec_cardinality() -> None:
    assert values(dp.range(7).batch(3).unbatch()) == list(range(7))
    m = np.arange(12).reshape(3, 2, 2)
    ds = dp.from_tensor_slices(m).unbatch()
    assert values(ds) == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11]]
    assert ds.element_spec == TensorSpec((2,), np.int64)
    assert ds.cardinality() == 6  # static batch dim 2, 3 batches (tf.data)
    assert dp.range(10).batch(3, drop_remainder=True).unbatch().cardinality() == 9
    assert dp.range(10).batch(3).unbatch().cardinality() == dp.UNKNOWN_CARDINALITY
    assert dp.range(3).batch(2).repeat().unbatch().cardinality() == dp.INFINITE_CARDINALITY
    d = dp.from_tensor_slices({"a": np.arange(4), "b": np.arange(8).reshape(4, 2)}).batch(3)
    assert values(d.unbatch())[3] == {"a": 3, "b": [6, 7]}
    tt = list(
        dp.from_tensors_like_batches()
        if False
        else dp.from_tensor_slices(torch.ones(2, 3, 4)).unbatch()
    )
    assert len(tt) == 6 and isinstance(tt[0], torch.Tensor) and tt[0].shape == (4,)


def test_unbatch_errors() -> None:
    with pytest.raises(ValueError, match="unbatch: cannot unbatch a scalar component"):
        dp.range(3).unbatch()
    bad = dp.range(2).map(lambda x: (np.zeros(2), np.zeros(3)))
    with pytest.raises(
        PipelineError, match=r"unbatch at element 0: .*different batch sizes \[2, 3\]"
    ):
        list(bad.unbatch())


def test_unbatch_resume_and_random_access() -> None:
    assert_resumes(dp.range(11).batch(4).unbatch())
    static = dp.range(12).batch(3, drop_remainder=True).unbatch()
    assert static._random_access_breaker() is None
    assert values(static.shard(5, 2)) == [2, 7]  # through unbatch's random access
    assert dp.range(12).batch(5).unbatch()._random_access_breaker() == "unbatch"


# ---- padded_batch ------------------------------------------------------------------------
def ragged(n: int = 4):
    return dp.range(1, n + 1).map(lambda k: np.full(k, k))


def test_padded_batch_pads_to_batch_max() -> None:
    assert values(ragged().padded_batch(3)) == [[[1, 0, 0], [2, 2, 0], [3, 3, 3]], [[4, 4, 4, 4]]]
    assert values(ragged().padded_batch(2, drop_remainder=True, padding_values=-1)) == [
        [[1, -1], [2, 2]],
        [[3, 3, 3, -1], [4, 4, 4, 4]],
    ]


def test_padded_batch_explicit_shapes_and_specs() -> None:
    out = values(ragged(3).padded_batch(3, padded_shapes=[5]))
    assert out == [[[1, 0, 0, 0, 0], [2, 2, 0, 0, 0], [3, 3, 3, 0, 0]]]
    assert ragged().padded_batch(2, padded_shapes=[6]).element_spec == TensorSpec(
        (None, 6), np.int64
    )
    spec = ragged().padded_batch(2, padded_shapes=[None], drop_remainder=True).element_spec
    assert spec == TensorSpec((2, None), np.int64)
    fixed = dp.from_tensor_slices(np.zeros((4, 3), np.float32))
    assert fixed.padded_batch(2).element_spec == TensorSpec((None, 3), np.float32)
    assert fixed.padded_batch(2, padded_shapes=[-1]).element_spec == TensorSpec(
        (None, None), np.float32
    )
    img = dp.range(1, 3).map(lambda k: np.ones((k, 2 * k), np.uint8))
    b = next(iter(img.padded_batch(2, padded_shapes=(None, 5))))
    assert b.shape == (2, 2, 5) and b.dtype == np.uint8
    assert b[0].tolist() == [[1, 1, 0, 0, 0], [0, 0, 0, 0, 0]]
    assert ragged().padded_batch(3).cardinality() == 2
    assert ragged().padded_batch(3, drop_remainder=True).cardinality() == 1


def test_padded_batch_nested_structures_and_values() -> None:
    t = dp.from_tensor_slices((np.array([1, 2]), np.array([3, 4]))).map(
        lambda a, b: (np.full(a, a), np.full(b, b))
    )
    assert values(t.padded_batch(2, padding_values=-1)) == [
        ([[1, -1], [2, 2]], [[3, 3, 3, -1], [4, 4, 4, 4]])
    ]
    out = values(t.padded_batch(2, padded_shapes=([3], [None]), padding_values=(7, 8)))
    assert out == [([[1, 7, 7], [2, 2, 7]], [[3, 3, 3, 8], [4, 4, 4, 4]])]
    d = dp.range(1, 3).map(lambda k: {"ids": np.arange(k), "label": k})
    b = values(d.padded_batch(2, padded_shapes={"ids": [4], "label": []}))[0]
    assert b == {"ids": [[0, 0, 0, 0], [0, 1, 0, 0]], "label": [1, 2]}


def test_padded_batch_strings_and_torch() -> None:
    s = dp.from_tensor_slices(np.array(["a", "bb", "c"], dtype=object))
    out = values(s.map(lambda x: np.array(list(x), dtype=object)).padded_batch(3))
    assert out == [[["a", ""], ["b", "b"], ["c", ""]]]
    by = dp.range(1, 3).map(lambda k: np.array([b"x"] * int(k), dtype=object))
    assert values(by.padded_batch(2)) == [[[b"x", b""], [b"x", b"x"]]]
    tt = dp.range(1, 3).map(lambda k: torch.full((int(k), 2), int(k), dtype=torch.int32))
    batch = next(iter(tt.padded_batch(2, padding_values=9)))
    assert isinstance(batch, torch.Tensor) and batch.dtype == torch.int32
    assert batch.tolist() == [[[1, 1], [9, 9]], [[2, 2], [2, 2]]]


def test_padded_batch_errors() -> None:
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        ragged().padded_batch(0)
    with pytest.raises(
        ValueError, match=r"padded shape \(2, 2\) of component element has rank 2 but"
    ):
        ragged().padded_batch(2, padded_shapes=[2, 2])
    with pytest.raises(
        ValueError,
        match=r"padded shape \(2,\) of component element is smaller than its shape \(3,\)",
    ):
        dp.from_tensor_slices(np.zeros((4, 3))).padded_batch(2, padded_shapes=[2])
    with pytest.raises(ValueError, match="padding values must be scalars"):
        ragged().padded_batch(2, padding_values=np.zeros(2))
    with pytest.raises(ValueError, match="must match the element structure"):
        dp.from_tensor_slices((np.zeros((2, 1)), np.zeros((2, 1)))).padded_batch(
            2, padded_shapes=[[1]]
        )
    # An element larger than its padded shape: the good batch first, then the error naming
    # the element and the component, then the batches after it.
    ds = dp.from_tensor_slices(np.array([1, 2, 3, 1, 2, 1])).map(lambda k: np.ones(k, np.int8))
    out, errors = consume_with_errors(ds.padded_batch(2, padded_shapes=[2]))
    assert out == [[[1, 0], [1, 1]], [[1, 1], [1, 0]]]
    assert len(errors) == 1
    assert (
        "padded_batch: element 2 has shape (3,) in component element, larger than the "
        "padded shape (2,)" in errors[0]
    )
    rank = dp.range(2).map(lambda k: np.zeros((1,) * (int(k) + 1)))
    with pytest.raises(BatchShapeError, match="element 1 has rank 2 in component element but"):
        list(rank.padded_batch(2))


def test_padded_batch_resume_and_random_access() -> None:
    assert_resumes(ragged(7).padded_batch(3))
    ds = ragged(7).padded_batch(2, padded_shapes=[8])
    assert ds._random_access_breaker() is None
    assert values(ds.shard(2, 1)) == [values(ds)[1], values(ds)[3]]


# ---- enumerate ---------------------------------------------------------------------------
def test_enumerate() -> None:
    ds = dp.range(10, 13).enumerate(start=5)
    out = list(ds)
    assert [py(x) for x in out] == [(5, 10), (6, 11), (7, 12)]
    assert all(type(i) is np.int64 for i, _ in out)
    assert ds.element_spec == (TensorSpec((), np.int64), TensorSpec((), np.int64))
    assert ds.cardinality() == 3
    assert values(dp.range(3).enumerate().map(lambda i, x: i * 10 + x)) == [0, 11, 22]
    assert ds._random_access_breaker() is None
    assert values(dp.range(10).enumerate().shard(4, 3)) == [(3, 3), (7, 7)]
    streamed = dp.range(6).filter(lambda x: x % 2 == 1).enumerate()
    assert values(streamed) == [(0, 1), (1, 3), (2, 5)]
    assert_resumes(streamed)


# ---- scan --------------------------------------------------------------------------------
def test_scan_running_state() -> None:
    ds = dp.range(5).scan(0, lambda s, x: (s + x, s + x))
    assert values(ds) == [0, 1, 3, 6, 10]
    assert ds.cardinality() == 5
    fib = dp.range(6).scan((0, 1), lambda s, _: ((s[1], s[0] + s[1]), s[0]))
    assert values(fib) == [0, 1, 1, 2, 3, 5]
    mean = dp.range(1, 5).scan(0.0, lambda s, x: (s + x, (s + x) / x))
    assert mean.element_spec == TensorSpec((), np.float64)
    # A tuple element arrives as one argument (tf.data's scan convention).
    pairs = dp.from_tensor_slices((np.arange(3), np.arange(3) * 10))
    assert values(pairs.scan(0, lambda s, ab: (s + 1, ab[1] + s))) == [0, 11, 22]
    assert_resumes(dp.range(12).scan(np.int64(0), lambda s, x: (s + x, s * 2)))


def test_scan_errors() -> None:
    with pytest.raises(PipelineError, match="scan at element 0: TypeError: scan_func must return"):
        list(dp.range(3).scan(0, lambda s, x: s + x))
    with pytest.raises(PipelineError, match="scan at element 0: TypeError: .*structure differs"):
        list(dp.range(3).scan((0, 0), lambda s, x: (s[0], x)))
    out, errors = consume_with_errors(dp.range(5).scan(0, lambda s, x: (s + 10 // (int(x) - 2), s)))
    assert out == [0, -5, -15, -5]  # state unchanged across the failing element
    assert errors == ["scan at element 2: ZeroDivisionError: integer division or modulo by zero"]


# ---- take_while --------------------------------------------------------------------------
def test_take_while() -> None:
    ds = dp.range(10).take_while(lambda x: x * x < 20)
    assert values(ds) == [0, 1, 2, 3, 4]
    assert ds.cardinality() == dp.UNKNOWN_CARDINALITY
    assert ds.element_spec == TensorSpec((), np.int64)
    assert values(dp.range(5).take_while(lambda x: x > 0)) == []
    assert values(dp.range(3).take_while(lambda x: True)) == [0, 1, 2]
    # Stops at the first False even when later elements would pass.
    assert values(dp.from_tensor_slices([1, 2, 9, 1]).take_while(lambda x: x < 5)) == [1, 2]
    assert values(dp.range(10).repeat().take_while(lambda x: x < 4)) == [0, 1, 2, 3]
    assert_resumes(dp.range(40).take_while(lambda x: x < 23))
    with pytest.raises(PipelineError, match="take_while at element 0: TypeError: .*scalar boolean"):
        list(dp.range(3).take_while(lambda x: x))
    out, errors = consume_with_errors(dp.range(6).take_while(lambda x: 10 // (int(x) - 1) < 100))
    assert out == [0, 2, 3, 4, 5]
    assert errors[0].startswith("take_while at element 1: ZeroDivisionError")


# ---- unique ------------------------------------------------------------------------------
def test_unique_ints_and_strings() -> None:
    ds = dp.from_tensor_slices([1, 3, 1, 2, 3, 4, 4])
    assert values(ds.unique()) == [1, 3, 2, 4]
    assert ds.unique().cardinality() == dp.UNKNOWN_CARDINALITY
    words = dp.from_tensor_slices(np.array(["b", "a", "b", "c", "a"], dtype=object))
    assert values(words.unique()) == ["b", "a", "c"]
    raw = dp.from_tensor_slices(np.array([b"x", b"y", b"x"], dtype=object))
    assert values(raw.unique()) == [b"x", b"y"]
    assert values(dp.from_tensor_slices(torch.tensor([5, 5, 6])).unique()) == [5, 6]


def test_unique_state_is_sorted_seen_list_and_resumes() -> None:
    ds = dp.from_tensor_slices([5, 1, 5, 3, 1, 9, 3, 2]).unique()
    op = IterContext.for_graph(ds).make(ds, (0,))
    assert [int(x) for x in op.next_chunk(3)] == [5, 1]  # input 5, 1, 5
    assert op.get_state()["seen"] == [[1, 5]]
    assert [int(x) for x in op.next_chunk(3)] == [3, 9]  # input 3, 1, 9
    assert op.get_state()["seen"] == [[1, 3, 5, 9]]  # runs of equal size merged
    assert [int(x) for x in op.next_chunk(2)] == [2]  # input 3, 2
    assert op.get_state()["seen"] == [[1, 3, 5, 9], [2]]
    assert op.seen_sorted() == [1, 2, 3, 5, 9]
    assert_resumes(ds)


def test_unique_errors() -> None:
    with pytest.raises(TypeError, match="unique: elements must be integers or strings.*float"):
        dp.from_tensor_slices(np.zeros(3)).unique()
    with pytest.raises(TypeError, match="unique: elements must be scalars, got shape \\(2,\\)"):
        dp.from_tensor_slices(np.zeros((3, 2), np.int64)).unique()
    with pytest.raises(TypeError, match="single scalars"):
        dp.from_tensor_slices((np.arange(2), np.arange(2))).unique()
    bad = dp.range(3).map(lambda x: x if x != 1 else np.arange(2))
    with pytest.raises(PipelineError, match=r"unique at element 1: TypeError: .*got shape \(2,\)"):
        list(bad.unique())


# ---- window ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((3,), [[0, 1, 2], [3, 4, 5], [6]]),
        ((3, 2), [[0, 1, 2], [2, 3, 4], [4, 5, 6], [6]]),
        ((3, 2, 2), [[0, 2, 4], [2, 4, 6], [4, 6], [6]]),
        ((3, 4), [[0, 1, 2], [4, 5, 6]]),
        ((3, None, 1, True), [[0, 1, 2], [3, 4, 5]]),
        ((3, 2, 1, True), [[0, 1, 2], [2, 3, 4], [4, 5, 6]]),
        ((3, 2, 2, True), [[0, 2, 4], [2, 4, 6]]),
        ((3, 4, 1, True), [[0, 1, 2], [4, 5, 6]]),
        ((8, 1, 1, True), []),
    ],
)
def test_window_matches_tf_data(args, expected) -> None:
    ds = dp.range(7).window(*args)
    assert values(ds) == expected
    assert ds.cardinality() == len(expected)
    streamed = dp.range(7).filter(lambda x: x >= 0).window(*args)
    assert values(streamed) == expected
    assert streamed.cardinality() == dp.UNKNOWN_CARDINALITY
    assert values(dp.range(7).window(*args).shard(1, 0)) == expected  # random access path
    assert_resumes(streamed)


def test_window_structure_spec_and_flat_map() -> None:
    ds = dp.range(7).window(3)
    w = next(iter(ds))
    assert isinstance(w, dp.Dataset) and w.element_spec == TensorSpec((), np.int64)
    assert ds.element_spec == DatasetSpec(TensorSpec((), np.int64))
    assert values(ds.flat_map(lambda w: w.batch(3))) == [[0, 1, 2], [3, 4, 5], [6]]
    pairs = dp.from_tensor_slices((np.arange(5), np.arange(5) * 10)).window(2)
    a, b = next(iter(pairs))
    assert values(a) == [0, 1] and values(b) == [0, 10]
    assert values(pairs.flat_map(lambda x, y: y.batch(2))) == [[0, 10], [20, 30], [40]]
    d = dp.from_tensor_slices({"k": np.arange(4)}).window(3, shift=1, drop_remainder=True)
    assert [values(w["k"]) for w in d] == [[0, 1, 2], [1, 2, 3]]
    assert dp.range(3).repeat().window(2).cardinality() == dp.INFINITE_CARDINALITY
    for bad in [dict(size=0), dict(size=2, shift=0), dict(size=2, stride=0)]:
        with pytest.raises(ValueError, match="window: .* must be >= 1"):
            dp.range(3).window(**bad)


# ---- shard -------------------------------------------------------------------------------
def test_shard_elements_and_cardinality() -> None:
    assert [values(dp.range(10).shard(3, i)) for i in range(3)] == [
        [0, 3, 6, 9],
        [1, 4, 7],
        [2, 5, 8],
    ]
    assert [dp.range(10).shard(3, i).cardinality() for i in range(3)] == [4, 3, 3]
    assert dp.range(3).repeat().shard(2, 1).cardinality() == dp.INFINITE_CARDINALITY
    streamed = dp.range(10).filter(lambda x: True)
    assert [values(streamed.shard(3, i)) for i in range(3)] == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    assert values(streamed.shard(20, 7)) == [7]
    assert values(streamed.shard(20, 12)) == []
    assert values(dp.range(10).repeat().shard(4, 1).take(4)) == [1, 5, 9, 3]


def test_shard_errors_name_both_numbers() -> None:
    with pytest.raises(
        ValueError,
        match=r"shard: index must be in \[0, num_shards\), got index=3 "
        "with num_shards=3",
    ):
        dp.range(5).shard(3, 3)
    with pytest.raises(ValueError, match="got index=-1 with num_shards=2"):
        dp.range(5).shard(2, -1)
    with pytest.raises(ValueError, match="shard: num_shards must be >= 1, got 0"):
        dp.range(5).shard(0, 0)


def test_shard_random_access_computes_only_its_elements() -> None:
    seen: list[int] = []
    ds = dp.range(12).map(lambda x: seen.append(int(x)) or x * 2).shard(4, 1)
    assert ds._random_access_breaker() is None
    assert values(ds) == [2, 10, 18]
    assert seen == [1, 5, 9] or seen[1:] == [1, 5, 9]  # (map may infer its spec from element 0)


def test_shard_random_access_error_delivers_good_elements_and_moves_on() -> None:
    ds = dp.range(10).map(lambda x: 10 // (int(x) - 3)).shard(2, 1)  # inputs 1, 3, 5, 7, 9
    out, errors = consume_with_errors(ds)
    assert out == [-5, 5, 2, 1]
    assert errors == ["map at element 3: ZeroDivisionError: integer division or modulo by zero"]


def test_shard_resume() -> None:
    assert_resumes(dp.range(23).filter(lambda x: True).shard(4, 2))
    assert_resumes(dp.range(23).shard(4, 3))


# ---- cache -------------------------------------------------------------------------------
def counting(n: int, calls: list):
    return dp.range(n).map(lambda x: calls.append(int(x)) or x)


def test_cache_records_first_complete_pass() -> None:
    calls: list[int] = []
    ds = counting(4, calls).cache()
    assert ds.cardinality() == 4 and ds.element_spec == TensorSpec((), np.int64)
    calls.clear()  # map learnt its spec from element 0
    assert values(ds.repeat(3)) == [0, 1, 2, 3] * 3
    assert calls == [0, 1, 2, 3]
    assert values(ds) == [0, 1, 2, 3] and calls == [0, 1, 2, 3]  # a later iter(): memory


def test_cache_partial_pass_is_not_cached() -> None:
    calls: list[int] = []
    ds = counting(4, calls).cache()
    assert values(ds.take(2)) == [0, 1]
    it = iter(ds)
    assert int(next(it)) == 0
    it.close()
    calls.clear()
    assert values(ds.take(3)) == [0, 1, 2]
    assert calls == [0, 1, 2]
    assert values(ds) == [0, 1, 2, 3]
    assert values(ds) == [0, 1, 2, 3]
    assert calls == [0, 1, 2, 0, 1, 2, 3]


def test_cache_freezes_randomness_of_first_pass() -> None:
    ds = dp.range(10).shuffle(10).cache().repeat(3).with_options(dp.Options(seed=5))
    out = values(ds)
    assert out[:10] == out[10:20] == out[20:] and sorted(out[:10]) == list(range(10))


def test_cache_is_thread_safe_and_shared() -> None:
    calls: list[int] = []
    ds = counting(2000, calls).cache()
    results: list = [None] * 4

    def run(k: int) -> None:
        results[k] = values(ds)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == list(range(2000)) for r in results)
    n = len(calls)
    assert values(ds) == list(range(2000)) and len(calls) == n  # published once, then read


def test_cache_resume_while_filling_and_reading() -> None:
    calls: list[int] = []
    ds = counting(6, calls).cache().repeat(2)
    assert_resumes(ds)


def test_cache_resume_in_a_fresh_pipeline_re_runs_the_recording_pass() -> None:
    def build():
        return dp.range(8).shuffle(8).cache().repeat(2).with_options(dp.Options(seed=11))

    first = build()
    full = values(first)
    it = iter(first)
    head = [py(next(it)) for _ in range(11)]  # inside the second pass: reading the cache
    state = pickle.loads(pickle.dumps(it.get_state()))
    fresh = iter(build())  # another object: its cache is empty
    fresh.set_state(state)
    assert head + [py(x) for x in fresh] == full


def test_cache_random_access_fills_by_index() -> None:
    calls: list[int] = []
    ds = counting(6, calls).cache()
    calls.clear()
    assert ds._random_access_breaker() is None
    assert values(ds.shard(2, 0)) == [0, 2, 4]
    assert calls == [0, 2, 4]
    assert values(ds.shard(2, 0)) == [0, 2, 4] and calls == [0, 2, 4]
    assert values(ds.shard(2, 1)) == [1, 3, 5] and calls == [0, 2, 4, 1, 3, 5]
    assert values(ds) == list(range(6)) and len(calls) == 6  # complete: read from memory


# ---- batch: good batches before an error -------------------------------------------------
def test_batch_delivers_good_batches_before_stacking_error() -> None:
    ds = dp.range(6).map(lambda x: np.zeros(3 if x == 3 else 2)).batch(2)
    out, errors = consume_with_errors(ds)
    assert out == [[[0.0, 0.0]] * 2, [[0.0, 0.0]] * 2]
    assert len(errors) == 1
    assert "cannot stack element 3 of shape (3,) with element 2 of shape (2,)" in errors[0]
    with pytest.raises(BatchShapeError):
        list(ds)


def test_batch_resume_after_error_and_with_remainder() -> None:
    assert_resumes(dp.range(11).batch(3))
    assert_resumes(dp.range(11).batch(3, drop_remainder=True))
    ds = dp.range(7).map(lambda x: np.zeros(3 if x == 2 else 1)).batch(2)
    it = iter(ds)
    assert py(next(it)) == [[0.0], [0.0]]
    with pytest.raises(BatchShapeError):
        next(it)
    state = pickle.loads(pickle.dumps(it.get_state()))
    fresh = iter(ds)
    fresh.set_state(state)
    assert [py(x) for x in fresh] == [[[0.0], [0.0]], [[0.0]]]
