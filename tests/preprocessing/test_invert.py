"""RandomInvert: both ends of the range, the share inverted, and against Keras 3.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

import pytest
import torch
from _layer_helpers import FORMATS, close, photometric_batch
from differential import keras_call

import preprocessing as pp


def test_invert_uses_both_ends_of_the_range_and_inverts_about_half():
    x = torch.tensor([[[-1.0, 0.0, 0.5, 1.0]]])
    got = pp.RandomInvert((1.0, 1.0), value_range=(-1, 1))(x)
    assert got.tolist() == [[[1.0, 0.0, -0.5, -1.0]]]
    applied = pp.RandomInvert(seed=0).get_random_transformation(torch.zeros(4000, 1, 1, 1))
    share = float(applied["apply_inversion"].float().mean())
    assert 0.46 < share < 0.54  # E[p] = 1/2 for p ~ U[0, 1]


@pytest.mark.parametrize("fmt", FORMATS)
def test_invert_exact_draw_matches_keras(ref, fmt):
    x = photometric_batch(fmt)
    kw = dict(value_range=(0, 255), data_format=fmt)
    close(
        pp.RandomInvert((1.0, 1.0), **kw)(torch.from_numpy(x)),
        ref(keras_call, "RandomInvert", ((1.0, 1.0),), kw, x),
    )
