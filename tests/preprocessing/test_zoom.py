"""RandomZoom: a 2x zoom-in about the centre, and the factor's bounds."""

import pytest
import torch

import preprocessing as pp


def test_zoom_values():
    x = torch.arange(5.0).view(1, 1, 1, 5).expand(1, 1, 3, 5)
    out = pp.RandomZoom((-0.5, -0.5), fill_mode="constant")(x)  # 2x zoom-in about centre
    assert torch.allclose(out[0, 0, 1], torch.tensor([1.0, 1.5, 2.0, 2.5, 3.0]), atol=1e-5)


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: pp.RandomZoom(-1.0), "RandomZoom: height_factor must lie in"),
    ],
)
def test_bad_arguments_name_layer_and_argument(build, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("/", "/")):
        build()
