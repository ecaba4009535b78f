"""Issue 16: the sequence ops' own semantics, errors and edge cases (tf.data's outputs are
compared in test_tf_differential_sequence_ops.py; states in the correctness sweep).

Sequence packing has no tf.data counterpart: it is compared with Grain's
``FirstFitPackIterDataset`` when ``grain`` is importable, and always with outputs worked
out by hand from Grain's documented algorithm."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import datapipe as dp
from datapipe._batching import BatchShapeError
from datapipe.ops.assert_cardinality import CardinalityError


def lengths_ds(lengths):
    arr = np.array(lengths, dtype=np.int64)
    return dp.from_tensor_slices(arr).map(lambda n: np.arange(1, n + 1))


def as_lists(ds):
    return [x.tolist() for x in ds]


# ---- first_fit_pack: the documented algorithm, and Grain ---------------------------------------
def token_dicts(lengths, with_id=False):
    def make(i):
        n = lengths[int(i)]
        d = {"tokens": np.arange(10 * int(i) + 1, 10 * int(i) + 1 + n, dtype=np.int32)}
        if with_id:
            d["id"] = np.int64(i)
        return d

    return dp.range(len(lengths)).map(make)


def test_first_fit_pack_by_hand():
    # Lengths 3, 2, 4, 1, 5 into 2 rows of 5: 3 -> row 0; 2 -> row 0 (full); 4 -> row 1;
    # 1 -> row 1 (full); 5 fits nowhere: rows 0, 1 are delivered, 5 starts a new set.
    ds = token_dicts([3, 2, 4, 1, 5]).first_fit_pack({"tokens": 5}, 2, shuffle_bins=False)
    rows = list(ds)
    assert [r["tokens"].tolist() for r in rows] == [
        [1, 2, 3, 11, 12],
        [21, 22, 23, 24, 31],
        [41, 42, 43, 44, 45],
    ]
    assert [r["tokens_segment_ids"].tolist() for r in rows] == [
        [1, 1, 1, 2, 2],
        [1, 1, 1, 1, 2],
        [1, 1, 1, 1, 1],
    ]
    assert [r["tokens_positions"].tolist() for r in rows] == [
        [0, 1, 2, 0, 1],
        [0, 1, 2, 3, 0],
        [0, 1, 2, 3, 4],
    ]
    assert {k: v.dtype for k, v in rows[0].items()} == {
        "tokens": np.int32,
        "tokens_segment_ids": np.int32,
        "tokens_positions": np.int32,
    }
    assert ds.element_spec == {
        "tokens": dp.TensorSpec((5,), np.int32),
        "tokens_segment_ids": dp.TensorSpec((5,), np.int32),
        "tokens_positions": dp.TensorSpec((5,), np.int32),
    }


def test_first_fit_pack_options_by_hand():
    # Alignment 2: a sequence starts at an even position; padding -1; at most 2 per row;
    # "id" (not in length_struct) becomes the list of the row's ids.
    ds = token_dicts([1, 1, 1, 3], with_id=True).first_fit_pack(
        {"tokens": 6},
        2,
        shuffle_bins=False,
        meta_features=["id"],
        pack_alignment_struct={"tokens": 2},
        padding_struct={"tokens": -1},
        max_sequences_per_bin=2,
    )
    rows = list(ds)
    assert [r["tokens"].tolist() for r in rows] == [
        [1, -1, 11, -1, -1, -1],
        [21, -1, 31, 32, 33, -1],
    ]
    assert [r["tokens_segment_ids"].tolist() for r in rows] == [
        [1, 0, 2, 0, 0, 0],
        [1, 0, 2, 2, 2, 0],
    ]
    assert [r["id"] for r in rows] == [[0, 1], [2, 3]]
    assert ds.element_spec["id"] == dp.TensorSpec((None,), object)


def test_first_fit_pack_shuffles_bins_like_grain():
    ds = token_dicts([4, 4, 4, 4, 4, 4]).first_fit_pack({"tokens": 4}, 3, seed=7)
    firsts = [int(r["tokens"][0]) for r in ds]
    # Grain's draw: default_rng(seed + rows delivered before).permuted(range(rows)).
    order = [
        *np.random.default_rng(7).permuted(range(3)),
        *(3 + np.random.default_rng(10).permuted(range(3))),
    ]
    assert firsts == [10 * int(i) + 1 for i in order]
    assert sorted(firsts) == [1, 11, 21, 31, 41, 51]


GRAIN_CASES = [
    dict(length_struct={"inputs": 10, "targets": 7}, num_packing_bins=3, shuffle_bins=False),
    dict(length_struct={"inputs": 10, "targets": 7}, num_packing_bins=4, seed=5),
    dict(
        length_struct={"inputs": 12, "targets": 8},
        num_packing_bins=2,
        shuffle_bins=False,
        meta_features=("id",),
    ),
    dict(
        length_struct={"inputs": 12, "targets": 8},
        num_packing_bins=3,
        seed=1,
        pack_alignment_struct={"inputs": 4, "targets": 2},
        padding_struct={"inputs": -1, "targets": 7},
        max_sequences_per_bin=2,
    ),
    dict(length_struct={"inputs": 9, "targets": 9}, num_packing_bins=1, shuffle_bins=False),
]


@pytest.mark.parametrize("kw", GRAIN_CASES, ids=range(len(GRAIN_CASES)))
def test_first_fit_pack_matches_grain(kw):
    grain = pytest.importorskip("grain", reason="grain (the bench extras) is not installed")
    rng = np.random.default_rng(0)
    els = [
        {
            "inputs": rng.integers(1, 100, int(rng.integers(1, 9))).astype(np.int32),
            "targets": rng.integers(1, 100, int(rng.integers(1, 6))).astype(np.int64),
            "id": np.int64(i),
        }
        for i in range(40)
    ]
    ours = list(dp.range(40).map(lambda i: els[int(i)]).first_fit_pack(**kw))
    theirs = list(
        grain.experimental.FirstFitPackIterDataset(
            grain.MapDataset.source(els).to_iter_dataset(), **kw
        )
    )
    assert len(ours) == len(theirs) > 5
    for a, b in zip(ours, theirs):
        assert set(a) == set(b)
        for k in a:
            if isinstance(b[k], list):  # a meta feature: the row's values
                assert isinstance(a[k], list) and [int(v) for v in a[k]] == [int(v) for v in b[k]]
            else:
                assert a[k].dtype == b[k].dtype and a[k].tolist() == b[k].tolist(), k


def test_first_fit_pack_errors():
    too_long = token_dicts([2, 9, 1]).first_fit_pack({"tokens": 5}, 2, shuffle_bins=False)
    it = iter(too_long)
    with pytest.raises(dp.PipelineError) as info:
        next(it)
    assert str(info.value).startswith("first_fit_pack at element 1: ValueError: feature 'tokens'")
    assert "has length 9, more than its row length 5" in str(info.value)
    assert [r["tokens"].tolist() for r in it] == [[1, 2, 21, 0, 0]]  # goes on past it
    with pytest.raises(
        ValueError, match=r"first_fit_pack: elements must be dicts with the features \['tokens'\]"
    ):
        dp.range(3).first_fit_pack({"tokens": 4}, 2)
    with pytest.raises(ValueError, match="padding_struct must be a dict with the keys"):
        token_dicts([1]).first_fit_pack({"tokens": 4}, 2, padding_struct={"other": 0})
    with pytest.raises(TypeError, match="length_struct must be a non-empty dict"):
        token_dicts([1]).first_fit_pack({}, 2)
    with pytest.raises(ValueError, match=r"max_sequences_per_bin must be >= 1, got 0"):
        token_dicts([1]).first_fit_pack({"tokens": 4}, 2, max_sequences_per_bin=0)


# ---- ragged_batch --------------------------------------------------------------------------
def test_ragged_batch_components_and_torch_nested_tensors():
    ds = lengths_ds([0, 2, 3, 1]).map(lambda s: (s, np.float32(len(s)), f"w{len(s)}"))
    rows, n, words = next(iter(ds.ragged_batch(3)))
    assert rows.dtype == object and rows.shape == (3,)
    assert [r.tolist() for r in rows] == [[], [1, 2], [1, 2, 3]]
    assert n.tolist() == [0.0, 2.0, 3.0] and n.dtype == np.float32
    assert words.tolist() == ["w0", "w2", "w3"]
    assert ds.ragged_batch(3, drop_remainder=True).element_spec == (
        dp.TensorSpec((3,), object),
        dp.TensorSpec((3,), np.float32),
        dp.TensorSpec((3,), object),
    )
    nt, n_t, words_t = next(iter(ds.ragged_batch(3).to_torch()))
    assert nt.is_nested and nt.layout == torch.jagged and nt.dtype == torch.int64
    assert [t.tolist() for t in nt.unbind()] == [[], [1, 2], [1, 2, 3]]
    assert torch.nested.to_padded_tensor(nt, -1).tolist() == [[-1, -1, -1], [1, 2, -1], [1, 2, 3]]
    assert n_t.dtype == torch.float32 and words_t.tolist() == ["w0", "w2", "w3"]
    # Rows that differ beyond their first dimension: the strided layout.
    images = dp.range(1, 3).map(lambda k: np.zeros((k, k + 1), np.float32)).ragged_batch(2)
    nested = next(iter(images.to_torch()))
    assert nested.is_nested and nested.layout == torch.strided
    assert [tuple(t.shape) for t in nested.unbind()] == [(1, 2), (2, 3)]


def test_ragged_batch_unbatches_and_keeps_random_access():
    ds = lengths_ds([3, 1, 4, 1, 5]).ragged_batch(2)
    assert [x.tolist() for x in ds.unbatch()] == [
        [1, 2, 3],
        [1],
        [1, 2, 3, 4],
        [1],
        [1, 2, 3, 4, 5],
    ]
    assert len(ds) == 3 and [r.tolist() for r in ds[-1]] == [[1, 2, 3, 4, 5]]
    assert [[r.tolist() for r in b] for b in ds.rebatch(3)] == [
        [[1, 2, 3], [1], [1, 2, 3, 4]],
        [[1], [1, 2, 3, 4, 5]],
    ]


# ---- rebatch -----------------------------------------------------------------------------------
def test_rebatch_torch_dicts_and_empty_batches():
    ds = dp.range(9).map(lambda x: {"x": torch.tensor([float(x)]), "y": np.int64(x)})
    out = list(ds.batch(4).rebatch(3))
    assert [b["x"].squeeze(1).tolist() for b in out] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert [b["y"].tolist() for b in out] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert isinstance(out[1]["x"], torch.Tensor)
    with_empty = dp.from_tensor_slices(np.arange(6)).batch(2).map(lambda b: b[b % 4 != 2])
    assert as_lists(with_empty) == [[0, 1], [3], [4, 5]]
    assert as_lists(with_empty.rebatch(2)) == [[0, 1], [3, 4], [5]]
    with pytest.raises(ValueError, match="rebatch: the input has a scalar component"):
        dp.range(3).rebatch(2)
    with pytest.raises(ValueError, match="rebatch: batch_size must not be an empty sequence"):
        dp.range(3).batch(2).rebatch([])
    with pytest.raises(ValueError, match=r"rebatch: batch_size must be >= 1, got 0"):
        dp.range(3).batch(2).rebatch([2, 0])
    mixed = dp.zip(dp.range(4).batch(2), dp.range(4).batch(3))
    with pytest.raises(dp.PipelineError, match=r"rebatch at element 0: .*different batch sizes"):
        list(mixed.rebatch(2))


# ---- bucket_by_sequence_length -----------------------------------------------------------------
def test_bucket_by_sequence_length_spec_and_arguments():
    ds = lengths_ds([1, 5, 2])
    assert ds.bucket_by_sequence_length(len, [3], [2, 2]).element_spec == dp.TensorSpec(
        (None, None), np.int64
    )
    fixed = ds.bucket_by_sequence_length(len, [3], [2, 2], padded_shapes=[8], drop_remainder=True)
    assert fixed.element_spec == dp.TensorSpec((2, 8), np.int64)
    assert as_lists(fixed) == [[[1, 0, 0, 0, 0, 0, 0, 0], [1, 2, 0, 0, 0, 0, 0, 0]]]
    build = ds.bucket_by_sequence_length
    with pytest.raises(
        ValueError, match=r"len\(bucket_batch_sizes\) must equal len\(bucket_boundaries\) \+ 1"
    ):
        build(len, [3, 5], [2, 2])
    with pytest.raises(
        ValueError, match=r"bucket_boundaries must be strictly increasing, got \[5, 3\]"
    ):
        build(len, [5, 3], [2, 2, 2])
    with pytest.raises(ValueError, match=r"bucket_batch_sizes\[1\] must be >= 1, got 0"):
        build(len, [3], [2, 0])
    with pytest.raises(TypeError, match=r"bucket_boundaries\[0\] must be an integer, got float"):
        build(len, [3.5], [2, 2])
    with pytest.raises(TypeError, match="bucket_boundaries must be a sequence of integers"):
        build(len, 3, [2, 2])
    with pytest.raises(ValueError, match="no_padding=True batches without padding"):
        build(len, [3], [2, 2], no_padding=True, padding_values=-1)
    with pytest.raises(ValueError, match="pad_to_bucket_boundary=True needs bucket_boundaries"):
        build(len, [], [2], pad_to_bucket_boundary=True)
    with pytest.raises(ValueError, match="bucket_by_sequence_length: padded_shapes must match"):
        dp.zip(ds, ds).bucket_by_sequence_length(
            lambda a, b: len(a), [3], [2, 2], padded_shapes=[4]
        )
    with pytest.raises(TypeError, match="element_length_func must be callable"):
        build("len", [3], [2, 2])


def test_bucket_by_sequence_length_errors_name_the_elements():
    ds = lengths_ds([2, 3, 9, 1, 2]).bucket_by_sequence_length(len, [4], [2, 2], padded_shapes=[3])
    it = iter(ds)
    assert next(it).tolist() == [[1, 2, 0], [1, 2, 3]]
    assert next(it).tolist() == [[1, 0, 0], [1, 2, 0]]
    with pytest.raises(BatchShapeError) as info:
        next(it)  # bucket 1 (9, then end of input) holds an element larger than [3]
    err = info.value
    assert str(err) == (
        "bucket_by_sequence_length: element 0 has shape (9,) in component element, larger "
        "than the padded shape (3,)"
    )
    assert err.__notes__ == ["(the batch of bucket 1: input elements [2], in this order)"]
    bad_length = lengths_ds([2, 3]).bucket_by_sequence_length(lambda s: len(s) / 2, [4], [2, 2])
    with pytest.raises(
        dp.PipelineError,
        match="at element 0: TypeError: element_length_func must return a scalar integer, "
        "got float",
    ):
        list(bad_length)
    kept = lengths_ds([2, 3, 9, 1, 2]).bucket_by_sequence_length(
        lambda s: len(s) if len(s) < 9 else "bad", [4], [2, 2]
    )
    assert as_lists(kept.ignore_errors()) == [[[1, 2, 0], [1, 2, 3]], [[1, 0], [1, 2]]]


# ---- group_by_window -------------------------------------------------------------------------
def test_group_by_window_arguments_and_errors():
    ds = dp.range(6)
    with pytest.raises(ValueError, match="give exactly one of window_size and window_size_func"):
        ds.group_by_window(lambda x: x, lambda k, w: w)
    with pytest.raises(ValueError, match="give exactly one of window_size and window_size_func"):
        ds.group_by_window(lambda x: x, lambda k, w: w, 2, lambda k: 2)
    with pytest.raises(TypeError, match="group_by_window: reduce_func must be callable"):
        ds.group_by_window(lambda x: x, None, 2)
    not_a_dataset = ds.group_by_window(lambda x: x % 2, lambda k, w: [1], 2)
    with pytest.raises(dp.PipelineError, match="reduce_func must return a Dataset, got list"):
        list(not_a_dataset)
    float_key = ds.group_by_window(lambda x: x / 2, lambda k, w: w, 2)
    with pytest.raises(
        dp.PipelineError,
        match="group_by_window at element 0: TypeError: key_func must return a scalar integer",
    ):
        list(float_key)


def test_group_by_window_reduce_sees_key_and_whole_window():
    ds = dp.zip(dp.range(10), dp.range(10).map(lambda x: x * 10)).group_by_window(
        lambda a, b: a % 3,
        lambda key, w: dp.from_tensors(
            (key, np.int64(w.cardinality()), w.map(lambda a, b: b).reduce(0, lambda s, x: s + x))
        ),
        window_size=3,
    )
    got = [(int(k), int(n), int(s)) for k, n, s in ds]
    assert got == [(0, 3, 90), (1, 3, 120), (2, 3, 150), (0, 1, 90)]


# ---- rejection_resample ------------------------------------------------------------------------
def test_rejection_resample_arguments_and_errors():
    ds = dp.from_tensor_slices(np.array([0, 1, 2, 1]))
    with pytest.raises(
        ValueError, match=r"target_dist must be finite, non-negative and not all zero"
    ):
        ds.rejection_resample(lambda y: y, [0.5, -0.5])
    with pytest.raises(ValueError, match=r"initial_dist must be shape \(2,\) \(one per class\)"):
        ds.rejection_resample(lambda y: y, [0.5, 0.5], [1.0, 0.0, 0.0])
    with pytest.raises(TypeError, match="class_func must be callable"):
        ds.rejection_resample(3, [0.5, 0.5])
    out_of_range = ds.rejection_resample(lambda y: y, [0.5, 0.5], [0.5, 0.5], seed=0)
    it = iter(out_of_range)
    assert [(int(c), int(x)) for c, x in [next(it), next(it)]] == [(0, 0), (1, 1)]
    with pytest.raises(
        dp.PipelineError,
        match=r"rejection_resample at element 2: ValueError: class_func returned class 2, "
        r"outside \[0, 2\)",
    ):
        next(it)
    assert [(int(c), int(x)) for c, x in it] == [(1, 1)]


def test_rejection_resample_is_reproducible_from_its_seed():
    labels = np.arange(300) % 4
    make = lambda s: dp.from_tensor_slices(labels).rejection_resample(  # noqa: E731
        lambda y: y, [0.1, 0.2, 0.3, 0.4], seed=s
    )
    a = [int(x) for _, x in make(1)]
    assert a == [int(x) for _, x in make(1)] and a != [int(x) for _, x in make(2)]
    zero = dp.from_tensor_slices(labels).rejection_resample(lambda y: y, [0, 0, 1, 1], seed=3)
    assert {int(c) for c, _ in zero} == {2, 3}  # a target of 0: never kept


# ---- counter, random, assert_cardinality, reduce, get_single_element ---------------------------
def test_counter_overflow_is_located_and_skipped():
    it = iter(dp.Dataset.counter(120, 3, dtype="int8").take(5))
    assert [int(next(it)) for _ in range(3)] == [120, 123, 126]
    with pytest.raises(
        dp.PipelineError, match="counter at element 3: OverflowError: the count does not fit int8"
    ):
        next(it)
    with pytest.raises(TypeError, match="counter: dtype must be an integer dtype, got float32"):
        dp.Dataset.counter(dtype="float32")
    assert dp.counter is dp.Dataset.counter and dp.random is dp.Dataset.random


def test_random_without_seed_differs_per_iteration_and_follows_options_seed():
    ds = dp.Dataset.random().take(20)
    assert [int(x) for x in ds] != [int(x) for x in ds]
    seeded = dp.Dataset.random().take(20).with_options(dp.Options(seed=3))
    assert [int(x) for x in seeded] == [
        int(x) for x in dp.Dataset.random().take(20).with_options(dp.Options(seed=3))
    ]


def test_assert_cardinality_known_counts_random_access_and_sticky_failure():
    with pytest.raises(
        ValueError,
        match="assert_cardinality: the input is known to have 5 elements, but 3 elements "
        "were asserted",
    ):
        dp.range(5).assert_cardinality(3)
    with pytest.raises(
        ValueError, match="the input is known to have an infinite number of elements"
    ):
        dp.range(5).repeat().assert_cardinality(3)
    ok = dp.range(5).map(lambda x: x * 2).assert_cardinality(5)
    assert len(ok) == 5 and int(ok[3]) == 6
    it = iter(dp.range(5).filter(lambda x: True).assert_cardinality(2))
    assert [int(next(it)) for _ in range(2)] == [0, 1]
    for _ in range(2):  # the assertion does not pass on a second try, nor past ignore_errors
        with pytest.raises(CardinalityError, match="but contained at least 3 elements"):
            next(it)
    with pytest.raises(CardinalityError):
        list(dp.range(5).filter(lambda x: True).assert_cardinality(2).ignore_errors())


def test_reduce_errors_and_threads(threads):
    with pytest.raises(
        dp.PipelineError,
        match=r"reduce at element 1: TypeError: reduce_func returned a state whose structure "
        "differs",
    ):
        dp.range(4).reduce((0, 0), lambda s, x: (s[0] + x, s[1]) if x < 1 else s[0])
    with pytest.raises(dp.PipelineError, match=r"reduce at element 2: ZeroDivisionError"):
        dp.range(4).reduce(0, lambda s, x: s + 1 // (int(x) - 2))
    with pytest.raises(TypeError, match="reduce: the dataset is infinite"):
        dp.range(3).repeat().reduce(0, lambda s, x: s)
    parallel = dp.range(200).map(lambda x: x * 2, num_parallel_calls=2).prefetch(4)
    assert int(parallel.reduce(0, lambda s, x: s + x)) == 39800
    with pytest.raises(dp.PipelineError):
        parallel.reduce(0, lambda s, x: s + 1 // (int(x) - 100))
    assert threads.settle() == []  # the reduce's pipeline threads are gone, error or not
    assert (
        int(parallel.take(3).get_single_element.__self__.batch(3).get_single_element().sum()) == 6
    )
    assert threads.settle() == []


def test_ragged_batch_of_arrays_held_as_objects():
    held = np.empty(3, dtype=object)
    for i in range(3):
        held[i] = np.arange(i + 1, dtype=np.int32)
    batch = next(iter(dp.from_tensor_slices(held).ragged_batch(3)))
    assert batch.dtype == object and [r.tolist() for r in batch] == [[0], [0, 1], [0, 1, 2]]
    words = next(iter(dp.from_tensor_slices(np.array(["a", "bb"], dtype=object)).ragged_batch(2)))
    assert words.tolist() == ["a", "bb"]  # scalars of an object component are stacked


def test_readme_sequences_example_runs():
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    code = next(
        b for b in re.findall(r"```python\n(.*?)\n```", readme, flags=re.S) if "first_fit_pack" in b
    )
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert scope["shapes"] == [(2, 4), (2, 12), (1, 2), (1, 8)]
    nested = scope["nested"]
    assert nested.is_nested and nested.layout == torch.jagged
    assert [t.tolist() for t in nested.unbind()] == [[1, 2, 3], list(range(1, 10)), [1, 2, 3, 4]]
    rows = scope["rows"]
    assert {k: v.shape for k, v in rows.items()} == {
        "tokens": (16,),
        "tokens_segment_ids": (16,),
        "tokens_positions": (16,),
    }


def test_group_by_window_stops_the_threads_of_its_windows(threads):
    def slow_double(x):
        return x * 2

    ds = dp.range(400).group_by_window(
        lambda x: x % 2,
        lambda k, w: w.map(slow_double, num_parallel_calls=2).prefetch(2),
        window_size=50,
    )
    it = iter(ds)
    assert [int(next(it)) for _ in range(3)] == [0, 4, 8]
    assert threads.names()  # the open window's map and prefetch run on threads
    it.close()
    assert threads.settle() == []
    assert sorted(int(x) for x in ds) == [2 * i for i in range(400)]
    assert threads.settle() == []
