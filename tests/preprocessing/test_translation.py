"""RandomTranslation: whole-pixel shifts, and against Keras 3 in every fill mode.

Keras 3 is the anchor: deterministic parameters (a factor pair with equal ends) make
Keras's draw exact, so the outputs must agree within 1e-4.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

import pytest
import torch
from _layer_helpers import FILL_MODES, FORMATS, compare, keras_batch

import preprocessing as pp


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fill_mode", FILL_MODES)
def test_translation(ref, fmt, fill_mode):
    kw = dict(fill_mode=fill_mode, fill_value=0.5, data_format=fmt)
    x = keras_batch(h=8, w=8, fmt=fmt)  # 0.25 * 8 and -0.5 * 8: whole pixels, wrap included
    shift = ((0.25, 0.25), (-0.5, -0.5))
    compare(ref, pp.RandomTranslation(*shift, **kw), "RandomTranslation", shift, kw, x)


def test_translation_values():
    x = torch.arange(5.0).view(1, 1, 1, 5).expand(1, 1, 3, 5)
    out = pp.RandomTranslation(0.0, (0.2, 0.2), fill_mode="nearest")(x)
    assert torch.allclose(out[0, 0, 0], torch.tensor([0.0, 0.0, 1.0, 2.0, 3.0]), atol=1e-5)
