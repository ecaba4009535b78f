"""Small helpers of the Keras conformance tests (no Keras needed: values are upstream's)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def as_numpy(x: Any) -> np.ndarray:
    """A tensor (dense or sparse, any device), array or nested list as a numpy array."""
    if isinstance(x, torch.Tensor):
        if x.is_sparse:
            x = x.to_dense()
        return x.detach().cpu().numpy()
    return np.asarray(x)


def assert_values(actual: Any, expected: Any, atol: float = 0.0, rtol: float = 0.0) -> None:
    """``actual`` has ``expected``'s shape and values: exactly by default, otherwise within
    ``atol + rtol * |expected|`` (Keras's ``assertAllClose`` uses 1e-6 for both)."""
    got, want = as_numpy(actual), np.asarray(expected)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    if atol == 0.0 and rtol == 0.0:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, atol=atol, rtol=rtol)
