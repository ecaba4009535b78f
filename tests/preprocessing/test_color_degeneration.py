"""RandomColorDegeneration: the blend towards the luma, and against Keras 3.

Keras 3 is the anchor: with a factor range of one value Keras's draw is exact; otherwise
our drawn parameters are handed to Keras's ``transform_images``.

The tolerance against Keras is ``ATOL`` (_layer_helpers.py says why); where the two
differ by design (documented in the layer) only the part where they agree is compared.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

import pytest
import torch
from _layer_helpers import FORMATS, close, photometric_batch, pixels
from differential import keras_call

import preprocessing as pp


def test_color_degeneration_blends_towards_luma_and_clips():
    x = pixels()
    luma = (0.2989 * x[:, 0] + 0.587 * x[:, 1] + 0.114 * x[:, 2]).unsqueeze(1)
    f = torch.linspace(0, 1, x.shape[0])
    layer = pp.RandomColorDegeneration(1.0, value_range=(0, 1))
    got = layer.transform_images(x, {"factor": f})
    expected = x + f.view(-1, 1, 1, 1) * (luma - x)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)
    one_channel = torch.full((2, 1, 2, 2), 0.7)
    out = layer.transform_images(one_channel, {"factor": torch.ones(2)})
    torch.testing.assert_close(out, one_channel)


@pytest.mark.parametrize("fmt", FORMATS)
def test_color_degeneration_exact_draw_matches_keras(ref, fmt):
    x = photometric_batch(fmt)
    kw = dict(value_range=(0, 255), data_format=fmt)
    close(
        pp.RandomColorDegeneration((0.3, 0.3), **kw)(torch.from_numpy(x)),
        ref(keras_call, "RandomColorDegeneration", ((0.3, 0.3),), kw, x),
    )
