"""RandomGrayscale: the luma in every channel, the probability's extremes, and against
Keras 3.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

import pytest
import torch
from _layer_helpers import FORMATS, close, photometric_batch, pixels
from differential import keras_call

import preprocessing as pp


def test_grayscale_keeps_channels_and_probability_extremes():
    x = pixels()
    always = pp.RandomGrayscale(1.0, seed=0)(x)
    luma = 0.2989 * x[:, 0] + 0.587 * x[:, 1] + 0.114 * x[:, 2]
    for c in range(3):
        torch.testing.assert_close(always[:, c], luma, rtol=0, atol=1e-6)
    assert torch.equal(pp.RandomGrayscale(0.0, seed=0)(x), x)
    with pytest.raises(ValueError, match="RandomGrayscale: factor"):
        pp.RandomGrayscale((0.1, 0.2))
    with pytest.raises(ValueError, match="RandomGrayscale: expected images with 1 or 3"):
        pp.RandomGrayscale(1.0)(torch.zeros(2, 4, 5, 5))


@pytest.mark.parametrize("fmt", FORMATS)
def test_grayscale_matches_keras(ref, fmt):
    x = photometric_batch(fmt)
    close(
        pp.RandomGrayscale(1.0, data_format=fmt)(torch.from_numpy(x)),
        ref(keras_call, "RandomGrayscale", (1.0,), dict(data_format=fmt), x),
    )
