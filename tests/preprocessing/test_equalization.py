"""Equalization: against the formula per image and channel, and against Keras 3.

The tolerance against Keras is ``ATOL`` (_layer_helpers.py says why); where the two
differ by design (documented in the layer) only the part where they agree is compared.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

import numpy as np
import pytest
import torch
from _layer_helpers import FORMATS, close, photometric_batch, uint8_image
from differential import keras_call

import preprocessing as pp


def numpy_equalize(channel, bins=256):
    """Keras's Equalization formula for one channel in [0, 255] (numpy reference)."""
    idx = np.clip((channel * (bins - 1) / 255.0).astype(np.int32), 0, bins - 1)
    hist = np.bincount(idx.ravel(), minlength=bins)
    if np.count_nonzero(hist) <= 1:
        return channel
    cdf = np.cumsum(hist)
    cdf_min = cdf[np.nonzero(cdf)[0][0]]
    lut = np.clip(np.round((cdf - cdf_min) * 255.0 / (cdf[-1] - cdf_min)), 0, 255)
    return lut[idx]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("value_range", [(0, 255), (0, 1)])
def test_equalization_per_image_equals_keras_on_that_image(ref, fmt, value_range):
    x = np.floor(photometric_batch(fmt, h=10, w=11)) / 255.0 * value_range[1]
    x[1] = np.floor(x[1] * 4 / value_range[1]) * value_range[1] / 4  # few levels
    layer = pp.Equalization(value_range=value_range, data_format=fmt)
    got = layer(torch.from_numpy(x.astype(np.float32)))
    kw = dict(value_range=value_range, data_format=fmt)
    for i in range(x.shape[0]):  # Keras's histogram covers whatever batch it is given
        expected = ref(keras_call, "Equalization", (), kw, x[i].astype(np.float32))
        close(got[i], expected, 1e-5 * value_range[1])


@pytest.mark.parametrize("bins", [256, 64, 2])
def test_equalization_matches_formula_per_image_and_channel(bins):
    x = uint8_image(bins, 16, 16).float().unsqueeze(0).repeat(3, 1, 1, 1)
    x[1] = x[1] // 64  # few levels
    x[2, 0] = 7.0  # one constant channel: unchanged
    out = pp.Equalization(bins=bins)(x)
    for i in range(3):
        for c in range(3):
            expected = numpy_equalize(x[i, c].numpy(), bins)
            np.testing.assert_array_equal(out[i, c].numpy(), expected.astype(np.float32))
    assert torch.equal(out[2, 0], x[2, 0])
    # An image's result does not depend on the batch it came in (Keras's batch-wide
    # histogram would).
    torch.testing.assert_close(pp.Equalization(bins=bins)(x[1]), out[1], rtol=0, atol=0)
