"""MixUp and CutMix: Keras 3's draws and mixing, exact CutMix label weights, targets.

Keras 3 is the anchor: given the same draw (weights, permutation, CutMix's float corners,
whose pixels are Keras's own ``_generate_batch_mask``), Keras's ``transform_images`` /
``transform_labels`` and ours agree. CutMix's label weights are the pasted pixel count
over H*W exactly (Keras's are the float rectangle's area). Keras's outputs come through
``ref`` (tests/differential.py): read from tests/goldens/ in the default run, computed by
Keras under ``-m differential``.
"""

import math

import numpy as np
import pytest
import torch
from _layer_helpers import FORMATS
from differential import keras
from harness import assert_changed, assert_within

import preprocessing as pp
from preprocessing import _regions
from preprocessing._random import log_standard_gamma


def images(b=8, h=12, w=10, fmt="channels_first", seed=0, scale=1.0):
    x = torch.rand(b, 3, h, w, generator=torch.Generator().manual_seed(seed)) * scale
    return x if fmt == "channels_first" else x.permute(0, 2, 3, 1).contiguous()


def one_hot(b=8, classes=5, seed=0):
    y = torch.randint(0, classes, (b,), generator=torch.Generator().manual_seed(seed))
    return torch.nn.functional.one_hot(y, classes).float()


# ------------------------------------------------------------------- Beta draws
def gamma_cdf(x: np.ndarray, a: float) -> np.ndarray:
    """Gamma(a, 1)'s CDF: the regularized lower incomplete gamma P(a, x) (torch's)."""
    return torch.special.gammainc(torch.tensor(a, dtype=torch.float64), torch.from_numpy(x)).numpy()


def symmetric_beta_cdf(x: np.ndarray, a: float) -> np.ndarray:
    """Beta(a, a)'s CDF, the regularized incomplete beta I_x(a, a), by DLMF 8.17.8:
    I_x(a, b) = x^a (1 - x)^b / (a B(a, b)) * 2F1(a + b, 1; a + 1; x), whose series
    converges at least like 2^-n for x <= 1/2; I_x(a, a) = 1 - I_(1-x)(a, a) above 1/2."""
    low = np.minimum(x, 1 - x)[:, None]
    n = np.arange(400)
    terms = np.cumprod(np.where(n == 0, 1.0, (2 * a + n - 1) / (a + n) * low), axis=1)
    log_beta = 2 * math.lgamma(a) - math.lgamma(2 * a)
    lower = np.exp(a * np.log(low[:, 0]) + a * np.log1p(-low[:, 0]) - log_beta) / a
    lower = lower * terms.sum(axis=1)
    return np.where(x <= 0.5, lower, 1 - lower)


def ks_statistic(sample: np.ndarray, cdf: np.ndarray) -> float:
    """Kolmogorov-Smirnov distance of a sorted sample's ECDF from ``cdf`` at its points."""
    n = len(sample)
    return float(max((np.arange(1, n + 1) / n - cdf).max(), (cdf - np.arange(n) / n).max()))


# ----------------------------------------------------------------------- MixUp
def keras_mixup(fmt, x, y, draw):
    """Keras's MixUp of images ``x`` and labels ``y`` for our draw (weights, partners)."""
    theirs = keras().layers.MixUp(alpha=0.4, data_format=fmt)
    images = np.asarray(theirs.transform_images(x, draw))
    return images, np.asarray(theirs.transform_labels(y, draw))


# ---------------------------------------------------------------------- CutMix
def keras_cutmix(fmt, x, seg, permutation, corners):
    """Keras's CutMix of images ``x`` and masks ``seg`` for our draw (partners, float
    corners whose window is Keras's own ``_generate_batch_mask``), and its label weights."""
    theirs = keras().layers.CutMix(factor=(0.5, 1.0), data_format=fmt)
    c = corners
    masks, weight = theirs._generate_batch_mask(x.shape, (c[:, 0], c[:, 1], c[:, 2], c[:, 3]))
    draw = {"permutation_order": permutation, "batch_masks": masks}
    return {
        "images": np.asarray(theirs.transform_images(x, draw)),
        "label_weight": np.asarray(weight).reshape(-1),
        "masks": np.asarray(theirs.transform_segmentation_masks(seg, draw)),
    }


# ------------------------------------------------------------------ both layers
LAYERS = {
    "mixup": lambda **k: pp.MixUp(alpha=0.5, **k),
    "cutmix": lambda **k: pp.CutMix(**k),
}


def test_reference_cdfs_have_their_known_values():
    # Closed forms: Gamma(1) is Exp(1); Beta(1, 1) is uniform; Beta(1/2, 1/2) is the
    # arcsine law 2/pi asin(sqrt(x)); Beta(2, 2) is 3x^2 - 2x^3.
    x = np.linspace(0.01, 0.99, 99)
    np.testing.assert_allclose(gamma_cdf(x * 5, 1.0), 1 - np.exp(-x * 5), rtol=1e-12)
    np.testing.assert_allclose(symmetric_beta_cdf(x, 1.0), x, rtol=1e-12)
    arcsine = 2 / np.pi * np.arcsin(np.sqrt(x))
    np.testing.assert_allclose(symmetric_beta_cdf(x, 0.5), arcsine, rtol=1e-12)
    np.testing.assert_allclose(symmetric_beta_cdf(x, 2.0), 3 * x**2 - 2 * x**3, rtol=1e-12)


@pytest.mark.parametrize("alpha", [0.05, 0.2, 1.0, 2.5])
def test_gamma_and_beta_draws_follow_their_distributions(alpha):
    n = 20000
    # 1.95 / sqrt(n): Kolmogorov's asymptotic critical distance at the 1e-3 level, 1.63 at 1%
    g = torch.Generator().manual_seed(0)
    z, u = torch.randn(10, n, generator=g), torch.rand(11, n, generator=g)
    log_g = log_standard_gamma(torch.full((n,), alpha), z, u[:-1], u[-1])
    sample = np.sort(log_g.double().exp().numpy())
    assert ks_statistic(sample, gamma_cdf(sample, alpha)) < 1.95 / np.sqrt(n)
    lam = pp.MixUp(alpha=alpha, seed=1)._beta(torch.full((n,), alpha), torch.device("cpu"), None)
    assert lam.dtype == torch.float32 and bool(((lam >= 0) & (lam <= 1)).all())
    # float32 holds values down to 1e-38 near 0 but rounds everything within 6e-8 of 1 to
    # 1.0, so the test compares Beta's CDF only away from 1: a KS statistic over a grid.
    grid = np.linspace(1e-4, 1 - 1e-4, 2001)
    ecdf = np.searchsorted(np.sort(lam.double().numpy()), grid, side="right") / n
    assert np.abs(ecdf - symmetric_beta_cdf(grid, alpha)).max() < 1.63 / np.sqrt(n)
    assert abs(lam.mean().item() - 0.5) < 0.01


def test_beta_of_tiny_shapes_is_zero_or_one_without_nan():
    # CutMix's alpha can be 1e-6 (U(0, 1) + 1e-6): then lam is 0 or 1, never 0 / 0.
    layer = pp.CutMix(seed=0)
    lam = layer._beta(torch.full((5000,), 1e-6), torch.device("cpu"), None)
    assert not lam.isnan().any()
    assert bool(((lam < 1e-6) | (lam > 1 - 1e-6)).all())
    assert abs((lam > 0.5).float().mean().item() - 0.5) < 0.03


def test_permutation_is_a_uniform_permutation_per_call():
    layer = pp.MixUp(seed=0)
    x = torch.zeros(4, 1, 2, 2)
    seen = {}
    for _ in range(2400):
        perm = tuple(layer.get_random_transformation(x)["permutation_order"].tolist())
        seen[perm] = seen.get(perm, 0) + 1
    assert all(sorted(p) == [0, 1, 2, 3] for p in seen)
    assert len(seen) == 24 and min(seen.values()) > 60  # 100 expected each (sd ~10)


@pytest.mark.parametrize("fmt", FORMATS)
def test_mixup_matches_keras_transform_for_the_same_draw(ref, fmt):
    x, y = images(fmt=fmt, scale=255.0), one_hot()
    ours = pp.MixUp(alpha=0.4, seed=3, data_format=fmt)
    params = ours.get_random_transformation(x)
    kparams = {k: params[k].numpy() for k in ("mix_weight", "permutation_order")}
    got = ours.transform_images(x, params)
    expected, labels = ref(keras_mixup, fmt, x.numpy(), y.numpy(), kparams)
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-4, rtol=0)
    np.testing.assert_allclose(ours.transform_labels(y, params).numpy(), labels, atol=1e-6, rtol=0)
    assert_changed(got, x)


def test_mixup_images_and_labels_share_the_weight_and_partner():
    b = 16
    x = torch.arange(b, dtype=torch.float32).view(b, 1, 1, 1).expand(b, 3, 4, 4)
    y = torch.eye(b)
    out = pp.MixUp(alpha=1.0, seed=2)({"images": x, "labels": y})
    # image i is lam * i + (1 - lam) * j, labels lam at i and 1 - lam at j
    for i in range(b):
        row = out["labels"][i]
        value = float((row * torch.arange(b)).sum())
        assert out["images"][i].unique().numel() == 1
        assert abs(float(out["images"][i, 0, 0, 0]) - value) < 1e-4
        assert abs(float(row.sum()) - 1.0) < 1e-6 and int((row > 0).sum()) <= 2


def test_mixup_boxes_concatenate_partner_boxes_masks_blend_keypoints_refused():
    x = torch.rand(3, 3, 8, 8)
    boxes = torch.tensor([[[0.0, 0, 2, 2]], [[1.0, 1, 3, 3]], [[2.0, 2, 4, 4]]])
    data = {
        "images": x,
        "bounding_boxes": {"boxes": boxes, "labels": torch.tensor([[0], [1], [2]])},
        "segmentation_masks": torch.arange(3, dtype=torch.uint8).view(3, 1, 1).expand(3, 8, 8),
    }
    layer = pp.MixUp(alpha=1.0, seed=5)
    params = layer.get_random_transformation(x)
    perm, lam = params["permutation_order"], params["mix_weight"]
    layer = pp.MixUp(alpha=1.0, seed=5)
    out = layer(data)
    assert out["bounding_boxes"]["boxes"].shape == (3, 2, 4)
    assert torch.equal(out["bounding_boxes"]["boxes"][:, 1], boxes[perm, 0])
    assert torch.equal(out["bounding_boxes"]["labels"][:, 1], perm)
    masks = out["segmentation_masks"]
    assert masks.dtype == torch.float32 and masks.shape == (3, 8, 8)
    torch.testing.assert_close(masks[:, 0, 0], lam * torch.arange(3) + (1 - lam) * perm)
    with pytest.raises(ValueError, match="MixUp: dict key 'keypoints' is not supported"):
        layer({"images": x, "keypoints": torch.zeros(3, 2, 2)})
    with pytest.raises(ValueError, match="MixUp: labels must be floating point"):
        layer({"images": x, "labels": torch.tensor([0, 1, 2])})
    with pytest.raises(ValueError, match="MixUp: labels hold 2 entries for 3 images"):
        layer({"images": x, "labels": torch.eye(2)})


@pytest.mark.parametrize("fmt", FORMATS)
def test_cutmix_matches_keras_transform_for_the_same_draw(ref, fmt):
    x = images(fmt=fmt, scale=255.0)
    ours = pp.CutMix(factor=(0.5, 1.0), seed=4, data_format=fmt)
    params = ours.get_random_transformation(x)
    seg = (x[..., :1] if fmt == "channels_last" else x[:, :1]).to(torch.uint8)
    draw = params["permutation_order"].numpy(), params["corners"].numpy()
    theirs = ref(keras_cutmix, fmt, x.numpy(), seg.numpy(), *draw)
    got = ours.transform_images(x, params)
    assert_within(got.numpy(), theirs["images"], 0.0)  # pasted pixels: copies, bound 0
    assert_changed(got, x)
    # Keras's weights are the float area: within a one-pixel border of the exact count.
    h, w = 12, 10
    diff = np.abs(params["label_weight"].numpy() - theirs["label_weight"])
    assert (diff <= (h + w + 1) / (h * w)).all()
    # masks: Keras pastes them like images (as floats, broadcast to the images' channel
    # count); ours keep their dtype and channel count
    expected = theirs["masks"]
    expected = expected[..., :1] if fmt == "channels_last" else expected[:, :1]
    got_seg = ours.transform_segmentation_masks(seg, params)
    assert got_seg.dtype == torch.uint8
    np.testing.assert_array_equal(got_seg.numpy(), expected.astype(np.uint8))


@pytest.mark.parametrize("fmt", FORMATS)
def test_cutmix_label_weight_is_the_pasted_pixel_count(fmt):
    b, h, w = 32, 13, 11
    x = torch.arange(b, dtype=torch.float32).view(b, 1, 1, 1).expand(b, 2, h, w)
    x = x if fmt == "channels_first" else x.permute(0, 2, 3, 1)
    layer = pp.CutMix(seed=7, data_format=fmt)
    params = layer.get_random_transformation(x)
    out = layer._apply_targets({"images": x, "labels": torch.eye(b)}, x, False, params)
    perm = params["permutation_order"]
    img = out["images"] if fmt == "channels_first" else out["images"].permute(0, 3, 1, 2)
    for i in range(b):
        j = int(perm[i])
        pasted = int((img[i, 0] == j).sum()) if j != i else 0
        assert bool((img[i] == i).sum() + (img[i] == j).sum() * (j != i) == 2 * h * w)
        if j == i:  # its own partner: the labels stay exactly as they were
            assert torch.equal(out["labels"][i], torch.eye(b)[i])
            continue
        share = torch.tensor(pasted, dtype=torch.float32) / (h * w)
        assert params["label_weight"][i] == 1 - share  # exact in float32
        want = torch.zeros(b)
        want[i] += 1 - share
        want[j] += share
        torch.testing.assert_close(out["labels"][i], want, rtol=0, atol=1e-7)
    assert 0 < int((img != torch.arange(b).view(b, 1, 1, 1)).sum())


def test_cutmix_refuses_boxes_and_keypoints_and_checks_masks():
    layer = pp.CutMix(seed=0)
    x = torch.rand(2, 3, 8, 8)
    boxes = {"boxes": torch.zeros(2, 1, 4), "labels": torch.zeros(2, 1)}
    with pytest.raises(
        ValueError,
        match="CutMix: dict key 'bounding_boxes' is not supported "
        r"\(Keras 3's CutMix raises NotImplementedError",
    ):
        layer({"images": x, "bounding_boxes": boxes})
    with pytest.raises(ValueError, match="CutMix: dict key 'keypoints' is not supported"):
        layer.eval()({"images": x, "keypoints": torch.zeros(2, 1, 2)})
    layer.train()
    with pytest.raises(ValueError, match="CutMix: segmentation_masks must have the images'"):
        layer({"images": x, "segmentation_masks": torch.zeros(2, 4, 4)})


@pytest.mark.parametrize("fmt", FORMATS)
def test_cutmix_host_slices_and_device_select_agree(monkeypatch, fmt):
    x = images(b=16, fmt=fmt)
    layer = pp.CutMix(data_format=fmt)
    for inp in (x, (x * 255).to(torch.uint8)):
        params = layer.get_random_transformation(inp, generator=torch.Generator().manual_seed(3))
        host = layer.transform_images(inp, params)
        masks = layer.transform_segmentation_masks(inp, params)
        monkeypatch.setattr(_regions, "on_host", lambda t: False)
        torch.testing.assert_close(host, layer.transform_images(inp, params), rtol=0, atol=0)
        torch.testing.assert_close(
            masks, layer.transform_segmentation_masks(inp, params), rtol=0, atol=0
        )
        monkeypatch.undo()
        assert host.dtype == torch.float32 and masks.dtype == inp.dtype


@pytest.mark.parametrize("name", sorted(LAYERS))
@pytest.mark.parametrize("fmt", FORMATS)
def test_ranks_formats_dtypes_seeds_and_eval(name, fmt):
    make = lambda **k: LAYERS[name](data_format=fmt, **k)  # noqa: E731
    x, y = images(fmt=fmt), one_hot()
    a = make(seed=5)({"images": x, "labels": y})
    b = make(seed=5)({"images": x, "labels": y})
    assert torch.equal(a["images"], b["images"]) and torch.equal(a["labels"], b["labels"])
    assert not torch.equal(a["images"], make(seed=6)(x))
    torch.testing.assert_close(a["labels"].sum(1), torch.ones(8))
    # one image is its own partner: unchanged, exactly (Keras: unchanged as well)
    single = make(seed=5)({"images": x[0], "labels": y[0]})
    assert torch.equal(single["images"], x[0]) and torch.equal(single["labels"], y[0])
    other = "channels_last" if fmt == "channels_first" else "channels_first"
    perm = (0, 2, 3, 1) if fmt == "channels_first" else (0, 3, 1, 2)
    c = LAYERS[name](data_format=other, seed=5)(x.permute(*perm))
    torch.testing.assert_close(c.permute(*np.argsort(perm)), a["images"], rtol=0, atol=1e-6)
    assert make(seed=5)((x * 255).to(torch.uint8)).dtype == torch.float32
    assert make(seed=5)(x.double()).dtype == torch.float64
    assert make(seed=5, dtype="mixed_bfloat16")(x).dtype == torch.bfloat16
    g = lambda: np.random.default_rng(9)  # noqa: E731
    assert torch.equal(make()(x, generator=g()), make()(x, generator=g()))
    assert torch.equal(x, images(fmt=fmt))  # the input is never written
    layer = make(seed=5).eval()
    out = layer({"images": x, "labels": y})
    assert torch.equal(out["images"], x) and out["labels"] is y


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: pp.MixUp(alpha=0), "MixUp: alpha must be a finite number > 0"),
        (lambda: pp.MixUp(alpha=float("inf")), "MixUp: alpha must be a finite number > 0"),
        (lambda: pp.MixUp(alpha="0.2"), "MixUp: alpha must be a finite number > 0"),
        (lambda: pp.CutMix(factor=1.2), "CutMix: factor must lie in"),
        (lambda: pp.CutMix(factor=(0.8, 0.1)), "CutMix: factor must be a pair"),
        (lambda: pp.CutMix(seed=1.5), "CutMix: seed must be an int"),
    ],
)
def test_bad_arguments_name_themselves(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_compile_fullgraph_matches_eager_with_labels():
    x, y = images(), one_hot()
    for make in LAYERS.values():
        eager = make(seed=2)
        compiled = torch.compile(make(seed=2), fullgraph=True, backend="eager")
        for _ in range(2):
            want, got = eager({"images": x, "labels": y}), compiled({"images": x, "labels": y})
            torch.testing.assert_close(got["images"], want["images"], rtol=0, atol=1e-6)
            torch.testing.assert_close(got["labels"], want["labels"], rtol=0, atol=1e-6)
