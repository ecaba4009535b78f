"""Bugs the type checker found (issue 17): each failed before its fix."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp
from datapipe.io.webdataset import decode_sample


def test_reduce_after_group_by_window_is_datasets_reduce() -> None:
    # GroupByWindowDataset had a helper named `reduce(key, elements)` that shadowed
    # Dataset.reduce(initial_state, reduce_func): this raised TypeError.
    ds = dp.range(10).group_by_window(lambda x: x % 2, lambda k, w: w.batch(5), window_size=5)
    assert [b.tolist() for b in ds] == [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]
    assert int(ds.reduce(np.int64(0), lambda s, b: s + b.sum())) == 45
    counts = ds.reduce(0, lambda s, b: s + len(b))
    assert counts == 10


def test_decode_sample_false_decodes_nothing_true_decodes_defaults() -> None:
    # decoders=False (WebDataset's decode=False) crashed with an AttributeError on None.
    sample = {"__key__": "a", "cls": b"3", "txt": b"hi"}
    assert decode_sample(sample, decoders=False) == sample
    out = decode_sample(sample, decoders=True)
    assert out["cls"] == np.int64(3) and out["txt"] == "hi" and out["__key__"] == "a"
    with pytest.raises(TypeError, match="decode must be a bool or a dict"):
        decode_sample(sample, decoders=3)  # type: ignore[arg-type]
