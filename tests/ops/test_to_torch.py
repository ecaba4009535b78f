"""``to_torch``: conversion without copying."""

from __future__ import annotations

import numpy as np
import torch

import datapipe as dp
from datapipe import TensorSpec


def test_to_torch_converts_without_copying() -> None:
    src = np.arange(12, dtype=np.float32).reshape(6, 2)
    ds = dp.from_tensor_slices((src, np.arange(6), np.array(["a"] * 6))).batch(3).to_torch()
    x, y, s = next(iter(ds))
    assert isinstance(x, torch.Tensor) and x.dtype == torch.float32 and tuple(x.shape) == (3, 2)
    assert y.dtype == torch.int64 and isinstance(s, np.ndarray)
    spec = ds.element_spec
    assert spec[0] == TensorSpec((None, 2), torch.float32) and spec[2].dtype == s.dtype == object
    rows = list(src)
    gen = dp.from_generator(lambda: iter(rows), output_signature=TensorSpec((2,), "float32"))
    view = next(iter(gen.to_torch()))
    assert view.data_ptr() == rows[0].ctypes.data  # shares the element's numpy buffer
