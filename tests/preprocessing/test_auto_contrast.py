"""AutoContrast: against PIL's autocontrast and Keras 3.

The tolerance against Keras is ``ATOL`` (_layer_helpers.py says why); where the two
differ by design (documented in the layer) only the part where they agree is compared.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

import torch
from _layer_helpers import close, photometric_batch
from differential import keras_call

import preprocessing as pp


def test_auto_contrast_channels_last_equals_keras_and_first_is_the_same_per_channel(ref):
    x = photometric_batch("channels_last") * 0.5 + 40.0
    expected = ref(keras_call, "AutoContrast", (), dict(value_range=(0, 255)), x)
    close(pp.AutoContrast(data_format="channels_last")(torch.from_numpy(x)), expected)
    # Keras reduces axes (1, 2) whatever the layout; channels_first is compared through
    # the transposed channels_last result.
    first = pp.AutoContrast(data_format="channels_first")(torch.from_numpy(x).permute(0, 3, 1, 2))
    close(first.permute(0, 2, 3, 1), expected)


def test_auto_contrast_stretches_each_channel_and_keeps_constant_ones():
    x = torch.stack(
        [torch.linspace(0.2, 0.6, 12), torch.full((12,), 0.3), torch.linspace(0, 1, 12)]
    )
    x = x.view(3, 3, 4)
    out = pp.AutoContrast(value_range=(0, 1))(x)
    torch.testing.assert_close(out[0].flatten(), torch.linspace(0, 1, 12), rtol=0, atol=1e-6)
    assert torch.equal(out[1], x[1]) and torch.equal(out[2], x[2])
