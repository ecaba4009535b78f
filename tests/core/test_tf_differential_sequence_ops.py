"""Issue 16: the sequence ops against tf.data itself, on the same inputs.

Every op that tf.data has is run on both sides and the outputs compared element by
element (values, dtypes, order, errors); ``Dataset.random`` and ``rejection_resample``
draw from other generators than TensorFlow's, so for them the properties tf.data
documents are compared instead (range, dtype, reproducibility, epochs, the resampled
class distribution), plus the exact output where tf.data's is deterministic.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
tf = pytest.importorskip("tensorflow", reason="tensorflow-cpu (the dev extras) is not installed")

import datapipe as dp  # noqa: E402
from datapipe.errors import CardinalityError  # noqa: E402


def seqs(n=40, seed=0, high=12):
    rng = np.random.default_rng(seed)
    return [rng.integers(1, 100, int(rng.integers(1, high))).astype(np.int64) for _ in range(n)]


def tf_seqs(data, label=False, as_dict=False):
    if as_dict:
        sig = {"tokens": tf.TensorSpec((None,), tf.int64), "label": tf.TensorSpec((), tf.int64)}
        return tf.data.Dataset.from_generator(
            lambda: ({"tokens": s, "label": np.int64(len(s) % 2)} for s in data),
            output_signature=sig,
        )
    if label:
        sig = (tf.TensorSpec((None,), tf.int64), tf.TensorSpec((), tf.int64))
        return tf.data.Dataset.from_generator(
            lambda: ((s, np.int64(len(s) % 2)) for s in data), output_signature=sig
        )
    return tf.data.Dataset.from_generator(
        lambda: iter(data), output_signature=tf.TensorSpec((None,), tf.int64)
    )


def dp_seqs(data, label=False, as_dict=False):
    ds = dp.from_tensor_slices(np.arange(len(data))).map(lambda i: data[int(i)])
    if as_dict:
        return ds.map(lambda s: {"tokens": s, "label": np.int64(len(s) % 2)})
    if label:
        return ds.map(lambda s: (s, np.int64(len(s) % 2)))
    return ds


def canon(x):
    """A comparable form of one element: nested lists of (dtype, values)."""
    if isinstance(x, dict):
        return {k: canon(v) for k, v in sorted(x.items())}
    if isinstance(x, (tuple, list)):
        return [canon(v) for v in x]
    if hasattr(x, "to_list"):  # tf.RaggedTensor
        return ["ragged", x.to_list()]
    if isinstance(x, np.ndarray) and x.dtype == object:
        return ["ragged", [r.tolist() for r in x]]
    arr = np.asarray(x)
    return [arr.dtype.name, arr.tolist()]


def ours(ds):
    return [canon(x) for x in ds]


def theirs(ds):
    """tf.data's elements (iterated as tensors: ``as_numpy_iterator`` would turn a ragged
    batch of equal-length rows into a dense array)."""

    def leaf(t):
        if isinstance(t, tf.RaggedTensor):
            return ["ragged", t.to_list()]
        return canon(t.numpy())

    return [canon_nested(tf.nest.map_structure(leaf, x)) for x in ds]


def canon_nested(x):
    if isinstance(x, dict):
        return {k: canon_nested(v) for k, v in sorted(x.items())}
    if isinstance(x, tuple):
        return [canon_nested(v) for v in x]
    return x


def run_tf(ds):
    """(elements before the error, the error's message or None)."""
    out = []
    try:
        for x in ds.as_numpy_iterator():
            out.append(canon(x))
    except tf.errors.OpError as e:
        return out, e.message
    return out, None


def run_dp(ds, error=Exception):
    out = []
    try:
        for x in ds:
            out.append(canon(x))
    except error as e:
        return out, str(e)
    return out, None


# ---- bucket_by_sequence_length -------------------------------------------------------------
BUCKET_CASES = {
    "basic": dict(bucket_boundaries=[3, 6, 9], bucket_batch_sizes=[2, 3, 2, 4]),
    "padding_value": dict(
        bucket_boundaries=[4, 8], bucket_batch_sizes=[3, 3, 3], padding_values=np.int64(-1)
    ),
    "to_boundary": dict(
        bucket_boundaries=[4, 8, 13], bucket_batch_sizes=[2, 5, 3, 1], pad_to_bucket_boundary=True
    ),
    "drop_remainder": dict(bucket_boundaries=[5], bucket_batch_sizes=[4, 3], drop_remainder=True),
    "fixed_shape": dict(bucket_boundaries=[6], bucket_batch_sizes=[3, 3], padded_shapes=[12]),
    "one_bucket": dict(bucket_boundaries=[], bucket_batch_sizes=[7]),
}


@pytest.mark.parametrize("case", sorted(BUCKET_CASES))
def test_bucket_by_sequence_length_matches_tf(case):
    kw = BUCKET_CASES[case]
    data = seqs(60, seed=len(case))
    got = ours(dp_seqs(data).bucket_by_sequence_length(len, **kw))
    want = theirs(tf_seqs(data).bucket_by_sequence_length(lambda x: tf.shape(x)[0], **kw))
    assert got == want
    assert sum(len(b[1]) for b in got) <= 60 and got  # batches of rows, in tf.data's order


def test_bucket_by_sequence_length_structures_match_tf():
    data = seqs(50, seed=3)
    kw = dict(bucket_boundaries=[4, 8], bucket_batch_sizes=[4, 2, 3])
    pad = dict(padded_shapes=([None], []), padding_values=(np.int64(-7), np.int64(5)))
    got = ours(
        dp_seqs(data, label=True).bucket_by_sequence_length(lambda s, y: len(s), **kw, **pad)
    )
    want = theirs(
        tf_seqs(data, label=True).bucket_by_sequence_length(
            lambda s, y: tf.shape(s)[0], **kw, **pad
        )
    )
    assert got == want
    boundary = dict(kw, pad_to_bucket_boundary=True, bucket_boundaries=[4, 13])
    got = ours(
        dp_seqs(data, as_dict=True).bucket_by_sequence_length(
            lambda d: len(d["tokens"]), **boundary
        )
    )
    want = theirs(
        tf_seqs(data, as_dict=True).bucket_by_sequence_length(
            lambda d: tf.shape(d["tokens"])[0], **boundary
        )
    )
    assert got == want


def test_bucket_by_sequence_length_no_padding_matches_tf():
    # Every bucket holds one length: batches stack without padding.
    data = seqs(40, seed=5, high=6)
    kw = dict(bucket_boundaries=[2, 3, 4, 5], bucket_batch_sizes=[2, 3, 2, 3, 2], no_padding=True)
    got = ours(dp_seqs(data).bucket_by_sequence_length(len, **kw))
    assert got == theirs(tf_seqs(data).bucket_by_sequence_length(lambda x: tf.shape(x)[0], **kw))


def test_bucket_by_sequence_length_boundary_error_like_tf():
    # tf.data raises when the too-long element's bucket is batched (at the end here, after
    # the other buckets' batches); datapipe raises when the element is read and loses only
    # it: the same batches come out, and the same error, at another position.
    data = [np.arange(n) for n in (1, 2, 9, 3)]
    kw = dict(bucket_boundaries=[3, 5], bucket_batch_sizes=[2, 2, 2], pad_to_bucket_boundary=True)
    tf_out, tf_err = run_tf(tf_seqs(data).bucket_by_sequence_length(lambda x: tf.shape(x)[0], **kw))
    assert "elements must have length < max(bucket_boundaries)" in tf_err
    it = iter(dp_seqs(data).bucket_by_sequence_length(len, **kw))
    dp_out = [canon(next(it))]
    with pytest.raises(dp.PipelineError) as info:
        next(it)
    assert "elements must have length < max(bucket_boundaries) = 5" in str(info.value)
    assert "bucket_by_sequence_length at element 2" in str(info.value)
    assert "has length 9" in str(info.value)
    dp_out += [canon(x) for x in it]
    assert dp_out == tf_out == [["int64", [[0, 0], [0, 1]]], ["int64", [[0, 1, 2, 0]]]]


# ---- group_by_window -------------------------------------------------------------------------
GROUP_CASES = {
    "window_size": (lambda x: x % 3, dict(window_size=4)),
    "window_size_func": (lambda x: x % 5, dict(window_size_func=lambda k: k + 1)),
    "end_flush_in_key_order": (lambda x: (x * 7) % 4, dict(window_size=100)),
}


@pytest.mark.parametrize("case", sorted(GROUP_CASES))
def test_group_by_window_matches_tf(case):
    key, kw = GROUP_CASES[case]
    values = np.random.default_rng(1).integers(0, 50, 41)
    got = ours(
        dp.from_tensor_slices(values).group_by_window(
            key, lambda k, w: w.batch(3).map(lambda b: b.sum() + k), **kw
        )
    )
    tf_kw = dict(kw)
    if "window_size_func" in kw:
        tf_kw["window_size_func"] = lambda k: tf.cast(kw["window_size_func"](k), tf.int64)
    want = theirs(
        tf.data.Dataset.from_tensor_slices(values).group_by_window(
            lambda x: tf.cast(key(x), tf.int64),
            lambda k, w: w.batch(3).map(lambda b: tf.reduce_sum(b) + k),
            **tf_kw,
        )
    )
    assert got == want and len(got) >= 4


def run_through_errors(it, error, limit=20):
    """Elements, and ``"error: <message>"`` for each failure, iterating past failures."""
    out = []
    for _ in range(limit):
        try:
            out.append(canon(next(it)))
        except StopIteration:
            return out
        except error as e:
            out.append(f"error: {getattr(e, 'message', str(e))}")
    raise AssertionError("the iterator did not end")


def test_group_by_window_zero_window_size_like_tf():
    # Both raise at the element whose key has window size 0, go on past it, and flush
    # the other groups in ascending key order at the end.
    values = np.array([3, 2, 1, 0, 1], dtype=np.int64)
    kw = dict(window_size_func=lambda k: k)
    tf_ds = tf.data.Dataset.from_tensor_slices(values).group_by_window(
        lambda x: x, lambda k, w: w.batch(9), **kw
    )
    tf_out = run_through_errors(iter(tf_ds), tf.errors.InvalidArgumentError)
    dp_ds = dp.from_tensor_slices(values).group_by_window(
        lambda x: x, lambda k, w: w.batch(9), **kw
    )
    dp_out = run_through_errors(iter(dp_ds), dp.PipelineError)
    assert "Window size must be greater than zero, but got 0" in tf_out[1]
    assert dp_out[1] == (
        "error: group_by_window at element 3: ValueError: Window size must be greater than "
        "zero, but got 0"
    )
    tf_out[1] = dp_out[1] = "error"
    assert (
        dp_out
        == tf_out
        == [["int64", [1]], "error", ["int64", [1]], ["int64", [2]], ["int64", [3]]]
    )


# ---- rebatch, ragged_batch -----------------------------------------------------------------
@pytest.mark.parametrize(
    "batch, sizes, drop",
    [(6, 4, False), (6, [2, 3], True), (6, [2, 3], False), (5, 7, True), (3, [1, 4, 2], False)],
)
def test_rebatch_matches_tf(batch, sizes, drop):
    got = dp.range(23).batch(batch).rebatch(sizes, drop_remainder=drop)
    want = tf.data.Dataset.range(23).batch(batch).rebatch(sizes, drop_remainder=drop)
    assert ours(got) == theirs(want)
    pairs = dp.zip(dp.range(23), dp.range(23).map(lambda x: x * 1.5)).batch(batch)
    tf_pairs = tf.data.Dataset.zip(
        (
            tf.data.Dataset.range(23),
            tf.data.Dataset.range(23).map(lambda x: tf.cast(x, tf.float64) * 1.5),
        )
    ).batch(batch)
    assert ours(pairs.rebatch(sizes, drop)) == theirs(tf_pairs.rebatch(sizes, drop))
    assert got.cardinality() == int(want.cardinality()) == dp.UNKNOWN_CARDINALITY
    assert [s.shape for s in [got.element_spec]] == [tuple(want.element_spec.shape.as_list())]


def test_ragged_batch_matches_tf():
    data = seqs(11, seed=2)
    for b, drop in ((3, False), (4, True), (20, False)):
        got = ours(dp_seqs(data, label=True).ragged_batch(b, drop_remainder=drop))
        want = theirs(tf_seqs(data, label=True).ragged_batch(b, drop_remainder=drop))
        assert got == want and got
    empty_rows = dp.range(5).map(lambda x: np.arange(x)).ragged_batch(2)
    tf_rows = tf.data.Dataset.range(5).map(lambda x: tf.range(x)).ragged_batch(2)
    assert (
        ours(empty_rows)
        == theirs(tf_rows)
        == [
            ["ragged", [[], [0]]],
            ["ragged", [[0, 1], [0, 1, 2]]],
            ["ragged", [[0, 1, 2, 3]]],
        ]
    )


# ---- counter, random ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kw", [{}, {"start": 3, "step": 2}, {"start": 10, "step": -3, "dtype": "int32"}]
)
def test_counter_matches_tf(kw):
    tf_kw = dict(kw, dtype=tf.as_dtype(kw["dtype"])) if "dtype" in kw else kw
    got, want = dp.Dataset.counter(**kw), tf.data.Dataset.counter(**tf_kw)
    assert ours(got.take(6)) == theirs(want.take(6))
    assert got.cardinality() == int(want.cardinality()) == dp.INFINITE_CARDINALITY
    assert got.element_spec.dtype.name == want.element_spec.dtype.name


def test_random_behaves_like_tf():
    for make, src in ((dp.Dataset.random, "dp"), (tf.data.Dataset.random, "tf")):
        take = (
            (lambda ds: [int(x) for x in ds.take(300)])
            if src == "dp"
            else (lambda ds: [int(x) for x in ds.take(300).as_numpy_iterator()])
        )
        a = take(make(seed=4))
        assert a == take(make(seed=4)) and a != take(make(seed=5)), src
        assert min(a) >= 0 and max(a) < 2**32 and max(a) > 2**31, src  # 32-bit values
        same = make(seed=4)
        assert take(same) == take(same), src  # rerandomize_each_iteration defaults to False
        fresh = make(seed=4, rerandomize_each_iteration=True).take(300)
        first = [int(x) for x in (fresh if src == "dp" else fresh.as_numpy_iterator())]
        again = [int(x) for x in (fresh if src == "dp" else fresh.as_numpy_iterator())]
        assert first != again, src  # each iteration of one dataset object: a new epoch
    spec = dp.Dataset.random(seed=1).element_spec
    assert spec.dtype.name == tf.data.Dataset.random(seed=1).element_spec.dtype.name == "int64"
    assert dp.Dataset.random().cardinality() == dp.INFINITE_CARDINALITY


# ---- reduce, get_single_element, assert_cardinality --------------------------------------------
def test_reduce_matches_tf():
    pairs = dp.zip(dp.range(7), dp.range(7).map(lambda x: x * 3))
    tf_pairs = tf.data.Dataset.zip(
        (tf.data.Dataset.range(7), tf.data.Dataset.range(7).map(lambda x: x * 3))
    )
    got = pairs.reduce((np.int64(0), np.int64(0)), lambda s, xy: (s[0] + 1, s[1] + xy[0] * xy[1]))
    want = tf_pairs.reduce(
        (np.int64(0), np.int64(0)), lambda s, xy: (s[0] + 1, s[1] + xy[0] * xy[1])
    )
    assert [int(v) for v in got] == [int(v) for v in want] == [7, 273]
    empty = dp.range(0).reduce(np.int64(5), lambda s, x: s + x)
    assert int(empty) == int(tf.data.Dataset.range(0).reduce(np.int64(5), lambda s, x: s + x)) == 5


def test_get_single_element_matches_tf():
    got = dp.range(4).batch(4).get_single_element()
    assert got.tolist() == tf.data.Dataset.range(4).batch(4).get_single_element().numpy().tolist()
    for n, words in ((0, "was empty"), (2, "had more than one element")):
        with pytest.raises(
            tf.errors.InvalidArgumentError,
            match=words.capitalize().replace("Was", "Dataset was").replace("Had", "Dataset had"),
        ):
            tf.data.Dataset.range(n).get_single_element()
        with pytest.raises(ValueError, match=f"^get_single_element: the dataset {words}$"):
            dp.range(n).get_single_element()


@pytest.mark.parametrize(
    "n, expected", [(2, 3), (5, 3), (3, 1), (4, 0), (5, dp.INFINITE_CARDINALITY)]
)
def test_assert_cardinality_matches_tf(n, expected):
    tf_ds = tf.data.Dataset.range(n).filter(lambda x: True)
    tf_out, tf_err = run_tf(tf_ds.apply(tf.data.experimental.assert_cardinality(expected)))
    ds = dp.range(n).filter(lambda x: True).assert_cardinality(expected)
    assert ds.cardinality() == expected
    dp_out, dp_err = run_dp(ds, CardinalityError)
    assert dp_out == tf_out
    sentence = tf_err.strip().split("Input dataset ")[1].split(" [Op")[0]
    assert dp_err == f"assert_cardinality: the input dataset {sentence}"


def test_assert_cardinality_passes_like_tf():
    ds = dp.range(6).filter(lambda x: x % 2 == 0).assert_cardinality(3)
    tf_ds = tf.data.Dataset.range(6).filter(lambda x: x % 2 == 0)
    assert ours(ds) == theirs(tf_ds.apply(tf.data.experimental.assert_cardinality(3)))


# ---- rejection_resample --------------------------------------------------------------------------
def test_rejection_resample_keeps_everything_when_initial_is_target_like_tf():
    labels = np.random.default_rng(0).choice(3, size=200, p=[0.5, 0.3, 0.2])
    dist = [0.5, 0.3, 0.2]
    got = ours(dp.from_tensor_slices(labels).rejection_resample(lambda y: y, dist, dist, seed=1))
    want = theirs(
        tf.data.Dataset.from_tensor_slices(labels).rejection_resample(
            lambda y: tf.cast(y, tf.int32), dist, dist, seed=1
        )
    )
    assert [v for _, v in got] == [v for _, v in want] == [["int64", int(y)] for y in labels]


@pytest.mark.parametrize("initial", [[0.8, 0.15, 0.05], None], ids=["given", "estimated"])
def test_rejection_resample_reaches_tf_target_distribution(initial):
    n, target = 30000, [0.3, 0.3, 0.4]
    labels = np.random.default_rng(2).choice(3, size=n, p=[0.8, 0.15, 0.05]).astype(np.int64)
    ds = dp.from_tensor_slices((labels, np.arange(n))).rejection_resample(
        lambda y, i: y, target, initial, seed=3
    )
    kept = [(int(c), int(y), int(i)) for c, (y, i) in ds]
    classes = np.array([c for c, _, _ in kept])
    assert all(c == y for c, y, _ in kept)  # (class_func(x), x) pairs
    order = [i for _, _, i in kept]
    assert order == sorted(set(order))  # input order, every element at most once
    # Rejection sampling keeps about n * min_i(initial_i / target_i) = n / 8 elements
    # (the estimate's warm-up keeps a few more).
    assert abs(len(classes) - n / 8) < 0.08 * n / 8 + (400 if initial is None else 0)
    # tf.data on a shorter input (it is the slow side): both reach the target, within
    # about 4 standard deviations of a proportion (and the estimate's warm-up).
    m = 8000
    tf_ds = tf.data.Dataset.from_tensor_slices(labels[:m]).rejection_resample(
        lambda y: tf.cast(y, tf.int32), target, initial, seed=3
    )
    tf_classes = np.array([int(c) for c, _ in tf_ds.as_numpy_iterator()])
    ours_freq = np.bincount(classes, minlength=3) / len(classes)
    tf_freq = np.bincount(tf_classes, minlength=3) / len(tf_classes)
    assert np.abs(ours_freq - target).max() < (0.02 if initial else 0.04), ours_freq
    assert np.abs(tf_freq - target).max() < 0.06, tf_freq
