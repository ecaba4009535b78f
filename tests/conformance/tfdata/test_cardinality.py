"""tf.data's cardinality tests (``kernel_tests/cardinality_test.py``, and the same table
in ``experimental/kernel_tests/cardinality_test.py``)."""

from __future__ import annotations

import pytest

import datapipe as dp

INF, UNK = dp.INFINITE_CARDINALITY, dp.UNKNOWN_CARDINALITY


def _true(_):
    return True


CASES = {
    "Map1": (lambda: dp.range(5).map(lambda x: x), 5),
    "Map2": (lambda: dp.range(5).map(lambda x: x, num_parallel_calls=1), 5),
    "Batch1": (lambda: dp.range(5).batch(2, drop_remainder=True), 2),
    "Batch2": (lambda: dp.range(5).batch(2, drop_remainder=False), 3),
    "Batch3": (lambda: dp.range(5).filter(_true).batch(2), UNK),
    "Batch4": (lambda: dp.range(5).repeat().batch(2), INF),
    "Cache1": (lambda: dp.range(5).cache(), 5),
    "Cache2": (lambda: dp.range(5).cache("foo"), 5),
    "Concatenate1": (lambda: dp.range(5).concatenate(dp.range(5)), 10),
    "Concatenate2": (lambda: dp.range(5).filter(_true).concatenate(dp.range(5)), UNK),
    "Concatenate3": (lambda: dp.range(5).repeat().concatenate(dp.range(5)), INF),
    "Concatenate4": (lambda: dp.range(5).concatenate(dp.range(5).filter(_true)), UNK),
    "Concatenate5": (lambda: dp.range(5).filter(_true).concatenate(dp.range(5).filter(_true)), UNK),
    "Concatenate6": (lambda: dp.range(5).repeat().concatenate(dp.range(5).filter(_true)), INF),
    "Concatenate7": (lambda: dp.range(5).concatenate(dp.range(5).repeat()), INF),
    "Concatenate8": (lambda: dp.range(5).filter(_true).concatenate(dp.range(5).repeat()), INF),
    "Concatenate9": (lambda: dp.range(5).repeat().concatenate(dp.range(5).repeat()), INF),
    "FlatMap": (lambda: dp.range(5).flat_map(lambda _: dp.from_tensors(0)), UNK),
    "Filter": (lambda: dp.range(5).filter(_true), UNK),
    "FromTensors1": (lambda: dp.from_tensors(0), 1),
    "FromTensors2": (lambda: dp.from_tensors((0, 1)), 1),
    "FromTensorSlices1": (lambda: dp.from_tensor_slices([0, 0, 0]), 3),
    "FromTensorSlices2": (lambda: dp.from_tensor_slices(([0, 0, 0], [1, 1, 1])), 3),
    "Interleave1": (
        lambda: dp.range(5).interleave(lambda _: dp.from_tensors(0), cycle_length=1),
        UNK,
    ),
    "Interleave2": (
        lambda: dp.range(5).interleave(
            lambda _: dp.from_tensors(0), cycle_length=1, num_parallel_calls=1
        ),
        UNK,
    ),
    "Interleave3": (
        lambda: (
            dp.range(5)
            .repeat()
            .interleave(lambda _: dp.from_tensors(0), cycle_length=1, num_parallel_calls=1)
        ),
        INF,
    ),
    "PaddedBatch1": (lambda: dp.range(5).padded_batch(2, [], drop_remainder=True), 2),
    "PaddedBatch2": (lambda: dp.range(5).padded_batch(2, [], drop_remainder=False), 3),
    "PaddedBatch3": (lambda: dp.range(5).filter(_true).padded_batch(2, []), UNK),
    "PaddedBatch4": (lambda: dp.range(5).repeat().padded_batch(2, []), INF),
    "Prefetch": (lambda: dp.range(5).prefetch(buffer_size=1), 5),
    "Range1": (lambda: dp.range(0), 0),
    "Range2": (lambda: dp.range(5), 5),
    "Range3": (lambda: dp.range(5, 10), 5),
    "Range4": (lambda: dp.range(10, 5), 0),
    "Range5": (lambda: dp.range(5, 10, 2), 3),
    "Range6": (lambda: dp.range(10, 5, -2), 3),
    "Range7": (lambda: dp.range(0, 0, -2), 0),
    "Range8": (lambda: dp.range(3, 3, 1), 0),
    "Range9": (lambda: dp.range(-4, -4, 2), 0),
    "Range10": (lambda: dp.range(1, 0, 3), 0),
    "Range11": (lambda: dp.range(0, 1, -3), 0),
    "Repeat1": (lambda: dp.range(0).repeat(0), 0),
    "Repeat2": (lambda: dp.range(1).repeat(0), 0),
    "Repeat3": (lambda: dp.range(0).repeat(5), 0),
    "Repeat4": (lambda: dp.range(1).repeat(5), 5),
    "Repeat5": (lambda: dp.range(0).repeat(), 0),
    "Repeat6": (lambda: dp.range(1).repeat(), INF),
    "Shuffle": (lambda: dp.range(5).shuffle(buffer_size=1), 5),
    "Shard1": (lambda: dp.range(5).shard(2, 0), 3),
    "Shard2": (lambda: dp.range(5).shard(8, 7), 0),
    "Shard3": (lambda: dp.range(5).filter(_true).shard(2, 0), UNK),
    "Shard4": (lambda: dp.range(5).repeat().shard(2, 0), INF),
    "Skip1": (lambda: dp.range(5).skip(2), 3),
    "Skip2": (lambda: dp.range(5).skip(8), 0),
    "Skip3": (lambda: dp.range(5).filter(_true).skip(2), UNK),
    "Skip4": (lambda: dp.range(5).repeat().skip(2), INF),
    "Take1": (lambda: dp.range(5).take(2), 2),
    "Take2": (lambda: dp.range(5).take(8), 5),
    "Take3": (lambda: dp.range(5).filter(_true).take(2), UNK),
    "Take4": (lambda: dp.range(5).repeat().take(2), 2),
    "Window1": (lambda: dp.range(5).window(size=2, shift=2, drop_remainder=True), 2),
    "Window2": (lambda: dp.range(5).window(size=2, shift=2, drop_remainder=False), 3),
    "Zip1": (lambda: dp.zip(dp.range(5)), 5),
    "Zip2": (lambda: dp.zip((dp.range(5), dp.range(3))), 3),
    "Zip3": (lambda: dp.zip((dp.range(5), dp.range(3).repeat())), 5),
    "Zip4": (lambda: dp.zip((dp.range(5).repeat(), dp.range(3).repeat())), INF),
    "Zip5": (lambda: dp.zip((dp.range(5), dp.range(3).filter(_true))), UNK),
}


@pytest.mark.parametrize("name", list(CASES))
def test_cardinality(name):
    """kernel_tests/cardinality_test.py::CardinalityTest.testCardinality,
    experimental/kernel_tests/cardinality_test.py::NumElementsTest.testNumElements (the
    same table; the TF2 values of Map1/Map2)."""
    dataset_fn, expected = CASES[name]
    ds = dataset_fn()
    assert ds.cardinality() == expected
    if expected >= 0:
        assert len(ds) == expected
