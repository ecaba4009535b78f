"""AugMix: per-image chains, Dirichlet/Beta mixing, Keras's op sets."""

import math

import pytest
import torch

import preprocessing as pp
from preprocessing import _augment_ops
from preprocessing.aug_mix import OPS, OPS_ALL


@pytest.mark.parametrize("alpha", [0.001, 0.01, 0.3])
def test_small_alpha_gives_finite_mixing_weights(alpha):
    # Gamma(0.01) draws underflow to 0 in float32 a third of the time: the Dirichlet and
    # Beta were 0 / 0 = NaN for those images (52 of 256 images NaN at alpha=0.01 before).
    layer = pp.AugMix(alpha=alpha, value_range=(0, 1), seed=1)
    x = torch.rand(256, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    params = layer.get_random_transformation(x)
    w, m = params["chain_mixing_weights"], params["weight_sample"]
    assert bool(torch.isfinite(w).all()) and bool(torch.isfinite(m).all())
    torch.testing.assert_close(w.sum(dim=1), torch.ones(256))
    assert bool(((m >= 0) & (m <= 1)).all())
    # Dirichlet(alpha) with alpha << 1 puts almost all weight on one chain in most images
    # (log-gammas ~ log(U) / alpha: two chains come within a factor 9 rarely).
    if alpha <= 0.01:
        assert float((w.max(dim=1).values > 0.9).float().mean()) > 0.85
    out = layer(x)
    assert bool(torch.isfinite(out).all())


def test_mixing_weights_are_dirichlet_and_beta():
    layer = pp.AugMix(num_chains=4, alpha=2.0, seed=0)
    params = layer.get_random_transformation(torch.zeros(4_000, 3, 2, 2))
    w, m = params["chain_mixing_weights"], params["weight_sample"]
    assert w.shape == (4_000, 4) and m.shape == (4_000,)
    torch.testing.assert_close(w.sum(dim=1), torch.ones(4_000))
    # Dirichlet(2, 2, 2, 2): mean 1/4, variance (1/4)(3/4) / (8 + 1); Beta(2, 2): mean 1/2.
    assert float(w.mean()) == pytest.approx(0.25, abs=0.003)
    assert float(w[:, 0].var()) == pytest.approx(0.1875 / 9, rel=0.1)
    assert float(m.mean()) == pytest.approx(0.5, abs=0.01)
    assert float(m.var()) == pytest.approx(0.05, rel=0.1)  # ab / ((a+b)^2 (a+b+1))
    choice = params["layer_idxes"]
    assert choice.shape == (4_000, 12)  # num_chains * chain_depth
    counts = torch.bincount(choice.flatten(), minlength=12).float()
    assert float(counts.min() / counts.max()) > 0.9  # 11 ops and "none", uniformly


def test_ops_follow_keras_op_sets():
    assert tuple(pp.AugMix().ops) == OPS_ALL
    assert tuple(pp.AugMix(all_ops=False).ops) == OPS
    assert "random_contrast" not in OPS and len(OPS) == 7


def test_one_chain_one_step_is_a_blend_of_that_op():
    layer = pp.AugMix(value_range=(0, 1), num_chains=1, chain_depth=1, seed=1)
    x = torch.rand(6, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    params = layer.get_random_transformation(x)
    params["layer_idxes"] = torch.tensor([[3], [5], [11], [0], [10], [11]])  # 11: no op
    out = layer.transform_images(x, params)
    m = params["weight_sample"]
    for i, k in enumerate(params["layer_idxes"][:, 0].tolist()):
        y = x[i : i + 1]
        if k < 11:
            name = OPS_ALL[k]
            p = _augment_ops.take(params["transforms"][0][name], torch.tensor([i]), 6)
            y = layer.ops[name].transform_images(y, p)
        expected = (m[i] * x[i] + (1 - m[i]) * y[0]).clamp(0, 1)
        torch.testing.assert_close(out[i], expected, rtol=0, atol=1e-6)


def test_eval_identity_targets_untouched_and_compiled_path(monkeypatch):
    layer = pp.AugMix(value_range=(0, 1), seed=2)
    x = torch.rand(5, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    masks = torch.ones(5, 8, 8, dtype=torch.uint8)
    out = layer({"images": x, "segmentation_masks": masks})
    assert out["segmentation_masks"] is masks and not torch.equal(out["images"], x)
    assert torch.equal(layer.eval()(x), x)
    layer.train()
    params = layer.get_random_transformation(x)
    eager = layer.transform_images(x, params)
    monkeypatch.setattr(_augment_ops.torch.compiler, "is_compiling", lambda: True)
    torch.testing.assert_close(layer.transform_images(x, params), eager, rtol=0, atol=1e-6)


def test_bad_arguments_name_themselves():
    for kwargs, arg in [
        (dict(num_chains=0), "num_chains"),
        (dict(chain_depth=1.5), "chain_depth"),
        (dict(alpha=0.0), "alpha"),
        (dict(alpha=math.inf), "alpha"),
        (dict(all_ops="yes"), "all_ops"),
        (dict(factor=(0.5, 0.2)), "factor"),
    ]:
        with pytest.raises(ValueError, match=f"AugMix: {arg}"):
            pp.AugMix(**kwargs)
