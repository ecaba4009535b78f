"""RandomSharpness: against PIL within its rounding, and against Keras 3 in the interior.

The tolerance against Keras is ``ATOL`` (_layer_helpers.py says why); where the two
differ by design (documented in the layer) only the part where they agree is compared.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

import numpy as np
import pytest
import torch
from _layer_helpers import FORMATS, close, from_pil, photometric_batch, pil, uint8_image
from differential import keras_transform
from harness import assert_within
from PIL import ImageEnhance

import preprocessing as pp


@pytest.mark.parametrize("fmt", FORMATS)
def test_sharpness_interior_with_our_draw(ref, fmt):
    x = photometric_batch(fmt, h=8, w=10)
    ours = pp.RandomSharpness(1.0, data_format=fmt, seed=4)
    params = ours.get_random_transformation(torch.from_numpy(x))
    draw = {"factor": params["factor"].numpy()}
    expected = ref(keras_transform, "RandomSharpness", (1.0,), dict(data_format=fmt), x, draw)
    got = ours.transform_images(torch.from_numpy(x), params).numpy()
    inner = (slice(None), slice(None), slice(1, -1), slice(1, -1))
    if fmt == "channels_last":
        inner = (slice(None), slice(1, -1), slice(1, -1), slice(None))
    close(got[inner], expected[inner])
    # The frame is the input (PIL's rule; Keras's zero padding changes it).
    frame = np.ones(got.shape, bool)
    frame[inner] = False
    assert_within(got[frame], x[frame], 0.0)  # copies of the input, bound 0


@pytest.mark.parametrize("f", [0.0, 0.2, 0.5, 0.8, 1.0])
def test_sharpness_matches_pil_within_its_rounding(f):
    # PIL rounds the smoothed image to uint8 before blending and rounds the blend: one
    # level each, scaled by |1 - s| <= 1 for the first.
    x = uint8_image()
    ours = pp.RandomSharpness((f, f)).transform_images(x, {"factor": torch.tensor([f])})
    theirs = from_pil(ImageEnhance.Sharpness(pil(x)).enhance(2 * f))
    assert float((ours - theirs).abs().max()) <= 1.5
    # The one-pixel frame is the input, as in PIL.
    assert torch.equal(ours[:, 0], x[:, 0].float()) and torch.equal(
        ours[:, :, -1], x[:, :, -1].float()
    )
