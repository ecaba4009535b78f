"""RandomResizedCrop: torchvision's semantics, tested directly (torchvision cannot be
imported beside this torch build): the draw against a line-by-line transcription of
``RandomResizedCrop.get_params``, the resize against ``F.interpolate`` of each crop.
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import preprocessing as pp
from preprocessing import _regions
from preprocessing.resized_crop import resize_windows


# ------------------------------------------------------- RandomResizedCrop
def torchvision_get_params(h, w, scale, ratio, areas, logs, u_top, u_left):
    """torchvision.transforms.RandomResizedCrop.get_params, transcribed, with its random
    draws replaced by the given uniforms (area fraction, log ratio, two U[0, 1))."""
    area = h * w
    for k in range(10):
        target_area = area * areas[k]
        aspect_ratio = math.exp(logs[k])
        cw = int(round(math.sqrt(target_area * aspect_ratio)))
        ch = int(round(math.sqrt(target_area / aspect_ratio)))
        if 0 < cw <= w and 0 < ch <= h:
            return int(u_top * (h - ch + 1)), int(u_left * (w - cw + 1)), ch, cw
    in_ratio = float(w) / float(h)
    if in_ratio < min(ratio):
        cw, ch = w, int(round(w / min(ratio)))
    elif in_ratio > max(ratio):
        ch, cw = h, int(round(h * max(ratio)))
    else:
        cw, ch = w, h
    return (h - ch) // 2, (w - cw) // 2, ch, cw


@pytest.mark.parametrize(
    "build, message",
    [
        (
            lambda: pp.RandomResizedCrop(8, 8, scale=(0.5, 0.1)),
            "RandomResizedCrop: scale must be a pair",
        ),
        (
            lambda: pp.RandomResizedCrop(8, 8, ratio=(0, 1)),
            "RandomResizedCrop: ratio must be a pair",
        ),
        (
            lambda: pp.RandomResizedCrop(8, 8, interpolation="area"),
            "RandomResizedCrop: interpolation",
        ),
        (
            lambda: pp.RandomResizedCrop(8, 8, antialias=1),
            "RandomResizedCrop: antialias must be True",
        ),
    ],
)
def test_bad_arguments_name_layer_and_argument(build, message):
    with pytest.raises(ValueError, match=message):
        build()


@pytest.mark.parametrize(
    "scale, ratio",
    [((0.08, 1.0), (3 / 4, 4 / 3)), ((0.5, 1.0), (0.2, 5.0)), ((0.9, 1.0), (2.5, 3.0))],
)
def test_resized_crop_draw_follows_torchvision(scale, ratio, monkeypatch):
    h, w, n = 30, 50, 64
    layer = pp.RandomResizedCrop(16, 16, scale=scale, ratio=ratio, seed=0)
    drawn = []
    real = layer._uniform

    def recording(count, low, high, device, generator):
        values = real(count, low, high, device, generator)
        drawn.append(values.double().numpy())
        return values

    monkeypatch.setattr(layer, "_uniform", recording)
    params = layer.get_random_transformation(torch.zeros(n, 3, h, w))
    areas, logs, tops, lefts = drawn
    areas, logs = areas.reshape(n, 10), logs.reshape(n, 10)
    got = torch.stack([params[k] for k in ("top", "left", "crop_height", "crop_width")], 1)
    fallbacks = 0
    for i in range(n):
        sides = [math.sqrt(h * w * a * math.exp(r)) for a, r in zip(areas[i], logs[i])]
        sides += [math.sqrt(h * w * a / math.exp(r)) for a, r in zip(areas[i], logs[i])]
        if any(abs(s % 1 - 0.5) < 1e-3 for s in sides):
            continue  # float32 vs float64 could round a half the other way
        expected = torchvision_get_params(h, w, scale, ratio, areas[i], logs[i], tops[i], lefts[i])
        assert tuple(got[i].tolist()) == expected, i
        fallbacks += expected == torchvision_get_params(
            h, w, scale, ratio, [9.0] * 10, [0.0] * 10, 0, 0
        )
    if ratio == (2.5, 3.0):
        assert fallbacks > 0  # the wide-ratio case exercises the centre-crop fallback


def test_resized_crop_fallback_is_torchvision_centre_crop():
    layer = pp.RandomResizedCrop(4, 4, scale=(1.0, 1.0), ratio=(2.0, 2.0), seed=0)
    params = layer.get_random_transformation(torch.zeros(3, 1, 10, 10))
    # No 2:1 crop of the whole area fits: width 10, height round(10 / 2) = 5, centred.
    assert params["crop_width"].tolist() == [10] * 3 and params["crop_height"].tolist() == [5] * 3
    assert params["top"].tolist() == [2] * 3 and params["left"].tolist() == [0] * 3


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "nearest-exact", "bicubic"])
@pytest.mark.parametrize("antialias", [False, True])
@pytest.mark.parametrize("host", [True, False])
def test_resize_windows_equals_interpolate_of_each_crop(monkeypatch, mode, antialias, host):
    # host: one F.interpolate per crop (CPU); else the per-tap gathers (devices, compile)
    monkeypatch.setattr(_regions, "on_host", lambda t: host)
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.random((8, 2, 40, 36)))  # float64, the same every run
    top = torch.tensor(rng.integers(0, 20, 8))
    left = torch.tensor(rng.integers(0, 16, 8))
    ch = torch.tensor(rng.integers(1, 21, 8))
    cw = torch.tensor(rng.integers(1, 21, 8))
    ch[0], cw[0], ch[1], cw[1] = 20, 20, 3, 2  # downscale and strong upscale
    got = resize_windows(x, top, left, ch, cw, (11, 13), mode, antialias)
    for i in range(8):
        crop = x[i : i + 1, :, top[i] : top[i] + ch[i], left[i] : left[i] + cw[i]]
        kw = {} if mode.startswith("nearest") else dict(align_corners=False, antialias=antialias)
        expected = F.interpolate(crop, size=(11, 13), mode=mode, **kw)
        # float64 weights and sums in another order than torch's kernels: a few eps of
        # float64 (taps computed in float32 put 1.5e-6 of error here).
        torch.testing.assert_close(got[i : i + 1], expected, atol=1e-12, rtol=0)


def test_resized_crop_eval_resizes_the_centred_aspect_window():
    layer = pp.RandomResizedCrop(4, 8, antialias=False).eval()
    x = torch.rand(2, 3, 12, 12)
    expected = F.interpolate(x[:, :, 3:9, :], size=(4, 8), mode="bilinear", align_corners=False)
    torch.testing.assert_close(layer(x), expected)


def test_resized_crop_scale_and_ratio_hold_for_found_crops():
    layer = pp.RandomResizedCrop(8, 8, seed=3)
    p = layer.get_random_transformation(torch.zeros(500, 3, 64, 96))
    area = (p["crop_height"] * p["crop_width"]).double() / (64 * 96)
    aspect = p["crop_width"].double() / p["crop_height"]
    assert area.min() >= 0.06 and area.max() <= 1.0
    assert aspect.min() >= 0.6 and aspect.max() <= 1.6
    assert (p["top"] + p["crop_height"] <= 64).all() and (p["left"] + p["crop_width"] <= 96).all()
    assert len(set(p["crop_width"].tolist())) > 20
