"""Augmentation throughput on batches of 64x3x224x224 float32, side by side in one run.

W4 -- random horizontal flip (p = 1/2 per image) + random rotation (+-0.1 turn = +-36
degrees, bilinear, reflect) + per-channel normalization:

- ours, ``torch.nn.Sequential(RandomFlip, RandomRotation, Normalization)`` (what users
  write: three layers, three passes);
- ours, ``preprocessing.Pipeline([...])`` (flip and rotation fused into one resampling);
- hand-written torch: one ``affine_grid`` + ``grid_sample(reflection)`` with the flip
  folded into the matrix, then ``(x - mean) / std``;
- kornia.augmentation (RandomHorizontalFlip + RandomAffine(36, reflection) + Normalize);
- torchvision.transforms.v2 when importable (its compiled ops do not load beside the
  CPU torch build here; it is then reported as unavailable).

Recipe -- an ImageNet training recipe on 64x3x256x256 float32 in [0, 1] (decoded images
resized to 256) to 224x224, both contenders on the same batch with the same ops:
RandomResizedCrop 224 (scale 0.08-1, ratio 3/4-4/3, bilinear without antialiasing:
kornia's kernel; ours with ``antialias=False``) -> horizontal flip (p = 1/2) ->
RandAugment (2 ops per image; ours: Keras's 11 ops, ``factor=0.5``; kornia's
``auto.RandAugment(n=2, m=10)``: its 14 ops, one op sequence per batch) -> MixUp or CutMix,
alternating batch by batch (ours: ``MixUp(alpha=0.8)`` / ``CutMix()`` on
``{"images", "labels"}`` with one-hot labels of 1,000 classes; kornia's
``RandomMixUpV2`` / ``RandomCutMixV2`` with class indices) -> per-channel normalization.
Ours are the layers called in turn (what ``examples/train_imagenet_recipe.py`` does).

Per op -- each layer in ``nn.Sequential`` against hand-written torch for its op (the same
draws' distribution, the same kernels a user would call), ratio = ours / hand-written.

Photometric (issue 13b) -- each colour / tone layer and RandAugment / AugMix in
``nn.Sequential`` against hand-written torch for its op (torchvision's formulas, batched)
and kornia.augmentation's layer of that name (``p=1``; its parameter distributions are
kornia's own where they differ, e.g. its RandAugment's ops and magnitudes).

Every contender is warmed up once, then rounds of ``--iters`` batches interleave the
contenders in a rotating order (load on the shared machine hits all alike) and the best
round is kept. The
load average (``os.getloadavg``) is printed before and after.

Usage: python benchmarks/bench_preprocessing.py [--device cpu|cuda] [--iters N]
       [--rounds N] [--batch N] [--only w4|recipe|ops|photo]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import preprocessing as pp  # noqa: E402

MEAN = torch.tensor([0.485, 0.456, 0.406])
STD = torch.tensor([0.229, 0.224, 0.225])
TURN = 0.1  # +-0.1 turn = +-36 degrees


# ------------------------------------------------------------------------ W4
def ours_sequential(device):
    return torch.nn.Sequential(
        pp.RandomFlip("horizontal", seed=0),
        pp.RandomRotation(TURN, seed=1),
        pp.Normalization(mean=MEAN.tolist(), variance=(STD**2).tolist()),
    ).to(device)


def ours_pipeline(device):
    return pp.Pipeline(list(ours_sequential(device))).to(device)


def kornia_w4(device):
    import kornia.augmentation as K

    return torch.nn.Sequential(
        K.RandomHorizontalFlip(),
        K.RandomAffine(degrees=TURN * 360.0, padding_mode="reflection", p=1.0),
        K.Normalize(mean=MEAN, std=STD),
    ).to(device)


def torchvision_w4(device):
    from torchvision.transforms import v2

    return v2.Compose(
        [
            v2.RandomHorizontalFlip(),
            v2.RandomRotation(TURN * 360.0),
            v2.Normalize(MEAN.tolist(), STD.tolist()),
        ]
    )


def _rotation_theta(b, device, flip=None):
    angle = (torch.rand(b, device=device) * 2 - 1) * (TURN * 2 * math.pi)
    cos, sin = torch.cos(angle), torch.sin(angle)
    sign = torch.ones(b, device=device) if flip is None else flip
    theta = torch.zeros(b, 2, 3, device=device)
    theta[:, 0, 0], theta[:, 0, 1] = cos * sign, -sin
    theta[:, 1, 0], theta[:, 1, 1] = sin * sign, cos
    return theta


def hand_w4(device):
    mean, std = MEAN.to(device).view(1, 3, 1, 1), STD.to(device).view(1, 3, 1, 1)

    def run(x):
        b = x.shape[0]
        flip = torch.where(torch.rand(b, device=device) < 0.5, -1.0, 1.0)
        grid = F.affine_grid(_rotation_theta(b, device, flip), list(x.shape), align_corners=False)
        out = F.grid_sample(
            x, grid, mode="bilinear", padding_mode="reflection", align_corners=False
        )
        return (out - mean) / std

    return run


W4 = {
    "ours nn.Sequential": ours_sequential,
    "ours Pipeline (fused)": ours_pipeline,
    "hand-written torch (fused)": hand_w4,
    "kornia.augmentation": kornia_w4,
    "torchvision.transforms.v2": torchvision_w4,
}


# -------------------------------------------------------------------- recipe
RECIPE_IN, RECIPE_OUT, CLASSES = 256, 224, 1000


def ours_recipe(device, batch):
    augment = torch.nn.Sequential(
        pp.RandomResizedCrop(RECIPE_OUT, RECIPE_OUT, antialias=False, seed=0),
        pp.RandomFlip("horizontal", seed=1),
        pp.RandAugment(value_range=(0, 1), num_ops=2, factor=0.5, seed=2),
    )
    mixes = [pp.MixUp(alpha=0.8, seed=3), pp.CutMix(seed=4)]
    norm = pp.Normalization(mean=MEAN.tolist(), variance=(STD**2).tolist()).to(device)
    labels = F.one_hot(torch.arange(batch, device=device) % CLASSES, CLASSES).float()
    calls = [0]

    def run(x):
        out = mixes[calls[0] % 2](augment({"images": x, "labels": labels}))
        calls[0] += 1
        return norm(out["images"]), out["labels"]

    return run


def kornia_recipe(device, batch):
    import kornia.augmentation as K
    from kornia.augmentation.auto import RandAugment

    augment = torch.nn.Sequential(
        K.RandomResizedCrop((RECIPE_OUT, RECIPE_OUT)),
        K.RandomHorizontalFlip(),
        RandAugment(n=2, m=10),
    ).to(device)
    keys = ["input", "class"]
    mixes = [K.RandomMixUpV2(data_keys=keys), K.RandomCutMixV2(data_keys=keys)]
    norm = K.Normalize(mean=MEAN, std=STD).to(device)
    labels = torch.arange(batch, device=device) % CLASSES
    calls = [0]

    def run(x):
        out, mixed = mixes[calls[0] % 2](augment(x), labels)
        calls[0] += 1
        return norm(out), mixed

    return run


def torchvision_recipe(device, batch):
    from torchvision.transforms import v2

    # Per image (its transforms take one image at a time), then its batch-level mixes.
    per_image = v2.Compose(
        [
            v2.RandomResizedCrop(RECIPE_OUT, antialias=False),
            v2.RandomHorizontalFlip(),
            v2.RandAugment(num_ops=2, magnitude=9),
        ]
    )
    mixes = [v2.MixUp(alpha=0.8, num_classes=CLASSES), v2.CutMix(num_classes=CLASSES)]
    labels = torch.arange(batch, device=device) % CLASSES
    calls = [0]

    def run(x):
        out = torch.stack([per_image(img) for img in x])
        out, mixed = mixes[calls[0] % 2](out, labels)
        calls[0] += 1
        return v2.functional.normalize(out, MEAN.tolist(), STD.tolist()), mixed

    return run


RECIPE = {
    "ours (layers in turn)": ours_recipe,
    "kornia.augmentation": kornia_recipe,
    "torchvision.transforms.v2": torchvision_recipe,
}


# -------------------------------------------------------------------- per op
def _hand_flip(x):
    # A flip of the flipped half: what one writes to avoid flipping everything.
    idx = (torch.rand(x.shape[0], device=x.device) < 0.5).nonzero().squeeze(1)
    out = x.clone()
    out[idx] = x[idx].flip(3)
    return out


def _hand_warp(theta_fn):
    def run(x):
        grid = F.affine_grid(theta_fn(x), list(x.shape), align_corners=False)
        return F.grid_sample(
            x, grid, mode="bilinear", padding_mode="reflection", align_corners=False
        )

    return run


def _zoom_theta(x):
    s = 1.0 + (torch.rand(x.shape[0], device=x.device) * 2 - 1) * 0.2
    theta = torch.zeros(x.shape[0], 2, 3, device=x.device)
    theta[:, 0, 0] = theta[:, 1, 1] = s
    return theta


def _translate_theta(x):
    b = x.shape[0]
    theta = torch.zeros(b, 2, 3, device=x.device)
    theta[:, 0, 0] = theta[:, 1, 1] = 1.0
    theta[:, :, 2] = (torch.rand(b, 2, device=x.device) * 2 - 1) * 0.2  # 0.1 of the side
    return theta


def _hand_contrast(x):
    f = 1.0 + (torch.rand(x.shape[0], 1, 1, 1, device=x.device) * 2 - 1) * 0.3
    mean = x.mean(dim=(2, 3), keepdim=True)
    return ((x - mean) * f + mean).clamp(0.0, 1.0)


def _hand_brightness(x):
    d = (torch.rand(x.shape[0], 1, 1, 1, device=x.device) * 2 - 1) * 0.3
    return (x + d).clamp(0.0, 1.0)


def _hand_crop(x):
    b, _, h, w = x.shape
    tops = torch.randint(0, h - 192 + 1, (b,)).tolist()
    lefts = torch.randint(0, w - 192 + 1, (b,)).tolist()
    return torch.stack(
        [x[i, :, t : t + 192, s : s + 192] for i, (t, s) in enumerate(zip(tops, lefts))]
    )


def _hand_normalize(device):
    mean, std = MEAN.to(device).view(1, 3, 1, 1), STD.to(device).view(1, 3, 1, 1)
    return lambda x: (x - mean) / std


def ops(device):
    """(name, our layer, hand-written torch) per existing layer."""
    norm = pp.Normalization(mean=MEAN.tolist(), variance=(STD**2).tolist()).to(device)
    return [
        ("RandomFlip", pp.RandomFlip(seed=0), _hand_flip),
        (
            "RandomRotation",
            pp.RandomRotation(TURN, seed=0),
            _hand_warp(lambda x: _rotation_theta(x.shape[0], x.device)),
        ),
        ("RandomZoom", pp.RandomZoom(0.2, seed=0), _hand_warp(_zoom_theta)),
        ("RandomTranslation", pp.RandomTranslation(0.1, 0.1, seed=0), _hand_warp(_translate_theta)),
        ("RandomContrast", pp.RandomContrast(0.3, value_range=(0, 1), seed=0), _hand_contrast),
        (
            "RandomBrightness",
            pp.RandomBrightness(0.3, value_range=(0, 1), seed=0),
            _hand_brightness,
        ),
        ("RandomCrop 192", pp.RandomCrop(192, 192, seed=0), _hand_crop),
        (
            "Resizing 160 bilinear",
            pp.Resizing(160, 160),
            lambda x: F.interpolate(x, size=(160, 160), mode="bilinear", align_corners=False),
        ),
        ("Rescaling", pp.Rescaling(1 / 255, offset=-0.5), lambda x: x * (1 / 255) + -0.5),
        ("Normalization", norm, _hand_normalize(device)),
    ]


# --------------------------------------------------------- photometric (13b)
GRAY = (0.2989, 0.587, 0.114)


def _coin(x, p=0.5):
    return (torch.rand(x.shape[0], device=x.device) < p).view(-1, 1, 1, 1)


def _per_image(x, lo, hi):
    return (lo + (hi - lo) * torch.rand(x.shape[0], device=x.device)).view(-1, 1, 1, 1)


def _gray(x):
    return (GRAY[0] * x[:, 0] + GRAY[1] * x[:, 1] + GRAY[2] * x[:, 2]).unsqueeze(1)


def _hsv(x):
    """torchvision's _rgb2hsv, batched: what one writes by hand."""
    r, g, b = x.unbind(1)
    maxc, minc = x.amax(1), x.amin(1)
    eqc = maxc == minc
    cr = maxc - minc
    s = cr / torch.where(eqc, torch.ones_like(maxc), maxc)
    crd = torch.where(eqc, torch.ones_like(cr), cr)
    rc, gc, bc = (maxc - r) / crd, (maxc - g) / crd, (maxc - b) / crd
    hr = (maxc == r) * (bc - gc)
    hg = ((maxc == g) & (maxc != r)) * (2.0 + rc - bc)
    hb = ((maxc != g) & (maxc != r)) * (4.0 + gc - rc)
    h = torch.fmod((hr + hg + hb) / 6.0 + 1.0, 1.0)
    return h, s, maxc


def _rgb(h, s, v):
    """torchvision's _hsv2rgb, batched."""
    i = torch.floor(h * 6.0)
    f = h * 6.0 - i
    i = i.to(torch.int32) % 6
    p, q, t = (
        (v * (1.0 - s)).clamp(0, 1),
        (v * (1.0 - s * f)).clamp(0, 1),
        (v * (1.0 - s * (1.0 - f))).clamp(0, 1),
    )
    mask = i.unsqueeze(1) == torch.arange(6, device=h.device).view(-1, 1, 1)
    a1, a2, a3 = (
        torch.stack(c, dim=1) for c in ((v, q, p, p, t, v), (t, v, v, q, p, p), (p, p, t, v, v, q))
    )
    return torch.stack(
        [torch.einsum("...ijk,...xijk->...jk", mask.to(h.dtype), a) for a in (a1, a2, a3)], 1
    )


def _hand_hue(x):
    h, s, v = _hsv(x)
    shift = (torch.rand(x.shape[0], device=x.device) - 0.5).view(-1, 1, 1) * 0.5
    return _rgb(torch.remainder(h + shift, 1.0), s, v)


def _hand_saturation(x):
    h, s, v = _hsv(x)
    f = torch.rand(x.shape[0], device=x.device).view(-1, 1, 1) * 2.0
    return _rgb(h, (s * f).clamp(0, 1), v)


def _hand_jitter(x):
    x = (x + _per_image(x, -0.2, 0.2)).clamp(0, 1)
    mean = x.mean(dim=(2, 3), keepdim=True)
    x = ((x - mean) * _per_image(x, 0.7, 1.3) + mean).clamp(0, 1)
    return _hand_hue(x)  # + saturation through the same HSV pass would be one more


def _hand_sharpness(x):
    k = torch.tensor([[1.0, 1.0, 1.0], [1.0, 5.0, 1.0], [1.0, 1.0, 1.0]], device=x.device) / 13
    smooth = F.conv2d(x, k.expand(x.shape[1], 1, 3, 3), groups=x.shape[1])
    out = x.clone()
    out[:, :, 1:-1, 1:-1] = smooth
    return torch.lerp(out, x, _per_image(x, 0.0, 2.0)).clamp(0, 1)


def _hand_posterize(x):
    bits = torch.randint(1, 9, (x.shape[0],), device=x.device)
    mask = (256 - 2 ** (8 - bits)).to(torch.uint8).view(-1, 1, 1, 1)
    return ((x * 255).to(torch.uint8) & mask).float() / 255


def _hand_solarize(x):
    y = (x + _per_image(x, 0.0, 0.3)).clamp(0, 1)
    return torch.where(y < _per_image(x, 0.0, 1.0), y, 1.0 - y)


def _hand_autocontrast(x):
    low, high = x.amin(dim=(2, 3), keepdim=True), x.amax(dim=(2, 3), keepdim=True)
    scale = torch.where(high > low, 1.0 / (high - low), torch.ones_like(high))
    return ((x - low) * scale).clamp(0, 1)


def _hand_equalize(x):
    b, c, h, w = x.shape
    idx = (x * 255).to(torch.int64).clamp(0, 255).reshape(b * c, -1)
    flat = idx + torch.arange(b * c, device=x.device).view(-1, 1) * 256
    hist = torch.bincount(flat.view(-1), minlength=b * c * 256).view(b * c, 256)
    cdf = hist.cumsum(1)
    cdf_min = torch.where(cdf > 0, cdf, cdf[:, -1:]).amin(1, keepdim=True)
    lut = ((cdf - cdf_min) * 255.0 / (cdf[:, -1:] - cdf_min).clamp_min(1)).round()
    return (torch.take(lut, flat) / 255).view(b, c, h, w)


def _hand_blur(x):
    b, c = x.shape[:2]
    sigma = 0.1 + 1.9 * torch.rand(b, 2, device=x.device)
    t = torch.arange(5, device=x.device) - 2.0
    taps = torch.exp(-0.5 * (t / sigma.unsqueeze(-1)) ** 2)
    taps = (taps / taps.sum(-1, keepdim=True)).repeat_interleave(c, 0)  # (B*C, 2, 5)
    y = F.pad(x, (2, 2, 2, 2), mode="reflect").reshape(1, b * c, *[n + 4 for n in x.shape[2:]])
    y = F.conv2d(y, taps[:, 1].reshape(b * c, 1, 5, 1), groups=b * c)
    y = F.conv2d(y, taps[:, 0].reshape(b * c, 1, 1, 5), groups=b * c)
    return y.view_as(x)


def _hand_clahe(x, grid=(8, 8), clip=4.0):
    """Keras's CLAHE written directly in torch: one scatter-add for every tile's histogram,
    clip and spread, the tables edge-padded, four gathers with their own index tensors."""
    b, c, h, w = x.shape
    (gh, gw), th, tw = grid, -(-h // grid[0]), -(-w // grid[1])
    v = (x * 255).clamp(0, 255).to(torch.int64)
    p = F.pad(v.float(), (0, tw * gw - w, 0, th * gh - h), mode="replicate").to(torch.int64)
    tiles = p.view(b, c, gh, th, gw, tw).permute(0, 1, 2, 4, 3, 5).reshape(-1, th * tw)
    hist = torch.zeros(tiles.shape[0], 256, device=x.device)
    hist.scatter_add_(1, tiles, torch.ones(tiles.shape, device=x.device))
    clipped = hist.clamp(max=clip * th * tw / 256)
    hist = clipped + (hist - clipped).sum(1, keepdim=True) / 256
    cdf = hist.cumsum(1)
    lut = ((cdf - cdf[:, :1]) * 255 / (th * tw - cdf[:, :1]).clamp_min(1)).clamp(0, 255)
    lut = F.pad(lut.view(b * c, gh, gw, 256).permute(0, 3, 1, 2), (1, 1, 1, 1), mode="replicate")
    lut = lut.permute(0, 2, 3, 1).reshape(-1)
    gy = (torch.arange(h, device=x.device) - th / 2) / th + 1
    gx = (torch.arange(w, device=x.device) - tw / 2) / tw + 1
    y0, x0 = gy.floor(), gx.floor()
    wy, wx = (gy - y0).view(1, h, 1), (gx - x0).view(1, 1, w)
    sy = (gw + 2) * 256
    base = torch.arange(b * c, device=x.device).view(-1, 1, 1) * ((gh + 2) * sy)
    nw = (
        base
        + v.view(b * c, h, w)
        + (y0.long() * sy).view(1, h, 1)
        + (x0.long() * 256).view(1, 1, w)
    )
    top = lut[nw] * (1 - wx) + lut[nw + 256] * wx
    bottom = lut[nw + sy] * (1 - wx) + lut[nw + sy + 256] * wx
    return ((top * (1 - wy) + bottom * wy) / 255).view(b, c, h, w)


def photo_ops():
    """(name, our layer, hand-written torch, kornia builder or None) per photometric layer.
    Every image is changed (probabilities 1) unless the op is a coin flip by nature."""
    vr = dict(value_range=(0, 1))
    return [
        ("RandomColorDegeneration", pp.RandomColorDegeneration(1.0, seed=0, **vr),
         lambda x: torch.lerp(x, _gray(x).expand_as(x), _per_image(x, 0, 1)).clamp(0, 1), None),
        ("RandomGrayscale p=0.5", pp.RandomGrayscale(0.5, seed=0),
         lambda x: torch.where(_coin(x), _gray(x).expand_as(x), x),
         lambda K: K.RandomGrayscale(p=0.5)),
        ("RandomInvert p=0.5", pp.RandomInvert((0.5, 0.5), seed=0, **vr),
         lambda x: torch.where(_coin(x), 1.0 - x, x), lambda K: K.RandomInvert(p=0.5)),
        ("RandomHue 0.5", pp.RandomHue(0.5, seed=0, **vr), _hand_hue,
         lambda K: K.RandomHue((-0.25, 0.25))),
        ("RandomSaturation", pp.RandomSaturation(1.0, seed=0, **vr), _hand_saturation,
         lambda K: K.RandomSaturation((0.0, 2.0))),
        ("RandomColorJitter b,c,h", pp.RandomColorJitter(brightness_factor=0.2,
         contrast_factor=0.3, hue_factor=0.5, seed=0, **vr), _hand_jitter,
         lambda K: K.ColorJitter(0.2, 0.3, 0.0, 0.25)),
        ("RandomSharpness", pp.RandomSharpness(1.0, seed=0, **vr), _hand_sharpness,
         lambda K: K.RandomSharpness((0.0, 2.0), p=1.0)),
        ("RandomPosterization", pp.RandomPosterization(8, seed=0, **vr), _hand_posterize,
         lambda K: K.RandomPosterize((1, 8), p=1.0)),
        ("Solarization", pp.Solarization(0.3, 1.0, seed=0, **vr), _hand_solarize,
         lambda K: K.RandomSolarize(0.5, 0.3, p=1.0)),
        ("AutoContrast", pp.AutoContrast(**vr), _hand_autocontrast,
         lambda K: K.RandomAutoContrast(p=1.0)),
        ("Equalization", pp.Equalization(**vr), _hand_equalize,
         lambda K: K.RandomEqualize(p=1.0)),
        ("CLAHE 8x8 clip 4", pp.ContrastLimitedAdaptiveHistogramEqualization(**vr),
         _hand_clahe, lambda K: K.RandomClahe((4.0, 4.0), (8, 8), p=1.0)),
        ("RandomGaussianBlur k5", pp.RandomGaussianBlur((1.0, 1.0), 5, (0.1, 2.0), seed=0,
         **vr), _hand_blur, lambda K: K.RandomGaussianBlur(5, (0.1, 2.0), p=1.0)),
        ("RandAugment n=2 (vs kornia's)", pp.RandAugment(num_ops=2, factor=0.5, seed=0, **vr),
         None, lambda K: __import__("kornia.augmentation.auto", fromlist=["x"]).RandAugment(2, 10)),
        ("AugMix 3x3", pp.AugMix(seed=0, **vr), None, None),
    ]  # fmt: skip


def run_photo(device, x, args):
    print(f"\nPhotometric ops in nn.Sequential, {tuple(x.shape)} float32 in [0, 1]")
    print("  (kornia's ops draw other distributions for some layers; each changes every image)")
    try:
        import kornia.augmentation as K
    except ImportError:  # kornia is in the bench extra
        K = None
    for name, layer, hand, kornia in photo_ops():
        fns = {"ours": torch.nn.Sequential(layer.to(device)).train()}
        if hand is not None:
            fns["hand"] = hand
        if kornia is not None and K is not None:
            fns["kornia"] = kornia(K).to(device)
        with torch.no_grad():
            for fn in fns.values():
                fn(x)
        rates = race(fns, x, args.rounds, args.iters)
        cols = "  ".join(f"{k} {v:8.1f}" for k, v in rates.items())
        ratios = "  ".join(
            f"/{k} {rates['ours'] / v:5.2f}x" for k, v in rates.items() if k != "ours"
        )
        print(f"  {name:30s} {cols}  {ratios}")


# ----------------------------------------------------------------- measuring
def measure(fn, x, iters):
    """Images/s over ``iters`` calls (after the caller's warm-up)."""
    with torch.no_grad():
        if x.is_cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(iters):
            fn(x)
        if x.is_cuda:
            torch.cuda.synchronize()
    return iters * x.shape[0] / (time.perf_counter() - start)


def race(fns, x, rounds, iters):
    """Best-round images/s per contender, rounds interleaved; the order rotates every
    round, so no contender always runs after the same one (allocator and cache state)."""
    rates = {label: 0.0 for label in fns}
    labels = list(fns)
    for r in range(rounds):
        for label in labels[r % len(labels) :] + labels[: r % len(labels)]:
            rates[label] = max(rates[label], measure(fns[label], x, iters))
    return rates


def build_w4(device, x):
    fns = {}
    for label, build in W4.items():
        try:
            fn = build(device)
            with torch.no_grad():
                fn(x)  # warm-up
            fns[label] = fn
        except Exception as exc:  # noqa: BLE001 - report any import/build failure
            print(f"{label:30s} unavailable: {type(exc).__name__}: {exc}")
    return fns


def run_recipe(device, args):
    x = torch.rand(args.batch, 3, RECIPE_IN, RECIPE_IN, device=device)
    print(
        f"\nRecipe: RandomResizedCrop {RECIPE_OUT} + flip + RandAugment(2 ops) + MixUp|CutMix"
        f" + normalize, {tuple(x.shape)} float32 -> {RECIPE_OUT}x{RECIPE_OUT}"
    )
    fns = {}
    for label, build in RECIPE.items():
        try:
            fn = build(device, args.batch)
            with torch.no_grad():
                fn(x), fn(x)  # warm-up: both mixes
            fns[label] = fn
        except Exception as exc:  # noqa: BLE001 - report any import/build failure
            print(f"  {label:30s} unavailable: {type(exc).__name__}: {str(exc)[:120]}")
    # An even number of batches per round: each contender runs as many MixUps as CutMixes.
    rates = race(fns, x, args.rounds, args.iters + args.iters % 2)
    for label, rate in rates.items():
        print(f"  {label:30s} {rate:8.1f} images/s")
    ours, kornia = rates.get("ours (layers in turn)"), rates.get("kornia.augmentation")
    if ours and kornia:
        print(f"  ours / kornia:                 {ours / kornia:5.2f}x")


def run_w4(device, x, args):
    print(f"\nW4: flip + rotation +-36 deg bilinear reflect + normalize, {tuple(x.shape)} float32")
    rates = race(build_w4(device, x), x, args.rounds, args.iters)
    for label, rate in rates.items():
        print(f"  {label:30s} {rate:8.1f} images/s")
    hand, kornia = rates.get("hand-written torch (fused)"), rates.get("kornia.augmentation")
    for ours in ("ours nn.Sequential", "ours Pipeline (fused)"):
        if hand:
            print(f"  {ours} / hand-written torch: {rates[ours] / hand:5.2f}x")
        if kornia:
            print(f"  {ours} / kornia:             {rates[ours] / kornia:5.2f}x")


def run_ops(device, x, args):
    print(f"\nPer op in nn.Sequential vs hand-written torch, {tuple(x.shape)} float32")
    for name, layer, hand in ops(device):
        seq = torch.nn.Sequential(layer.to(device)).train()
        with torch.no_grad():
            seq(x), hand(x)
        rates = race({"ours": seq, "hand": hand}, x, args.rounds, args.iters)
        ratio = rates["ours"] / rates["hand"]
        print(f"  {name:24s} ours {rates['ours']:8.1f}  hand {rates['hand']:8.1f}  {ratio:5.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--iters", type=int, default=4, help="batches per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--only", choices=("w4", "recipe", "ops", "photo"), default=None)
    args = parser.parse_args()
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"device: {name}, torch {torch.__version__}, threads {torch.get_num_threads()}")
    print(f"load average at start: {os.getloadavg()}")
    print(f"{args.rounds} rounds x {args.iters} batches per contender, best round")
    x = torch.rand(args.batch, 3, args.size, args.size, device=device)
    if args.only in (None, "w4"):
        run_w4(device, x, args)
    if args.only in (None, "recipe"):
        run_recipe(device, args)
    if args.only in (None, "ops"):
        run_ops(device, x, args)
    if args.only in (None, "photo"):
        run_photo(device, x, args)
    print(f"\nload average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
