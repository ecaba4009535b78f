"""``read_file`` in ``map``, and its errors."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp
from datapipe.io import read_file


def test_read_file_in_map_and_errors(tmp_path):
    p = str(tmp_path / "x.bin")
    with open(p, "wb") as f:
        f.write(b"\x00\x01abc")
    assert read_file(p) == b"\x00\x01abc" and read_file(p.encode()) == b"\x00\x01abc"
    missing = str(tmp_path / "missing.bin")
    ds = dp.from_tensor_slices(np.array([p, missing], dtype=object)).map(read_file)
    it = iter(ds)
    assert next(it) == b"\x00\x01abc"
    with pytest.raises(dp.PipelineError) as info:
        next(it)
    assert info.value.path == missing and info.value.index == 1
    assert isinstance(info.value.cause, FileNotFoundError)
