"""Rescaling: per-channel values in both layouts, and against Keras 3.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

import pytest
import torch
from _layer_helpers import FORMATS, compare, img, keras_batch

import preprocessing as pp


def test_rescaling_per_channel_both_formats():
    x = torch.ones(2, 3, 2, 2)
    out = pp.Rescaling([1.0, 2.0, 3.0], offset=[0.0, 0.0, 1.0])(x)
    assert out[:, 2].eq(4.0).all() and out[:, 1].eq(2.0).all()
    out_last = pp.Rescaling([1.0, 2.0, 3.0], data_format="channels_last")(x.permute(0, 2, 3, 1))
    assert torch.equal(out_last.permute(0, 3, 1, 2), x * torch.tensor([1.0, 2, 3]).view(3, 1, 1))


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: pp.Rescaling("x"), "Rescaling: scale"),
    ],
)
def test_bad_arguments_name_layer_and_argument(build, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("/", "/")):
        build()


def test_rescaling_rejects_per_channel_values_of_the_wrong_length():
    with pytest.raises(ValueError, match="Rescaling: 3 per-channel values .* 1 channels"):
        pp.Rescaling([1.0, 2.0, 3.0])(img(b=4, c=1, h=8, w=8))
    out = pp.Rescaling([1.0, 2.0], data_format="channels_last")(torch.ones(4, 4, 2))
    assert out.shape == (4, 4, 2)
    assert pp.Rescaling([2.0])(img(b=4, c=3, h=8, w=8)).shape == (4, 3, 8, 8)


@pytest.mark.parametrize("fmt", FORMATS)
def test_rescaling_matches_keras(ref, fmt):
    x = keras_batch(h=10, w=7, fmt=fmt)
    kw = dict(data_format=fmt)
    compare(ref, pp.Rescaling(2.0, -1.0, **kw), "Rescaling", (2.0, -1.0), {}, x)
