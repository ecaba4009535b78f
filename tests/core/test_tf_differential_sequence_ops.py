"""Issue 16: the sequence ops against tf.data itself, on the same inputs.

Every op that tf.data has is run on both sides and the outputs compared element by
element (values, dtypes, order, errors); ``Dataset.random`` and ``rejection_resample``
draw from other generators than TensorFlow's, so for them the properties tf.data
documents are compared instead (range, dtype, reproducibility, epochs, the resampled
class distribution), plus the exact output where tf.data's is deterministic.

tf.data's side is a function of this module called through ``ref`` (tests/differential.py):
read from tests/goldens/ in the default run, run by TensorFlow under ``-m differential``.
"""

from __future__ import annotations

import numpy as np
import pytest
from differential import tf as _tf

import datapipe as dp
from datapipe.errors import CardinalityError


def seqs(n=40, seed=0, high=12):
    rng = np.random.default_rng(seed)
    return [rng.integers(1, 100, int(rng.integers(1, high))).astype(np.int64) for _ in range(n)]


def tf_seqs(data, label=False, as_dict=False):
    tf = _tf()
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
    tf = _tf()

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
    tf = _tf()
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


def tf_bucket(data, kw, structure=None, run=theirs):
    """tf.data's bucket_by_sequence_length of ``data`` (plain sequences, ``"label"``
    pairs or ``"dict"`` elements), through ``run`` (``theirs``, or ``run_tf`` for errors)."""
    tf = _tf()
    ds = tf_seqs(data, label=structure == "label", as_dict=structure == "dict")
    length = {
        None: lambda x: tf.shape(x)[0],
        "label": lambda s, y: tf.shape(s)[0],
        "dict": lambda d: tf.shape(d["tokens"])[0],
    }[structure]
    return run(ds.bucket_by_sequence_length(length, **kw))


@pytest.mark.parametrize("case", sorted(BUCKET_CASES))
def test_bucket_by_sequence_length_matches_tf(ref, case):
    kw = BUCKET_CASES[case]
    data = seqs(60, seed=len(case))
    got = ours(dp_seqs(data).bucket_by_sequence_length(len, **kw))
    assert got == ref(tf_bucket, data, kw)
    assert sum(len(b[1]) for b in got) <= 60 and got  # batches of rows, in tf.data's order


def test_bucket_by_sequence_length_structures_match_tf(ref):
    data = seqs(50, seed=3)
    kw = dict(bucket_boundaries=[4, 8], bucket_batch_sizes=[4, 2, 3])
    pad = dict(padded_shapes=([None], []), padding_values=(np.int64(-7), np.int64(5)))
    got = ours(
        dp_seqs(data, label=True).bucket_by_sequence_length(lambda s, y: len(s), **kw, **pad)
    )
    assert got == ref(tf_bucket, data, dict(kw, **pad), "label")
    boundary = dict(kw, pad_to_bucket_boundary=True, bucket_boundaries=[4, 13])
    got = ours(
        dp_seqs(data, as_dict=True).bucket_by_sequence_length(
            lambda d: len(d["tokens"]), **boundary
        )
    )
    assert got == ref(tf_bucket, data, boundary, "dict")


def test_bucket_by_sequence_length_no_padding_matches_tf(ref):
    # Every bucket holds one length: batches stack without padding.
    data = seqs(40, seed=5, high=6)
    kw = dict(bucket_boundaries=[2, 3, 4, 5], bucket_batch_sizes=[2, 3, 2, 3, 2], no_padding=True)
    got = ours(dp_seqs(data).bucket_by_sequence_length(len, **kw))
    assert got == ref(tf_bucket, data, kw)


def test_bucket_by_sequence_length_boundary_error_like_tf(ref):
    # tf.data raises when the too-long element's bucket is batched (at the end here, after
    # the other buckets' batches); datapipe raises when the element is read and loses only
    # it: the same batches come out, and the same error, at another position.
    data = [np.arange(n) for n in (1, 2, 9, 3)]
    kw = dict(bucket_boundaries=[3, 5], bucket_batch_sizes=[2, 2, 2], pad_to_bucket_boundary=True)
    tf_out, tf_err = ref(tf_bucket, data, kw, None, run_tf)
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


def tf_group_by_window(case, values):
    tf = _tf()
    key, kw = GROUP_CASES[case]
    tf_kw = dict(kw)
    if "window_size_func" in kw:
        tf_kw["window_size_func"] = lambda k: tf.cast(kw["window_size_func"](k), tf.int64)
    return theirs(
        tf.data.Dataset.from_tensor_slices(values).group_by_window(
            lambda x: tf.cast(key(x), tf.int64),
            lambda k, w: w.batch(3).map(lambda b: tf.reduce_sum(b) + k),
            **tf_kw,
        )
    )


@pytest.mark.parametrize("case", sorted(GROUP_CASES))
def test_group_by_window_matches_tf(ref, case):
    key, kw = GROUP_CASES[case]
    values = np.random.default_rng(1).integers(0, 50, 41)
    got = ours(
        dp.from_tensor_slices(values).group_by_window(
            key, lambda k, w: w.batch(3).map(lambda b: b.sum() + k), **kw
        )
    )
    assert got == ref(tf_group_by_window, case, values) and len(got) >= 4


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


def tf_group_by_zero_window(values):
    tf = _tf()
    tf_ds = tf.data.Dataset.from_tensor_slices(values).group_by_window(
        lambda x: x, lambda k, w: w.batch(9), window_size_func=lambda k: k
    )
    return run_through_errors(iter(tf_ds), tf.errors.InvalidArgumentError)


def test_group_by_window_zero_window_size_like_tf(ref):
    # Both raise at the element whose key has window size 0, go on past it, and flush
    # the other groups in ascending key order at the end.
    values = np.array([3, 2, 1, 0, 1], dtype=np.int64)
    tf_out = ref(tf_group_by_zero_window, values)
    dp_ds = dp.from_tensor_slices(values).group_by_window(
        lambda x: x, lambda k, w: w.batch(9), window_size_func=lambda k: k
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
def tf_rebatch(batch, sizes, drop):
    """tf.data's rebatch of range(23) and of (int, float) pairs; cardinality; shape."""
    tf = _tf()
    want = tf.data.Dataset.range(23).batch(batch).rebatch(sizes, drop_remainder=drop)
    tf_pairs = tf.data.Dataset.zip(
        (
            tf.data.Dataset.range(23),
            tf.data.Dataset.range(23).map(lambda x: tf.cast(x, tf.float64) * 1.5),
        )
    ).batch(batch)
    return {
        "elements": theirs(want),
        "pairs": theirs(tf_pairs.rebatch(sizes, drop)),
        "cardinality": int(want.cardinality()),
        "shape": tuple(want.element_spec.shape.as_list()),
    }


@pytest.mark.parametrize(
    "batch, sizes, drop",
    [(6, 4, False), (6, [2, 3], True), (6, [2, 3], False), (5, 7, True), (3, [1, 4, 2], False)],
)
def test_rebatch_matches_tf(ref, batch, sizes, drop):
    got = dp.range(23).batch(batch).rebatch(sizes, drop_remainder=drop)
    want = ref(tf_rebatch, batch, sizes, drop)
    assert ours(got) == want["elements"]
    pairs = dp.zip(dp.range(23), dp.range(23).map(lambda x: x * 1.5)).batch(batch)
    assert ours(pairs.rebatch(sizes, drop)) == want["pairs"]
    assert got.cardinality() == want["cardinality"] == dp.UNKNOWN_CARDINALITY
    assert got.element_spec.shape == want["shape"]


def tf_ragged_batches(data, cases):
    tf = _tf()
    rows = tf.data.Dataset.range(5).map(lambda x: tf.range(x)).ragged_batch(2)
    batches = [
        theirs(tf_seqs(data, label=True).ragged_batch(b, drop_remainder=d)) for b, d in cases
    ]
    return {"batches": batches, "empty_rows": theirs(rows)}


def test_ragged_batch_matches_tf(ref):
    data = seqs(11, seed=2)
    cases = [(3, False), (4, True), (20, False)]
    want = ref(tf_ragged_batches, data, cases)
    for (b, drop), expected in zip(cases, want["batches"], strict=True):
        got = ours(dp_seqs(data, label=True).ragged_batch(b, drop_remainder=drop))
        assert got == expected and got
    empty_rows = dp.range(5).map(lambda x: np.arange(x)).ragged_batch(2)
    assert (
        ours(empty_rows)
        == want["empty_rows"]
        == [
            ["ragged", [[], [0]]],
            ["ragged", [[0, 1], [0, 1, 2]]],
            ["ragged", [[0, 1, 2, 3]]],
        ]
    )


# ---- counter, random ---------------------------------------------------------------------------
def tf_counter(kw):
    tf = _tf()
    tf_kw = dict(kw, dtype=tf.as_dtype(kw["dtype"])) if "dtype" in kw else kw
    want = tf.data.Dataset.counter(**tf_kw)
    return {
        "head": theirs(want.take(6)),
        "cardinality": int(want.cardinality()),
        "dtype": want.element_spec.dtype.name,
    }


@pytest.mark.parametrize(
    "kw", [{}, {"start": 3, "step": 2}, {"start": 10, "step": -3, "dtype": "int32"}]
)
def test_counter_matches_tf(ref, kw):
    got, want = dp.Dataset.counter(**kw), ref(tf_counter, kw)
    assert ours(got.take(6)) == want["head"]
    assert got.cardinality() == want["cardinality"] == dp.INFINITE_CARDINALITY
    assert got.element_spec.dtype.name == want["dtype"]


def random_draws(make, values):
    """What tf.data documents of ``Dataset.random``, as values (``values(ds)``: one pass
    over ``ds`` as ints): 300 draws of seed 4 (twice, from two datasets and from one), of
    seed 5, and two iterations of one dataset with ``rerandomize_each_iteration=True``."""
    same, fresh = make(seed=4), make(seed=4, rerandomize_each_iteration=True).take(300)
    return {
        "seed4": values(make(seed=4).take(300)),
        "seed4_again": values(make(seed=4).take(300)),
        "seed5": values(make(seed=5).take(300)),
        "one_dataset": [values(same.take(300)), values(same.take(300))],
        "rerandomized": [values(fresh), values(fresh)],
    }


def tf_random_draws():
    tf = _tf()
    values = lambda ds: [int(x) for x in ds.as_numpy_iterator()]  # noqa: E731
    return random_draws(tf.data.Dataset.random, values) | {
        "dtype": tf.data.Dataset.random(seed=1).element_spec.dtype.name
    }


def test_random_behaves_like_tf(ref):
    dp_draws = random_draws(dp.Dataset.random, lambda ds: [int(x) for x in ds])
    for src, d in (("dp", dp_draws), ("tf", ref(tf_random_draws))):
        a = d["seed4"]
        assert a == d["seed4_again"] and a != d["seed5"], src
        assert min(a) >= 0 and max(a) < 2**32 and max(a) > 2**31, src  # 32-bit values
        first, again = d["one_dataset"]
        assert first == again, src  # rerandomize_each_iteration defaults to False
        first, again = d["rerandomized"]
        assert first != again, src  # each iteration of one dataset object: a new epoch
    spec = dp.Dataset.random(seed=1).element_spec
    assert spec.dtype.name == ref(tf_random_draws)["dtype"] == "int64"
    assert dp.Dataset.random().cardinality() == dp.INFINITE_CARDINALITY


# ---- reduce, get_single_element, assert_cardinality --------------------------------------------
def tf_reduce():
    tf = _tf()
    tf_pairs = tf.data.Dataset.zip(
        (tf.data.Dataset.range(7), tf.data.Dataset.range(7).map(lambda x: x * 3))
    )
    want = tf_pairs.reduce(
        (np.int64(0), np.int64(0)), lambda s, xy: (s[0] + 1, s[1] + xy[0] * xy[1])
    )
    empty = tf.data.Dataset.range(0).reduce(np.int64(5), lambda s, x: s + x)
    return {"pairs": [int(v) for v in want], "empty": int(empty)}


def test_reduce_matches_tf(ref):
    pairs = dp.zip(dp.range(7), dp.range(7).map(lambda x: x * 3))
    got = pairs.reduce((np.int64(0), np.int64(0)), lambda s, xy: (s[0] + 1, s[1] + xy[0] * xy[1]))
    want = ref(tf_reduce)
    assert [int(v) for v in got] == want["pairs"] == [7, 273]
    empty = dp.range(0).reduce(np.int64(5), lambda s, x: s + x)
    assert int(empty) == want["empty"] == 5


def tf_get_single_element():
    tf = _tf()
    errors = {}
    for n in (0, 2):
        try:
            tf.data.Dataset.range(n).get_single_element()
        except tf.errors.InvalidArgumentError as e:
            errors[n] = e.message
    return {"batch": tf.data.Dataset.range(4).batch(4).get_single_element().numpy(), **errors}


def test_get_single_element_matches_tf(ref):
    got = dp.range(4).batch(4).get_single_element()
    want = ref(tf_get_single_element)
    assert got.tolist() == want["batch"].tolist()
    for n, words in ((0, "was empty"), (2, "had more than one element")):
        assert (
            words.capitalize().replace("Was", "Dataset was").replace("Had", "Dataset had")
            in want[n]
        )
        with pytest.raises(ValueError, match=f"^get_single_element: the dataset {words}$"):
            dp.range(n).get_single_element()


def tf_assert_cardinality(n, expected, filtered):
    tf = _tf()
    ds = tf.data.Dataset.range(n).filter(filtered)
    return run_tf(ds.apply(tf.data.experimental.assert_cardinality(expected)))


@pytest.mark.parametrize(
    "n, expected", [(2, 3), (5, 3), (3, 1), (4, 0), (5, dp.INFINITE_CARDINALITY)]
)
def test_assert_cardinality_matches_tf(ref, n, expected):
    tf_out, tf_err = ref(tf_assert_cardinality, n, expected, keep_all)
    ds = dp.range(n).filter(lambda x: True).assert_cardinality(expected)
    assert ds.cardinality() == expected
    dp_out, dp_err = run_dp(ds, CardinalityError)
    assert dp_out == tf_out
    sentence = tf_err.strip().split("Input dataset ")[1].split(" [Op")[0]
    assert dp_err == f"assert_cardinality: the input dataset {sentence}"


def keep_all(x):
    return True


def keep_even(x):
    return x % 2 == 0


def test_assert_cardinality_passes_like_tf(ref):
    ds = dp.range(6).filter(lambda x: x % 2 == 0).assert_cardinality(3)
    assert ours(ds) == ref(tf_assert_cardinality, 6, 3, keep_even)[0]


# ---- rejection_resample --------------------------------------------------------------------------
def tf_rejection_resample(labels, target, initial):
    tf = _tf()
    return theirs(
        tf.data.Dataset.from_tensor_slices(labels).rejection_resample(
            lambda y: tf.cast(y, tf.int32), target, initial, seed=1
        )
    )


def test_rejection_resample_keeps_everything_when_initial_is_target_like_tf(ref):
    labels = np.random.default_rng(0).choice(3, size=200, p=[0.5, 0.3, 0.2])
    dist = [0.5, 0.3, 0.2]
    got = ours(dp.from_tensor_slices(labels).rejection_resample(lambda y: y, dist, dist, seed=1))
    want = ref(tf_rejection_resample, labels, dist, dist)
    assert [v for _, v in got] == [v for _, v in want] == [["int64", int(y)] for y in labels]


def tf_resampled_class_counts(labels, target, initial):
    tf = _tf()
    tf_ds = tf.data.Dataset.from_tensor_slices(labels).rejection_resample(
        lambda y: tf.cast(y, tf.int32), target, initial, seed=3
    )
    return np.bincount([int(c) for c, _ in tf_ds.as_numpy_iterator()], minlength=3)


@pytest.mark.parametrize("initial", [[0.8, 0.15, 0.05], None], ids=["given", "estimated"])
def test_rejection_resample_reaches_tf_target_distribution(ref, initial):
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
    tf_counts = ref(tf_resampled_class_counts, labels[:8000], target, initial)
    ours_freq = np.bincount(classes, minlength=3) / len(classes)
    tf_freq = tf_counts / tf_counts.sum()
    assert np.abs(ours_freq - target).max() < (0.02 if initial else 0.04), ours_freq
    assert np.abs(tf_freq - target).max() < 0.06, tf_freq
