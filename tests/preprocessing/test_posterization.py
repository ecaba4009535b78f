"""RandomPosterization: against PIL's posterize, the bits drawn, and against Keras 3 with our
draw.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

import pytest
import torch
from _layer_helpers import FORMATS, close, from_pil, photometric_batch, pil, uint8_image
from differential import keras_transform
from PIL import ImageOps

import preprocessing as pp


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("value_range", [(0, 255), (0, 1)])
def test_posterization_with_our_draw(ref, fmt, value_range):
    x = photometric_batch(fmt, scale=value_range[1])
    kw = dict(value_range=value_range, data_format=fmt)
    ours = pp.RandomPosterization((1, 8), seed=5, **kw)
    params = ours.get_random_transformation(torch.from_numpy(x))
    draw = {"shift_factor": params["shift_factor"].numpy()}
    expected = ref(keras_transform, "RandomPosterization", ((1, 8),), kw, x, draw)
    close(ours.transform_images(torch.from_numpy(x), params), expected, 1e-5 * value_range[1])


@pytest.mark.parametrize("bits", range(1, 9))
def test_posterization_equals_pil(bits):
    x = uint8_image(bits)
    layer = pp.RandomPosterization((bits, bits), seed=0)
    assert torch.equal(layer(x), from_pil(ImageOps.posterize(pil(x), bits)))
    # [0, 1] input: truncated after scaling to [0, 255], as Keras's cast to uint8.
    unit = pp.RandomPosterization((bits, bits), value_range=(0, 1), seed=0)
    torch.testing.assert_close(unit(x.float() / 255), layer(x) / 255, rtol=0, atol=1e-6)


def test_posterization_draws_every_bit_count_in_range_inclusive():
    draws = pp.RandomPosterization((3, 5), seed=0).get_random_transformation(
        torch.zeros(3000, 1, 1, 1)
    )["shift_factor"]
    assert sorted(torch.unique(8 - draws.int()).tolist()) == [3, 4, 5]
    assert pp.RandomPosterization(4)._bits == (1, 4)
