"""tf.data's ``padded_batch`` kernel tests (``kernel_tests/padded_batch_test.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp
from datapipe.errors import BatchShapeError, PipelineError

from ._support import VERIFY_FNS, assert_produces, assert_same, verify_checkpoint

RNG = np.random.default_rng(23)  # upstream draws np.random.randint; any lengths will do


def fill(x):
    """``tf.fill([x], x)``."""
    return np.full([int(x)], x)


def as_string(a):
    """``tf.strings.as_string``: each number's decimal text."""
    return np.array([str(v) for v in a], dtype=object)


@pytest.mark.parametrize("drop_remainder", [True, False])
@pytest.mark.parametrize("padded_shapes", [[None], [25]])
@pytest.mark.parametrize("count", [32, 34])
def test_padded_batch_dataset(count, padded_shapes, drop_remainder):
    """kernel_tests/padded_batch_test.py::PaddedBatchTest.testPaddedBatchDataset."""
    seq_lens = RNG.integers(20, size=(count,)).astype(np.int32)
    batch_size = 4
    ds = dp.from_tensor_slices(seq_lens).map(fill)
    ds = ds.padded_batch(batch_size, drop_remainder=drop_remainder, padded_shapes=padded_shapes)
    sizes = [batch_size] * (count // batch_size)
    if not drop_remainder and count % batch_size:
        sizes.append(count % batch_size)
    results = list(ds)
    assert [len(r) for r in results] == sizes
    for i, result in enumerate(results):
        padded_len = padded_shapes[0]
        if padded_len is None:
            padded_len = np.max(result) if result.size > 0 else 0
        assert result.shape == (sizes[i], padded_len)
        for j in range(sizes[i]):
            seq_len = seq_lens[i * batch_size + j]
            assert result[j, :seq_len].tolist() == [seq_len] * seq_len
            assert result[j, seq_len:].tolist() == [0] * (padded_len - seq_len)


def test_padded_batch_short_padding():
    """kernel_tests/padded_batch_test.py::PaddedBatchTest.testPaddedBatchShortPadding: the
    first element (6) is longer than the padded shape (5): an error when the batch is
    built (tf.data's DataLossError), not when the pipeline is (its spec was only seen)."""
    ds = dp.from_tensor_slices([6, 5, 5, 5, 5]).map(fill).padded_batch(4, padded_shapes=[5])
    with pytest.raises(BatchShapeError, match=r"element 0 has shape \(6,\) .* larger than"):
        next(iter(ds))


def test_padded_batch_empty_tensors():
    """kernel_tests/padded_batch_test.py::PaddedBatchTest.testPaddedBatchEmptyTensors."""
    ds = dp.from_tensor_slices([0, 0, 0, 0]).map(fill).padded_batch(4, padded_shapes=[-1])
    assert_produces(ds, [np.zeros((4, 0), dtype=np.int64)])


def test_default_padded_shapes():
    """kernel_tests/padded_batch_test.py::PaddedBatchTest.testDefaultPaddedShapes."""
    ds = dp.from_tensor_slices([1, 2, 3, 4]).map(fill).padded_batch(batch_size=2)
    assert_produces(ds, [[[1, 0], [2, 2]], [[3, 3, 3, 0], [4, 4, 4, 4]]])


def test_nested_default_padded_shapes():
    """kernel_tests/padded_batch_test.py::PaddedBatchTest.testNestedDefaultPaddedShapes."""
    ds = dp.from_tensor_slices([1, 2, 3, 4]).map(lambda x: (x, fill(x))).padded_batch(2)
    assert_produces(ds, [([1, 2], [[1, 0], [2, 2]]), ([3, 4], [[3, 3, 3, 0], [4, 4, 4, 4]])])


@pytest.mark.parametrize("padding_values", [(-1, "<end>", {"structure": ""}), (-1, "<end>", None)])
def test_padded_batch_dataset_non_default_padding(padding_values):
    """kernel_tests/padded_batch_test.py::PaddedBatchTest.testPaddedBatchDatasetNonDefaultPadding
    (``None`` for the dict: its default padding, the empty string)."""

    def fill_tuple(x):
        filled = fill(x)
        return filled, as_string(filled), {"structure": as_string(filled)}

    random_seq_lens = RNG.integers(20, size=(32,)).astype(np.int32)
    ds = (
        dp.from_tensor_slices(random_seq_lens)
        .map(fill_tuple)
        .padded_batch(
            4, padded_shapes=([-1], [-1], {"structure": [-1]}), padding_values=padding_values
        )
    )
    results = list(ds)
    assert len(results) == 8
    for i, result in enumerate(results):
        padded_len = np.max(result[0])
        assert result[0].shape == result[1].shape == result[2]["structure"].shape
        assert result[0].shape == (4, padded_len)
        for j in range(4):
            seq_len = random_seq_lens[i * 4 + j]
            pad = padded_len - seq_len
            assert result[0][j, :seq_len].tolist() == [seq_len] * seq_len
            assert result[0][j, seq_len:].tolist() == [-1] * pad
            assert_same(result[1][j], np.array([str(seq_len)] * seq_len + ["<end>"] * pad))
            assert_same(result[2]["structure"][j], np.array([str(seq_len)] * seq_len + [""] * pad))


def test_padded_batch_dataset_unicode():
    """kernel_tests/padded_batch_test.py::PaddedBatchTest.testPaddedBatchDatasetUnicode."""
    data = [["Простой", "тест", "юникода"], ["никогда", "не", "бывает", "простым"]]

    def generator():
        for seq in data:
            yield np.array(seq, dtype=object), [0, 1, 2, 3]

    ds = dp.from_generator(
        generator,
        output_signature=(dp.TensorSpec([None], object), dp.TensorSpec([None], np.int32)),
    )
    padded = ds.padded_batch(2, padded_shapes=([None], [None]), padding_values=("", 0))
    words, ids = next(iter(padded))
    assert words.tolist() == [[*data[0], ""], data[1]]
    assert ids.tolist() == [[0, 1, 2, 3]] * 2


@pytest.mark.parametrize(
    "padded_shapes",
    [
        ([None], [None, None], [37]),
        ([-1], [-1, -1], [37]),
        (np.array([-1], np.int64), np.array([-1, -1], np.int64), np.array([37], np.int64)),
    ],
    ids=["lists", "lists_with_minus_one", "arrays"],
)
def test_padded_batch_dataset_shape_specifications(padded_shapes):
    """kernel_tests/padded_batch_test.py::PaddedBatchTest.testPaddedBatchDatasetShapeSpecifications
    (components of unknown shape, declared to from_generator instead of placeholders)."""
    signature = (
        dp.TensorSpec(None, np.int32),
        dp.TensorSpec(None, np.float32),
        dp.TensorSpec(None, object),
    )
    ds = dp.from_generator(lambda: iter([]), output_signature=signature)
    spec = ds.padded_batch(32, padded_shapes=padded_shapes).element_spec
    assert [s.shape for s in spec] == [(None, None), (None, None, None), (None, 37)]


def test_padded_batch_ragged_error():
    """kernel_tests/padded_batch_test.py::PaddedBatchTest.testPaddedBatchRaggedError: a
    ragged value (here an object array of rows, as ragged_batch makes) cannot be padded;
    a TypeError, raised for the first batch (D-TF-5)."""
    rt = np.empty(1, dtype=object)
    rt[0] = np.array([0, 42])  # RaggedTensorValue([0, 42], row_splits=[0, 2])
    ds = dp.from_tensors(rt).repeat(10).padded_batch(10)
    with pytest.raises(PipelineError, match="padded_batch at element 0: TypeError: .* ragged"):
        next(iter(ds))


def test_padded_batch_shape_error_wrong_rank():
    """kernel_tests/padded_batch_test.py::PaddedBatchTest.testPaddedBatchShapeErrorWrongRank."""
    with pytest.raises(
        ValueError,
        match=r"the padded shape \(1,\) is not compatible with the corresponding input "
        r"component shape \(\)",
    ):
        dp.range(10).padded_batch(5, padded_shapes=[1])


def test_padded_batch_shape_error_too_small():
    """kernel_tests/padded_batch_test.py::PaddedBatchTest.testPaddedBatchShapeErrorTooSmall."""
    with pytest.raises(
        ValueError,
        match=r"the padded shape \(1,\) is not compatible with the corresponding input "
        r"component shape \(3,\)",
    ):
        dp.from_tensors([1, 2, 3]).padded_batch(5, padded_shapes=[1])


def test_padded_batch_shape_error_shape_not_rank1():
    """kernel_tests/padded_batch_test.py::PaddedBatchTest.testPaddedBatchShapeErrorShapeNotRank1."""
    with pytest.raises(
        ValueError, match=r"padded shape .* must be a 1-D .* but its shape was \(2, 2\)"
    ):
        dp.from_tensors([1, 2, 3]).padded_batch(5, padded_shapes=[[1, 1], [1, 1]])


def test_padded_batch_shape_error_shape_not_int():
    """kernel_tests/padded_batch_test.py::PaddedBatchTest.testPaddedBatchShapeErrorShapeNotInt."""
    with pytest.raises(
        TypeError, match=r"padded shape .* must be a 1-D sequence of integers .* element type was"
    ):
        dp.from_tensors([1, 2, 3]).padded_batch(
            5, padded_shapes=np.array([1.5, 2.0, 3.0], np.float32)
        )


def test_padded_batch_shape_error_wrong_rank_from_tensor():
    """kernel_tests/padded_batch_test.py::PaddedBatchTest.testPaddedBatchShapeErrorWrongRankFromTensor."""
    with pytest.raises(ValueError, match=r"the padded shape \(1,\) is not compatible"):
        dp.range(10).padded_batch(5, padded_shapes=np.array([1], np.int64))


def test_padded_batch_default_shape_with_unknown_rank():
    """kernel_tests/padded_batch_test.py::PaddedBatchTest.testPaddedBatchShapeErrorDefaultShapeWithUnknownRank:
    tf.data needs a padded shape for a component of unknown rank; here each batch is
    padded to the largest of its elements, whatever their rank (D-TF-6)."""
    ds = dp.from_generator(lambda: iter([1, 2, 3]), output_signature=dp.TensorSpec(None, np.int32))
    assert ds.padded_batch(2).element_spec == dp.TensorSpec(None, np.int32)
    assert_produces(ds.padded_batch(2), [np.array([1, 2], np.int32), np.array([3], np.int32)])


def test_default_padded_value_shapes():
    """kernel_tests/padded_batch_test.py::PaddedBatchTest.testDefaultPaddedValueShapes."""
    ds = dp.zip(
        (
            dp.from_tensor_slices([1, 2, 3, 4]).map(fill),
            dp.from_tensor_slices([1, 2, 3, 4]).map(fill),
        )
    )
    ds = ds.padded_batch(batch_size=2, padding_values=-1)
    assert_produces(
        ds,
        [
            ([[1, -1], [2, 2]], [[1, -1], [2, 2]]),
            ([[3, 3, 3, -1], [4, 4, 4, 4]], [[3, 3, 3, -1], [4, 4, 4, 4]]),
        ],
    )


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
def test_checkpoint_padded_batch(verify_fn):
    """kernel_tests/padded_batch_test.py::PaddedBatchCheckpointTest.testPaddedBatch."""
    seq_lens = RNG.integers(1, 20, size=(32,)).astype(np.int32)
    verify_checkpoint(
        lambda: dp.from_tensor_slices(seq_lens).map(fill).padded_batch(4, padded_shapes=[-1]),
        8,
        verify_fn,
    )


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
def test_checkpoint_non_default_padding(verify_fn):
    """kernel_tests/padded_batch_test.py::PaddedBatchCheckpointTest.testPaddedBatchNonDefaultPadding."""
    seq_lens = RNG.integers(1, 20, size=(32,)).astype(np.int32)

    def build():
        ds = dp.from_tensor_slices(seq_lens).map(lambda x: (fill(x), as_string(fill(x))))
        return ds.padded_batch(4, padded_shapes=([-1], [-1]), padding_values=(-1, "<end>"))

    verify_checkpoint(build, 8, verify_fn)
