"""Colour layers against the standard library's colorsys and hand-computed values."""

import colorsys

import pytest
import torch

import preprocessing as pp


def pixels(n=40, seed=0):
    """A (n, 3, 1, 1) batch of single RGB pixels in [0, 1], greys and primaries included."""
    x = torch.rand(n, 3, 1, 1, generator=torch.Generator().manual_seed(seed))
    x[0] = 0.5  # grey
    x[1, :, 0, 0] = torch.tensor([1.0, 0.0, 0.0])
    x[2, :, 0, 0] = torch.tensor([0.0, 0.0, 0.0])
    x[3, :, 0, 0] = torch.tensor([0.2, 0.9, 0.9])  # two equal maxima
    return x


def colorsys_map(x, fn):
    out = torch.empty_like(x)
    for i in range(x.shape[0]):
        out[i, :, 0, 0] = torch.tensor(fn(i, *x[i, :, 0, 0].tolist()))
    return out


@pytest.mark.parametrize("lo_hi", [(0, 1), (0, 255), (-1, 1)])
def test_hue_rotation_matches_colorsys(lo_hi):
    lo, hi = lo_hi
    x = pixels()
    shift = torch.linspace(-0.5, 0.5, x.shape[0])

    def expected(i, r, g, b):
        h, s, v = colorsys.rgb_to_hsv(r, g, b)
        return colorsys.hsv_to_rgb((h + float(shift[i])) % 1.0, s, v)

    layer = pp.RandomHue(1.0, value_range=lo_hi)
    got = layer.transform_images(lo + x * (hi - lo), {"factor": shift})
    torch.testing.assert_close((got - lo) / (hi - lo), colorsys_map(x, expected), rtol=0, atol=1e-5)


@pytest.mark.parametrize("lo_hi", [(0, 1), (0, 255)])
def test_saturation_scaling_matches_colorsys(lo_hi):
    lo, hi = lo_hi
    x = pixels()
    f = torch.linspace(0.0, 3.0, x.shape[0])

    def expected(i, r, g, b):
        h, s, v = colorsys.rgb_to_hsv(r, g, b)
        return colorsys.hsv_to_rgb(h, min(s * float(f[i]), 1.0), v)

    got = pp.RandomSaturation(0.5, value_range=lo_hi).transform_images(x * hi, {"factor": f})
    torch.testing.assert_close(got / hi, colorsys_map(x, expected), rtol=0, atol=1e-5)


def test_saturation_draw_maps_half_to_no_change():
    layer = pp.RandomSaturation((0.5, 0.5), value_range=(0, 1))
    x = pixels()
    torch.testing.assert_close(layer(x), x, rtol=0, atol=1e-6)
    gray = pp.RandomSaturation((0.0, 0.0), value_range=(0, 1))(x)
    torch.testing.assert_close(gray, x.amax(dim=1, keepdim=True).expand_as(x))


def test_hue_draw_is_a_signed_half_factor():
    params = pp.RandomHue((0.4, 0.4), seed=0).get_random_transformation(torch.zeros(500, 3, 1, 1))
    values = torch.unique(params["factor"]).tolist()
    assert len(values) == 2 and values[0] == pytest.approx(-0.2) and values[1] == pytest.approx(0.2)


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


def test_invert_uses_both_ends_of_the_range_and_inverts_about_half():
    x = torch.tensor([[[-1.0, 0.0, 0.5, 1.0]]])
    got = pp.RandomInvert((1.0, 1.0), value_range=(-1, 1))(x)
    assert got.tolist() == [[[1.0, 0.0, -0.5, -1.0]]]
    applied = pp.RandomInvert(seed=0).get_random_transformation(torch.zeros(4000, 1, 1, 1))
    share = float(applied["apply_inversion"].float().mean())
    assert 0.46 < share < 0.54  # E[p] = 1/2 for p ~ U[0, 1]


def test_color_jitter_is_its_steps_in_keras_order():
    x = torch.rand(6, 3, 5, 5, generator=torch.Generator().manual_seed(1))
    jitter = pp.RandomColorJitter(
        value_range=(0, 1),
        brightness_factor=0.3,
        contrast_factor=0.4,
        saturation_factor=(0.2, 0.9),
        hue_factor=0.5,
        seed=3,
    )
    assert list(jitter.steps) == ["brightness", "contrast", "saturation", "hue"]
    params = jitter.get_random_transformation(x)
    y = x
    for name in ("brightness", "contrast", "saturation", "hue"):
        y = jitter.steps[name].transform_images(y, params[name])
    torch.testing.assert_close(jitter.transform_images(x, params), y, rtol=0, atol=0)
    # The steps draw independently (Keras hands them one seed).
    draws = [params[k][next(iter(params[k]))] for k in ("brightness", "contrast")]
    assert not torch.allclose(draws[0] / 0.3, draws[1] - 1.0)
    only_hue = pp.RandomColorJitter(value_range=(0, 1), hue_factor=0.5, seed=3)
    assert list(only_hue.steps) == ["hue"]
    assert torch.equal(pp.RandomColorJitter(value_range=(0, 1))(x), x)


def test_hue_and_saturation_refuse_non_rgb():
    with pytest.raises(ValueError, match="RandomHue: expected images with 3 channel"):
        pp.RandomHue(0.5)(torch.zeros(2, 1, 4, 4))
    with pytest.raises(ValueError, match="RandomSaturation: factor"):
        pp.RandomSaturation(1.5)
    with pytest.raises(ValueError, match="RandomColorJitter: value_range"):
        pp.RandomColorJitter(value_range=(3, 3))
    with pytest.raises(ValueError, match="RandomBrightness: factor"):
        pp.RandomColorJitter(brightness_factor=2.0)
