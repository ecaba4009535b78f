"""Normalization: adapt accuracy (Chan merge in float64), inputs, state_dict, axis."""

import numpy as np
import pytest
import torch

import preprocessing as pp


def test_adapt_matches_numpy_for_large_values():
    rng = np.random.default_rng(0)
    data = (1e4 + rng.standard_normal((300, 3, 8, 8))).astype(np.float32)
    norm = pp.Normalization()
    norm.adapt(data, batch_size=7)  # many uneven batches to exercise the merge
    ref = data.astype(np.float64)
    np.testing.assert_allclose(norm.mean.flatten(), ref.mean(axis=(0, 2, 3)), rtol=1e-6)
    np.testing.assert_allclose(norm.variance.flatten(), ref.var(axis=(0, 2, 3)), rtol=1e-6)
    assert norm.mean.shape == (3, 1, 1) and norm.mean.dtype == torch.float64


def test_adapt_float16_tensor_channels_last():
    rng = np.random.default_rng(1)
    data = torch.from_numpy(rng.uniform(0, 60000, (50, 6, 6, 2))).to(torch.float16)
    norm = pp.Normalization(data_format="channels_last")
    norm.adapt(data, batch_size=16)
    ref = data.double().numpy()
    np.testing.assert_allclose(norm.mean.flatten(), ref.mean(axis=(0, 1, 2)), rtol=1e-6)
    np.testing.assert_allclose(norm.variance.flatten(), ref.var(axis=(0, 1, 2)), rtol=1e-6)
    out = norm(data[:4].float())
    assert out.shape == (4, 6, 6, 2)


def test_adapt_iterable_of_tuples_and_steps():
    rng = np.random.default_rng(2)
    images = rng.random((10, 2, 4, 4))
    elements = [(images[i], i) for i in range(10)]  # (image, label) like a Dataset
    norm = pp.Normalization()
    norm.adapt(elements)
    np.testing.assert_allclose(norm.mean.flatten(), images.mean(axis=(0, 2, 3)), rtol=1e-6)
    norm.adapt(iter(elements), steps=3)
    np.testing.assert_allclose(norm.mean.flatten(), images[:3].mean(axis=(0, 2, 3)), rtol=1e-6)


def test_adapt_scalar_and_custom_axes():
    data = np.random.default_rng(3).random((20, 3, 4, 5))
    scalar = pp.Normalization(axis=None)
    scalar.adapt(data, batch_size=6)
    np.testing.assert_allclose(float(scalar.mean.flatten()[0]), data.mean(), rtol=1e-6)
    assert scalar.mean.shape == (1, 1, 1)
    hw = pp.Normalization(axis=[-2, -1])
    hw.adapt(data)
    np.testing.assert_allclose(hw.variance[0].numpy(), data.var(axis=(0, 1)), rtol=1e-6)


def test_forward_and_invert_and_zero_variance():
    # Zero variance: the feature is only centred (scale 1, scikit-learn's StandardScaler),
    # not divided by Keras's 1e-7 floor; a tiny non-zero variance keeps Keras's floor.
    norm = pp.Normalization(mean=[1.0, 2.0, 0.0], variance=[4.0, 0.0, 1e-20])
    x = torch.tensor([[[3.0]], [[7.0]], [[1e-7]]], dtype=torch.float64)
    out = norm(x)
    assert torch.allclose(out, torch.tensor([[[1.0]], [[5.0]], [[1.0]]], dtype=torch.float64))
    back = pp.Normalization(mean=[1.0, 2.0, 0.0], variance=[4.0, 0.0, 1e-20], invert=True)(out)
    assert torch.allclose(back, x, atol=1e-12)


def test_uint8_input_gives_float32():
    norm = pp.Normalization(mean=127.5, variance=127.5**2)
    out = norm(torch.tensor([[[0, 255]]], dtype=torch.uint8))
    assert out.dtype == torch.float32 and out.tolist() == [[[-1.0, 1.0]]]


def test_state_dict_carries_statistics_into_unadapted_layer():
    norm = pp.Normalization()
    norm.adapt(np.random.default_rng(4).random((8, 3, 4, 4)))
    fresh = pp.Normalization()
    fresh.load_state_dict(norm.state_dict())
    assert torch.equal(fresh.mean, norm.mean) and torch.equal(fresh.variance, norm.variance)
    x = torch.rand(2, 3, 4, 4)
    assert torch.equal(fresh(x), norm(x))


def test_errors():
    with pytest.raises(ValueError, match="Normalization: no statistics; call adapt"):
        pp.Normalization()(torch.zeros(3, 2, 2))
    with pytest.raises(ValueError, match="Normalization.adapt: data has no elements"):
        pp.Normalization().adapt([])
    with pytest.raises(
        ValueError, match=r"Normalization.adapt: expected rank-1/2 rows .* \(1, 2, 3, 4, 4\)"
    ):
        pp.Normalization().adapt([np.zeros((1, 2, 3, 4, 4))])
    with pytest.raises(ValueError, match="Normalization.adapt: the kept axes changed size"):
        pp.Normalization().adapt([np.zeros((3, 2, 2)), np.zeros((4, 2, 2))])
