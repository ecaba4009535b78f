"""Property tests (hypothesis) for the stream ops: identities, partitions, cardinality,
and exact checkpoint/resume at any cut point of random op chains."""

from __future__ import annotations

import pickle

import numpy as np
from harness import py, values
from hypothesis import given, settings
from hypothesis import strategies as st

import datapipe as dp

SETTINGS = settings(max_examples=40, deadline=None)


@SETTINGS
@given(
    st.lists(st.integers(-1000, 1000), max_size=40),
    st.integers(1, 9),
    st.booleans(),
    st.booleans(),
)
def test_batch_then_unbatch_is_identity(xs, b, drop, streamed) -> None:
    ds = dp.from_tensor_slices(np.array(xs, dtype=np.int64))
    if streamed:
        ds = ds.filter(lambda x: True)
    out = values(ds.batch(b, drop_remainder=drop).unbatch())
    assert out == (xs[: len(xs) // b * b] if drop else xs)


@SETTINGS
@given(st.lists(st.integers(0, 6), min_size=1, max_size=25), st.integers(1, 6), st.integers(-3, 3))
def test_padded_batch_shapes_and_contents(lengths, b, pad) -> None:
    ds = dp.from_tensor_slices(np.array(lengths)).map(lambda n: np.arange(1, n + 1))
    batches = list(ds.padded_batch(b, padding_values=pad))
    assert len(batches) == -(-len(lengths) // b)
    for k, batch in enumerate(batches):
        group = lengths[k * b : (k + 1) * b]
        assert batch.shape == (len(group), max(group))
        for row, n in zip(batch.tolist(), group):
            assert row == list(range(1, n + 1)) + [pad] * (max(group) - n)


@SETTINGS
@given(st.integers(0, 60), st.integers(1, 9), st.booleans())
def test_shards_partition_the_input(n, k, streamed) -> None:
    ds = dp.range(n)
    if streamed:
        ds = ds.filter(lambda x: True)
    shards = [values(ds.shard(k, i)) for i in range(k)]
    merged = sorted(x for s in shards for x in s)
    assert merged == list(range(n))  # no loss, no duplicate
    for i, s in enumerate(shards):
        assert s == list(range(i, n, k))
        if not streamed:
            assert ds.shard(k, i).cardinality() == len(s)


# A card op: (name, args). Chains of these keep elements scalar int64.
CARD_OPS = st.one_of(
    st.tuples(st.just("take"), st.integers(-1, 12)),
    st.tuples(st.just("skip"), st.integers(-1, 12)),
    st.tuples(st.just("repeat"), st.integers(0, 3)),
    st.tuples(st.just("batch_unbatch"), st.integers(1, 5)),
    st.tuples(st.just("shard"), st.integers(1, 4)),
    st.tuples(st.just("window"), st.integers(1, 4)),
    st.tuples(st.just("enumerate"), st.integers(0, 3)),
    st.tuples(st.just("filter"), st.integers(2, 4)),
    st.tuples(st.just("cache"), st.integers(0, 0)),
)


def apply_card_op(ds, op):
    name, a = op
    if name == "take":
        return ds.take(a)
    if name == "skip":
        return ds.skip(a)
    if name == "repeat":
        return ds.repeat(a)
    if name == "batch_unbatch":
        return ds.batch(a, drop_remainder=True).unbatch()
    if name == "shard":
        return ds.shard(a, a - 1)
    if name == "window":
        return ds.window(a, shift=2).flat_map(lambda w: w.take(1))
    if name == "enumerate":
        return ds.enumerate(a).map(lambda i, x: x + i)
    if name == "filter":
        return ds.filter(lambda x: x % a != 0)
    return ds.cache()


@SETTINGS
@given(st.integers(0, 30), st.lists(CARD_OPS, max_size=4))
def test_cardinality_matches_the_count(n, ops) -> None:
    ds = dp.range(n)
    for op in ops:
        ds = apply_card_op(ds, op)
    count = len(values(ds))
    card = ds.cardinality()
    if card == dp.UNKNOWN_CARDINALITY:
        assert any(name in ("filter", "window") for name, _ in ops)
    else:
        assert card == count
    if not any(name in ("filter", "window") for name, _ in ops):
        assert card == count  # every op here knows its cardinality (window feeds flat_map)


# Chain ops for the resume property: (name, arg); they accept scalar or vector int64.
CHAIN_OPS = st.one_of(
    st.tuples(st.just("map"), st.integers(1, 3)),
    st.tuples(st.just("batch"), st.integers(1, 4)),
    st.tuples(st.just("unbatch"), st.integers(0, 0)),
    st.tuples(st.just("shuffle"), st.integers(1, 8)),
    st.tuples(st.just("repeat"), st.integers(1, 3)),
    st.tuples(st.just("take"), st.integers(0, 25)),
    st.tuples(st.just("skip"), st.integers(0, 5)),
    st.tuples(st.just("filter"), st.integers(2, 4)),
    st.tuples(st.just("flat_map"), st.integers(0, 3)),
    st.tuples(st.just("padded_batch"), st.integers(1, 4)),
    st.tuples(st.just("enumerate"), st.integers(0, 2)),
    st.tuples(st.just("scan"), st.integers(0, 2)),
    st.tuples(st.just("take_while"), st.integers(3, 40)),
    st.tuples(st.just("unique"), st.integers(0, 0)),
    st.tuples(st.just("window"), st.integers(1, 3)),
    st.tuples(st.just("shard"), st.integers(1, 3)),
    st.tuples(st.just("cache"), st.integers(0, 0)),
)


def spec_fits(ds, rank: int) -> bool:
    """False when ``map`` ran over an empty stream: it cannot infer its spec and reports
    its input's, whose rank or structure may differ, and unbatch/unique check the spec at
    construction (as tf.data does)."""
    spec = ds.element_spec
    return isinstance(spec, dp.TensorSpec) and spec.rank == rank


def build_chain(n, ops):
    """Apply ``ops``, skipping those that do not fit the current rank (0 or 1)."""
    ds, rank = dp.range(n), 0
    for name, a in ops:
        if name == "map":
            ds = ds.map(lambda x, a=a: x * a + 1)
        elif name == "batch" and rank == 0:
            ds, rank = ds.batch(a), 1
        elif name == "padded_batch" and rank == 0:
            ds, rank = ds.map(lambda x: np.arange(x % 3)).padded_batch(a, padding_values=-1), 2
            ds, rank = ds.unbatch(), 1
        elif name == "unbatch" and rank == 1 and spec_fits(ds, rank):
            ds, rank = ds.unbatch(), 0
        elif name == "shuffle":
            ds = ds.shuffle(a)
        elif name == "repeat":
            ds = ds.repeat(a)
        elif name == "take":
            ds = ds.take(a)
        elif name == "skip":
            ds = ds.skip(a)
        elif name == "filter":
            ds = ds.filter(lambda x, a=a: bool(np.sum(x) % a != 0))
        elif name == "flat_map" and rank == 0:
            ds = ds.flat_map(lambda x, a=a: dp.range(a).map(lambda j, x=x: x + j))
        elif name == "enumerate":
            ds = ds.enumerate(a).map(lambda i, x: x + i)
        elif name == "scan":
            ds = ds.scan(np.int64(a), lambda s, x: (s + 1, x + s))
        elif name == "take_while":
            ds = ds.take_while(lambda x, a=a: bool(np.sum(x) < a * 4))
        elif name == "unique" and rank == 0 and spec_fits(ds, rank):
            ds = ds.unique()
        elif name == "window":
            ds = ds.window(a + 1, shift=a).flat_map(lambda w: w)
        elif name == "shard":
            ds = ds.shard(a, a // 2)
        elif name == "cache":
            ds = ds.cache()
    return ds.with_options(dp.Options(seed=1234))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 20), st.lists(CHAIN_OPS, min_size=1, max_size=5), st.integers(0, 80))
def test_resume_at_any_cut(n, ops, cut) -> None:
    # Each iter() is a new epoch (shuffle reshuffles), so the restored iterator is compared
    # with the rest of the very iterator the state was taken from.
    ds = build_chain(n, ops)
    it = iter(ds)
    head = [py(x) for _, x in zip(range(cut), it)]
    state = pickle.loads(pickle.dumps(it.get_state()))
    rest = [py(x) for x in it]
    assert len(head) == cut or rest == []  # a short stream ended before the cut
    fresh = iter(ds)
    fresh.set_state(state)
    assert [py(x) for x in fresh] == rest


def test_unbatch_of_an_empty_batched_map_has_cardinality_zero() -> None:
    # map over an empty input has an unknown element spec (nothing to infer it from), so
    # the batch shape is unknown; unbatch of zero batches is still zero elements.
    ds = dp.range(0).map(lambda x: x + 1).batch(1, drop_remainder=True).unbatch()
    assert ds.cardinality() == 0
    assert values(ds) == []
