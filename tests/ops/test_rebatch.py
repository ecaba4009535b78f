"""``rebatch``: torch elements, dicts and empty batches."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import datapipe as dp


def as_lists(ds):
    return [x.tolist() for x in ds]


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
    with pytest.raises(ValueError, match="rebatch: batch_size must hold at least one positive"):
        dp.range(3).batch(2).rebatch([])
    with pytest.raises(ValueError, match="rebatch: batch_size must hold at least one positive"):
        dp.range(3).batch(2).rebatch([0, 0])
    with pytest.raises(ValueError, match=r"rebatch: batch_size must be >= 1, got 0"):
        dp.range(3).batch(2).rebatch(0)
    # A 0 in a sequence is an empty split (tf.data's rebatch_test testEmptySplits).
    assert as_lists(dp.range(3).batch(2).rebatch([2, 0])) == [[0, 1], [], [2], []]
    mixed = dp.zip(dp.range(4).batch(2), dp.range(4).batch(3))
    with pytest.raises(dp.PipelineError, match=r"rebatch at element 0: .*different batch sizes"):
        list(mixed.rebatch(2))
