"""preprocessing._categorical: what the feature layers share: adapt over arrays, datasets and
(feature, label) pairs, encodings of empty inputs, bytes that are not UTF-8, strings
inside Dataset.map, and the errors for bad arguments and inputs (naming the argument).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import datapipe as dp
import preprocessing as pp


def test_adapt_streams_over_a_dataset_of_feature_label_pairs():
    texts = np.array(["a b", "b c", "c c c", "d"] * 5)
    labels = np.arange(20)
    ds = dp.Dataset.from_tensor_slices((texts, labels)).batch(3)
    layer = pp.TextVectorization()
    layer.adapt(ds, steps=1, progress=False)  # the first 3 texts only: no "d"
    assert layer.get_vocabulary() == ["", "[UNK]", "c", "b", "a"]
    norm = pp.Normalization()
    rows = np.arange(12, dtype=np.float64).reshape(6, 2)
    norm.adapt(dp.Dataset.from_tensor_slices((rows, labels[:6])).batch(4), progress=False)
    np.testing.assert_allclose(norm.mean.reshape(-1).numpy(), rows.mean(0))
    np.testing.assert_allclose(norm.variance.reshape(-1).numpy(), rows.var(0))


def test_string_layers_inside_dataset_map_and_bucketing():
    texts = ["a b c d e f", "a", "b c", "a a a a a a a a", "c", "d e"]
    vec = pp.TextVectorization(vocabulary=["a", "b", "c", "d"], ragged=True)
    ds = (
        dp.Dataset.from_tensor_slices(np.array(texts))
        .map(vec, num_parallel_calls=2)
        .bucket_by_sequence_length(lambda t: len(t), [3], [2, 2])
    )
    # Ids: "" 0, [UNK] 1, a 2, b 3, c 4, d 5; rows shorter than 3 in one bucket.
    assert [np.asarray(b).tolist() for b in ds] == [
        [[2, 0], [3, 4]],
        [[2, 3, 4, 5, 1, 1, 0, 0], [2] * 8],
        [[4, 0], [5, 1]],
    ]
    lookup = pp.StringLookup(vocabulary=["x", "y"])
    hashed = pp.Hashing(num_bins=5)
    ds = dp.Dataset.from_tensor_slices(np.array(["x", "q", "y"])).map(
        lambda s: (lookup(s), hashed(s))
    )
    got = [(int(a), int(b)) for a, b in ds]
    assert [a for a, _ in got] == [1, 0, 2]
    assert [b for _, b in got] == pp.Hashing(num_bins=5)(["x", "q", "y"]).tolist()


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="num_oov_indices=0"):
        pp.StringLookup(vocabulary=["a"], num_oov_indices=0)(["a", "b"])
    with pytest.raises(ValueError, match=r"found \[99\]"):
        pp.IntegerLookup(vocabulary=[1], num_oov_indices=0)(torch.tensor([1, 99]))
    with pytest.raises(ValueError, match=r"must lie in \[0, 3\); got \[3, -1\]"):
        pp.CategoryEncoding(num_tokens=3)(torch.tensor([0, 3, -1]))
    with pytest.raises(ValueError, match="no vocabulary"):
        pp.StringLookup(output_mode="multi_hot")(["a"])
    with pytest.raises(ValueError, match="no bin boundaries"):
        pp.Discretization(num_bins=3)(torch.ones(2))
    with pytest.raises(ValueError, match="must be strings"):
        pp.StringLookup(vocabulary=["a"])(torch.ones(2))
    with pytest.raises(ValueError, match="at least two"):
        pp.HashedCrossing(num_bins=3)((torch.ones(2, dtype=torch.int64),))
    with pytest.raises(ValueError, match="built with a vocabulary"):
        pp.StringLookup(vocabulary=["a"]).adapt(["a"])
    with pytest.raises(ValueError, match="no values"):
        pp.Discretization(num_bins=2).adapt(np.zeros((0, 2)))
    with pytest.raises(ValueError, match=r"\(batch,\) or \(batch, 1\)"):
        pp.TextVectorization()(np.array([["a", "b"]]))


# ------------------------------------------------------------------ review (issue 16)
def test_multi_hot_of_empty_input_is_zeros():
    # amax over an empty axis failed: a batch of 0 rows, or rows of 0 tokens.
    encode = pp.CategoryEncoding(num_tokens=4, output_mode="multi_hot")
    assert encode(torch.zeros(0, 3, dtype=torch.int64)).shape == (0, 4)
    assert encode(torch.zeros(2, 0, dtype=torch.int64)).tolist() == [[0.0] * 4] * 2
    assert encode(torch.zeros(0, dtype=torch.int64)).tolist() == [0.0] * 4
    lookup = pp.StringLookup(vocabulary=["a", "b"], output_mode="multi_hot")
    assert lookup(np.zeros((0, 2), dtype=str)).shape == (0, 3)
    assert pp.Hashing(num_bins=3, output_mode="multi_hot")(np.zeros((0, 2), str)).shape == (0, 3)


def test_bytes_that_are_not_utf8():
    # Hashing hashes raw bytes (as Keras), but a mask_value made it decode them and fail
    # with a bare UnicodeDecodeError; the lookups failed the same way, naming nothing.
    raw = np.array([b"\xff", b"a", b"b"])
    masked = pp.Hashing(num_bins=5, mask_value="a")(raw)
    plain = pp.Hashing(num_bins=4)(np.array([b"\xff", b"b"]))
    assert masked.tolist() == [plain[0] + 1, 0, plain[1] + 1]
    with pytest.raises(ValueError, match=r"StringLookup: input .*not valid utf-8.*b'\\xff'"):
        pp.StringLookup(vocabulary=["a"])(raw)
    with pytest.raises(ValueError, match=r"StringLookup: adapt data .*not valid utf-8"):
        pp.StringLookup().adapt(raw)
    with pytest.raises(ValueError, match=r"TextVectorization: input .*not valid utf-8"):
        pp.TextVectorization(vocabulary=["a"])(raw)
