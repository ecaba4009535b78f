"""RandomErasing: Keras 3's draw and fill, per-image windows, both code paths.

Keras 3 is the anchor: given the same draw (the float corners, the erase decisions and
the fill), Keras's ``transform_images`` and ours must agree exactly; the window of a draw
is Keras's own ``_generate_batch_mask`` of the corners. Keras's outputs come through
``ref`` (tests/differential.py): read from tests/goldens/ in the default run, computed by
Keras under ``-m differential``.
"""

import numpy as np
import pytest
import torch
from _layer_helpers import FORMATS
from differential import keras
from harness import assert_changed, assert_within

import preprocessing as pp
from preprocessing import _regions


def images(b=6, h=12, w=10, fmt="channels_first", seed=0, scale=255.0):
    x = torch.rand(b, 3, h, w, generator=torch.Generator().manual_seed(seed)) * scale
    return x if fmt == "channels_first" else x.permute(0, 2, 3, 1).contiguous()


def keras_erasing(fmt, kw, x, apply_erasing, corners, fill):
    """Keras's RandomErasing transform of ``x`` for our draw: the erase decisions, the
    window of each float corner (Keras's own ``_generate_batch_mask``) and the fill (our
    noise, or None for Keras's clipped constant ``fill_value``)."""
    theirs = keras().layers.RandomErasing(data_format=fmt, **kw)
    c = corners
    masks = theirs._generate_batch_mask(x.shape, (c[:, 0], c[:, 1], c[:, 2], c[:, 3]))
    if fill is None:
        fill = theirs._get_fill_value(x, x.shape, None)
    draw = {"apply_erasing": apply_erasing, "batch_masks": masks, "fill_value": fill}
    return np.asarray(theirs.transform_images(x, draw))


def absolute_noise(params, high, low, shape_nchw):
    """Our noise (read from each window's top-left corner) placed at absolute pixels."""
    b, c, h, w = shape_nchw
    window = _regions.pixel_window(params["corners"], h, w)
    full = torch.zeros(b, c, h, w)
    for i, (x0, x1, y0, y1) in enumerate(window.tolist()):
        full[i, :, y0:y1, x0:x1] = params["noise"][i, :, : y1 - y0, : x1 - x0]
    return (full * high).clamp(low, high)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fill_value", [None, 17.5, 300.0])
def test_matches_keras_transform_for_the_same_draw(ref, fmt, fill_value):
    x = images(fmt=fmt)
    kw = dict(factor=(0.7, 0.7), scale=(0.05, 0.6), fill_value=fill_value, value_range=(0, 255))
    ours = pp.RandomErasing(seed=3, data_format=fmt, **kw)
    params = ours.get_random_transformation(x)
    assert 0 < int(params["apply_erasing"].sum()) < 6
    fill = None  # Keras's clipped constant
    if fill_value is None:
        nchw = x if fmt == "channels_first" else x.permute(0, 3, 1, 2)
        fill = absolute_noise(params, 255.0, 0.0, nchw.shape)
        fill = fill if fmt == "channels_first" else fill.permute(0, 2, 3, 1)
        fill = fill.numpy()
    draw = params["apply_erasing"].numpy(), params["corners"].numpy(), fill
    expected = ref(keras_erasing, fmt, kw, x.numpy(), *draw)
    got = ours.transform_images(x, params)
    # The window is exact (integer pixels); the fill is arithmetic (noise * 255, clamped, in
    # Keras's own order there), so 1 ulp apart on some CPUs (issue 33: 23 of 2,160 values on
    # an AMD EPYC): within 2 ulps of the largest value, 255.
    assert_within(got.numpy(), expected, 2 * np.spacing(np.float32(255.0)))
    assert_changed(got, x)


def test_per_channel_fill_matches_keras_channels_last_and_both_formats_agree(ref):
    x = images(fmt="channels_last")
    kw = dict(factor=(1.0, 1.0), scale=(0.2, 0.3), fill_value=[10.0, 20.0, 400.0])
    ours = pp.RandomErasing(seed=1, data_format="channels_last", **kw)
    params = ours.get_random_transformation(x)
    draw = params["apply_erasing"].numpy(), params["corners"].numpy(), None
    expected = ref(keras_erasing, "channels_last", kw, x.numpy(), *draw)
    got = ours.transform_images(x, params)
    assert_within(got.numpy(), expected, 2 * np.spacing(np.float32(255.0)))
    # channels_first fills channel c with fill_value[c] too (Keras's list broadcasts along
    # the last axis, the width, there): the same image, permuted.
    first = pp.RandomErasing(seed=1, data_format="channels_first", **kw)
    out = first(x.permute(0, 3, 1, 2))
    torch.testing.assert_close(out, got.permute(0, 3, 1, 2), rtol=0, atol=0)
    erased = out != x.permute(0, 3, 1, 2)
    assert set(out[:, 2][erased[:, 2]].unique().tolist()) == {255.0}  # 400 clipped


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fill_value", [None, 3.0])
def test_host_slices_and_device_select_agree(monkeypatch, fmt, fill_value):
    x = images(b=16, fmt=fmt, scale=1.0)
    layer = pp.RandomErasing(scale=(0.0, 0.9), fill_value=fill_value, value_range=(0, 1))
    layer.data_format = fmt
    for inp in (x, (x * 255).to(torch.uint8)):
        params = layer.get_random_transformation(inp, generator=torch.Generator().manual_seed(2))
        host = layer.transform_images(inp, params)
        monkeypatch.setattr(_regions, "on_host", lambda t: False)
        device = layer.transform_images(inp, params)
        monkeypatch.undo()
        torch.testing.assert_close(host, device, rtol=0, atol=0)
        assert inp.dtype != torch.uint8 or host.dtype == torch.float32


def test_draws_follow_keras_distributions():
    n = 4000
    layer = pp.RandomErasing(factor=(0.3, 0.3), scale=(0.1, 0.5), fill_value=0, seed=0)
    params = layer.get_random_transformation(torch.zeros(n, 1, 40, 50))
    rate = params["apply_erasing"].float().mean().item()
    assert abs(rate - 0.3) < 0.03  # binomial sd 0.007
    c = params["corners"]
    width, height = (c[:, 1] - c[:, 0]) / 50, (c[:, 3] - c[:, 2]) / 40
    # sqrt(U(0.1, 0.5)) per side, drawn independently
    for side in (width, height):
        area = side**2
        assert area.min() >= 0.1 - 1e-6 and area.max() <= 0.5 + 1e-6
        assert abs(area.mean().item() - 0.3) < 0.01
    assert abs(np.corrcoef(width.numpy(), height.numpy())[0, 1]) < 0.05
    assert (c[:, 0] >= 0).all() and (c[:, 1] <= 50 + 1e-4).all()
    assert (c[:, 2] >= 0).all() and (c[:, 3] <= 40 + 1e-4).all()
    # the window is the integer pixels inside the float rectangle
    window = _regions.pixel_window(c, 40, 50)
    cols = torch.arange(50).view(1, -1)
    inside = (cols >= c[:, :1]) & (cols < c[:, 1:2])
    assert torch.equal(inside.sum(1), window[:, 1] - window[:, 0])


def test_noise_is_normal_times_high_clipped_to_the_range():
    layer = pp.RandomErasing(factor=(1.0, 1.0), scale=(0.5, 0.5), value_range=(0, 255), seed=4)
    x = torch.full((64, 3, 20, 20), -1.0)
    out = layer(x)
    values = out[out != -1.0]
    assert values.numel() > 64 * 3 * 100  # ~ 0.7 x 0.7 of each image
    assert values.min() == 0.0 and values.max() == 255.0
    # P(N < 0) = 1/2 clips to 0; P(N > 1) = 0.1587 clips to 255
    assert abs((values == 0).float().mean().item() - 0.5) < 0.02
    assert abs((values == 255).float().mean().item() - 0.1587) < 0.02
    mid = values[(values > 0) & (values < 255)] / 255
    assert abs(mid.mean().item() - 0.4599) < 0.02  # E[N | 0 < N < 1]


@pytest.mark.parametrize("fmt", FORMATS)
def test_ranks_formats_dtypes_and_seeds(fmt):
    x = images(fmt=fmt, scale=1.0)
    make = lambda **k: pp.RandomErasing(value_range=(0, 1), data_format=fmt, **k)  # noqa: E731
    a = make(seed=5)(x)
    assert torch.equal(a, make(seed=5)(x)) and not torch.equal(a, make(seed=6)(x))
    torch.testing.assert_close(make(seed=5)(x[0]), make(seed=5)(x[:1])[0], rtol=0, atol=0)
    other = "channels_last" if fmt == "channels_first" else "channels_first"
    perm = (0, 2, 3, 1) if fmt == "channels_first" else (0, 3, 1, 2)
    b = pp.RandomErasing(value_range=(0, 1), data_format=other, seed=5)(x.permute(*perm))
    torch.testing.assert_close(b.permute(*np.argsort(perm)), a, rtol=0, atol=0)
    assert make(seed=5)((x * 255).to(torch.uint8)).dtype == torch.float32
    assert make(seed=5)(x.double()).dtype == torch.float64
    assert make(seed=5, dtype="mixed_bfloat16")(x).dtype == torch.bfloat16
    g = lambda: np.random.default_rng(9)  # noqa: E731
    assert torch.equal(make()(x, generator=g()), make()(x, generator=g()))
    assert torch.equal(x, images(fmt=fmt, scale=1.0))  # the input is never written


def test_eval_identity_and_targets_pass_through():
    layer = pp.RandomErasing(factor=(1.0, 1.0), value_range=(0, 1), seed=0)
    x = torch.rand(2, 3, 8, 8)
    boxes = {"boxes": torch.tensor([[[1.0, 1.0, 4.0, 4.0]]] * 2), "labels": torch.ones(2, 1)}
    masks, points = torch.ones(2, 8, 8, dtype=torch.uint8), torch.ones(2, 3, 2)
    data = {"images": x, "labels": torch.eye(2), "bounding_boxes": boxes}
    out = layer({**data, "segmentation_masks": masks, "keypoints": points})
    assert not torch.equal(out["images"], x)
    assert out["bounding_boxes"] is boxes and out["segmentation_masks"] is masks
    assert out["keypoints"] is points and out["labels"] is data["labels"]
    assert torch.equal(layer.eval()(x), x)
    assert torch.equal(layer(data)["images"], x)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(factor=1.5), "RandomErasing: factor must lie in"),
        (dict(factor=(0.5, 0.2)), "RandomErasing: factor must be a pair"),
        (dict(scale=(-0.1, 0.2)), "RandomErasing: scale must lie in"),
        (dict(fill_value="zero"), "RandomErasing: fill_value must be None, a number"),
        (dict(fill_value=[]), "RandomErasing: fill_value must be None, a number"),
        (dict(fill_value=float("nan")), "RandomErasing: fill_value must be None"),
        (dict(value_range=(1, 0)), "RandomErasing: value_range must be a pair"),
    ],
)
def test_bad_arguments_name_themselves(kwargs, message):
    with pytest.raises(ValueError, match=message):
        pp.RandomErasing(**kwargs)


def test_per_channel_fill_of_the_wrong_length_raises():
    layer = pp.RandomErasing(fill_value=[1.0, 2.0, 3.0], seed=0)
    with pytest.raises(ValueError, match=r"has 3 values \(one per channel\) but the images have 1"):
        layer(torch.zeros(2, 1, 8, 8))


def test_compiles_with_fullgraph_and_matches_eager():
    x = torch.rand(4, 3, 12, 12)
    for fill in (None, 0.5):
        eager = pp.RandomErasing(factor=(1, 1), fill_value=fill, value_range=(0, 1), seed=2)
        compiled = torch.compile(
            pp.RandomErasing(factor=(1, 1), fill_value=fill, value_range=(0, 1), seed=2),
            fullgraph=True,
            backend="eager",
        )
        for _ in range(2):
            torch.testing.assert_close(compiled(x), eager(x), rtol=0, atol=0)
