"""tf.data's ``bucket_by_sequence_length`` kernel tests
(``kernel_tests/bucket_by_sequence_length_test.py``). Upstream's ``no_padding=True``
cases hold their records as SparseTensors; here they are dense arrays (every record of a
bucket has one length where upstream needs no padding)."""

from __future__ import annotations

import random

import numpy as np
import pytest

import datapipe as dp
from datapipe.errors import PipelineError

RECORD = (dp.TensorSpec([None], np.int32),)


def _element_length_fn(x, y=None):
    return np.shape(x)[0]


def _from_records(records):
    return dp.from_generator(lambda: ((np.array(r, np.int32),) for r in records), RECORD)


@pytest.mark.parametrize("no_padding", [True, False])
def test_bucket_drop_reminder(no_padding):
    """kernel_tests/bucket_by_sequence_length_test.py::BucketBySequenceLengthTest.testBucketDropReminder."""
    boundaries, batch_sizes, lengths = [10, 20, 30], [10, 8, 4, 2], [8, 13, 25, 35]
    n_bucket_elements = [28, 7, 6, 5]
    expected_lengths, expected_sums, expected_batch_sizes = [], {}, {}
    for length, batch_size, n in zip(lengths, batch_sizes, n_bucket_elements):
        expected_sums[length] = (n - n % batch_size) * length
        expected_batch_sizes[length] = [batch_size] * (n // batch_size)
        expected_lengths.extend([length] * (n // batch_size))
    records = [[1] * length for n, length in zip(n_bucket_elements, lengths) for _ in range(n)]
    random.Random(0).shuffle(records)
    ds = _from_records(records).bucket_by_sequence_length(
        _element_length_fn, boundaries, batch_sizes, no_padding=no_padding, drop_remainder=True
    )
    batches = [b for (b,) in ds]
    assert len(batches) == 5
    sums = {length: 0 for length in lengths}
    sizes = {length: [] for length in lengths}
    for batch in batches:
        sums[batch.shape[1]] += batch.sum()
        sizes[batch.shape[1]].append(batch.shape[0])
    assert sums == expected_sums
    assert {k: sorted(v) for k, v in sizes.items()} == expected_batch_sizes
    assert sorted(b.shape[1] for b in batches) == sorted(expected_lengths)


def test_bucket():
    """kernel_tests/bucket_by_sequence_length_test.py::BucketBySequenceLengthTest.testBucket
    (padded; upstream's no_padding=True case batches records of two lengths per bucket,
    which needs SparseTensors)."""
    boundaries, batch_sizes, lengths = [10, 20, 30], [10, 8, 4, 2], [8, 13, 25, 35]
    records = []
    for batch_size, length in zip(batch_sizes, lengths):
        records.append([1] * (length - 1))
        records.extend([[1] * length] * (batch_size - 1))
    random.Random(1).shuffle(records)
    ds = _from_records(records).bucket_by_sequence_length(
        _element_length_fn, boundaries, batch_sizes
    )
    batches = [b for (b,) in ds]
    assert len(batches) == 4
    for batch in batches:
        assert batch.sum() == batch.shape[0] * batch.shape[1] - 1
    assert sorted(b.shape[0] for b in batches) == sorted(batch_sizes)
    assert sorted(b.shape[1] for b in batches) == sorted(lengths)


def test_pad_to_boundary():
    """kernel_tests/bucket_by_sequence_length_test.py::BucketBySequenceLengthTest.testPadToBoundary."""
    boundaries, batch_sizes, lengths = [10, 20, 30], [10, 8, 4, 2], [8, 13, 25]
    records = [
        [1] * length
        for batch_size, length in zip(batch_sizes[:-1], lengths)
        for _ in range(batch_size)
    ]
    random.Random(2).shuffle(records)
    records += [[1] * (boundaries[-1] + 5)] * batch_sizes[-1]
    ds = dp.from_generator(
        lambda: ((np.array(r, np.int64),) for r in records), (dp.TensorSpec([None], np.int64),)
    ).bucket_by_sequence_length(
        lambda el: np.shape(el)[0], boundaries, batch_sizes, pad_to_bucket_boundary=True
    )
    it = iter(ds)
    batches = [next(it)[0] for _ in range(3)]
    with pytest.raises(PipelineError, match="bucket_boundaries"):
        next(it)
    assert sorted(b.shape[0] for b in batches) == sorted(batch_sizes[:-1])
    assert sorted(b.shape[1] for b in batches) == [b - 1 for b in sorted(boundaries)]


def test_pad_to_boundary_no_extraneous_padding():
    """kernel_tests/bucket_by_sequence_length_test.py::BucketBySequenceLengthTest.testPadToBoundaryNoExtraneousPadding."""
    ds = dp.from_generator(
        lambda: ((np.array([1] * n, np.int64),) for n in range(1, 11)),
        (dp.TensorSpec([None], np.int64),),
    ).bucket_by_sequence_length(
        lambda element: np.shape(element)[0], [3, 7, 11], [2, 2, 2, 2], pad_to_bucket_boundary=True
    )
    batches = [b.tolist() for (b,) in ds]
    assert batches == [
        [[1, 0], [1, 1]],
        [[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 0, 0]],
        [[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]],
        [[1, 1, 1, 1, 1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1, 0, 0]],
        [[1, 1, 1, 1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]],
    ]


@pytest.mark.parametrize("no_padding", [True, False])
def test_tuple_elements(no_padding):
    """kernel_tests/bucket_by_sequence_length_test.py::BucketBySequenceLengthTest.testTupleElements."""
    text = [[1, 2, 3], [3, 4, 5, 6, 7], [1, 2], [8, 9, 0, 2, 3]]
    label = [1, 2, 1, 2]
    ds = dp.from_generator(
        lambda: ((np.array(x, np.int32), np.int32(y)) for x, y in zip(text, label)),
        (dp.TensorSpec([None], np.int32), dp.TensorSpec([], np.int32)),
    ).bucket_by_sequence_length(
        _element_length_fn, bucket_batch_sizes=[2, 2, 2], bucket_boundaries=[0, 8],
        no_padding=no_padding,
    )  # fmt: skip
    assert [s.shape for s in ds.element_spec] == [(None, None), (None,)]


def test_cardinality():
    """kernel_tests/bucket_by_sequence_length_test.py::BucketBySequenceLengthTest.testCardinality:
    bucketing an infinite input is infinite. A generator's ``repeat()`` is of unknown
    cardinality here (it may be empty: D-TF-16); of the same records as slices, infinite."""

    def bucketed(ds):
        return ds.bucket_by_sequence_length(
            lambda element: np.shape(element)[0], [3, 7, 11], [2, 2, 2, 2],
            pad_to_bucket_boundary=True,
        )  # fmt: skip

    records = [np.array([1] * n + [0] * (10 - n), np.int64) for n in range(1, 11)]
    generated = dp.from_generator(
        lambda: ((r,) for r in records), (dp.TensorSpec([None], np.int64),)
    )
    assert bucketed(generated.repeat()).cardinality() == dp.UNKNOWN_CARDINALITY  # D-TF-16
    sliced = dp.from_tensor_slices((np.stack(records),)).map(lambda r: (r[: int(r.sum())],))
    assert bucketed(sliced.repeat()).cardinality() == dp.INFINITE_CARDINALITY
