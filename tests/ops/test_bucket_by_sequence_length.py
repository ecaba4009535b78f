"""``bucket_by_sequence_length``: spec, argument checks, errors naming the elements."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp
from datapipe.errors import BatchShapeError


def lengths_ds(lengths):
    arr = np.array(lengths, dtype=np.int64)
    return dp.from_tensor_slices(arr).map(lambda n: np.arange(1, n + 1))


def as_lists(ds):
    return [x.tolist() for x in ds]


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
