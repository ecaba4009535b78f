"""Normalization: adapt accuracy (Chan merge in float64), inputs, state_dict, axis, tabular
rows, statistics from checkpoints, and against Keras 3.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _layer_helpers import img, keras_batch, keras_outcomes
from differential import keras

import preprocessing as pp


def keras_normalization_adapted(x):
    theirs = keras().layers.Normalization(axis=-1)
    theirs.adapt(x)
    return np.asarray(theirs(x))


def test_normalization_tabular_keeps_image_rules():
    norm = pp.Normalization(mean=[1.0, 10.0], variance=[4.0, 0.0])
    # Zero variance: centred only (issue 11's rule) on tables too.
    assert norm(torch.tensor([[3.0, 15.0]])).tolist() == [[1.0, 5.0]]
    assert norm(np.array([5.0, 10.0], dtype=np.float32)).tolist() == [2.0, 0.0]
    with pytest.raises(ValueError, match="2 entries but the input has 3 features"):
        norm(torch.ones(4, 3))
    with pytest.raises(ValueError, match="tabular"):
        pp.Normalization(axis=-2, mean=1.0, variance=1.0)(torch.ones(2, 3))
    # An image still normalises per channel.
    image = torch.stack([torch.full((2, 2), 3.0), torch.full((2, 2), 20.0)])
    assert norm(image)[:, 0, 0].tolist() == [1.0, 10.0]


def test_normalization_channels_last_matches_keras_adapt(ref):
    x = keras_batch(fmt="channels_last") * 100
    ours = pp.Normalization(data_format="channels_last")
    ours.adapt(x)
    expected = ref(keras_normalization_adapted, x)
    np.testing.assert_allclose(ours(torch.from_numpy(x)).numpy(), expected, atol=1e-4, rtol=0)


def test_normalization_tabular(ref):
    rng = np.random.default_rng(0)
    x = (rng.normal(size=(500, 4)) * [1, 10, 100, 0] + [0, 5, -3, 2]).astype(np.float32)
    theirs = ref(keras_outcomes, "Normalization", dict(axis=-1), [x], x)["outcomes"][0]
    ours = pp.Normalization(axis=-1)
    ours.adapt(x, batch_size=64)  # streamed: Chan's merge gives the same moments
    # The constant 4th feature: Keras divides 0 by its 1e-7 floor too, giving 0.
    np.testing.assert_allclose(ours(x).numpy(), theirs, atol=2e-6)
    theirs = ref(keras_outcomes, "Normalization", dict(axis=None), [x], x)["outcomes"][0]
    ours = pp.Normalization(axis=None)
    ours.adapt(x)
    np.testing.assert_allclose(ours(x).numpy(), theirs, atol=2e-6)
    kw = dict(mean=[1.0, 2.0], variance=[4.0, 1.0], invert=True)
    y = np.array([[1.0, 1.0], [0.0, -2.0]], dtype=np.float32)
    theirs = ref(keras_outcomes, "Normalization", kw, [y])["outcomes"][0]
    np.testing.assert_allclose(pp.Normalization(**kw)(y).numpy(), theirs)


# ---- statistics and vocabularies go through the constructor's checks ----------------------
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_normalization_adapt_refuses_non_finite_data_and_keeps_its_statistics(bad):
    layer = pp.Normalization(axis=-1)
    layer.adapt(np.array([[1.0, 2.0], [3.0, 4.0]]))
    before = (layer.mean.clone(), layer.variance.clone(), layer.get_config())
    data = np.array([[1.0, 2.0], [bad, 4.0]])
    with pytest.raises(ValueError, match=r"Normalization: the adapted mean must be finite \(the "
                       r"data holds NaN or inf"):  # fmt: skip
        layer.adapt(data)
    assert torch.equal(layer.mean, before[0]) and torch.equal(layer.variance, before[1])
    assert layer.get_config() == before[2]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda sd: sd["mean"].fill_(float("nan")), "state_dict's mean must be finite"),
        (lambda sd: sd["variance"].fill_(-1.0), "state_dict's variance must be finite and >= 0"),
        (lambda sd: sd.update(mean=torch.zeros(1, 2, 2, dtype=torch.float64)),
         r"must have the same shape"),
        (lambda sd: sd.update(mean=torch.zeros(3, 2, 1, dtype=torch.float64),
                              variance=torch.ones(3, 2, 1, dtype=torch.float64)),
         r"size 1 off the kept axes \(0,\)"),
    ],
)  # fmt: skip
def test_normalization_load_state_dict_refuses_bad_statistics(change, message):
    src = pp.Normalization()
    src.adapt(torch.rand(4, 3, 5, 5))
    sd = {k: v.clone() for k, v in src.state_dict().items()}
    change(sd)
    dst = pp.Normalization(mean=[1.0, 2.0, 3.0], variance=[1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=message):
        dst.load_state_dict(sd)
    assert dst.mean.reshape(-1).tolist() == [1.0, 2.0, 3.0]  # unchanged


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: pp.Normalization(axis=1), "Normalization: axis"),
        (lambda: pp.Normalization(mean=1.0), "Normalization: mean/variance"),
    ],
)
def test_bad_arguments_name_layer_and_argument(build, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("/", "/")):
        build()


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


# A 1-channel input used to broadcast against 3-channel statistics and come back with 3
# channels; a 2-channel one raised torch's RuntimeError, not the documented ValueError.
@pytest.mark.parametrize("channels", [1, 2])
def test_normalization_rejects_input_whose_kept_axis_does_not_match(channels):
    norm = pp.Normalization(mean=[1.0, 2.0, 3.0], variance=[1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="Normalization: the statistics have 3 entries"):
        norm(img(b=4, c=channels, h=8, w=8))
    hw = pp.Normalization(axis=[-2, -1])
    hw.adapt(np.random.default_rng(0).random((4, 3, 4, 5)))
    with pytest.raises(ValueError, match="input has 1"):
        hw(torch.rand(2, 3, 1, 5))


def test_normalization_scalar_statistics_still_broadcast_to_any_channels():
    norm = pp.Normalization(mean=1.0, variance=4.0)
    assert norm(img(b=4, c=5, h=8, w=8)).shape == (4, 5, 8, 8)
    last = pp.Normalization(mean=[1.0, 2.0], variance=[1.0, 4.0], data_format="channels_last")
    assert last(torch.ones(3, 3, 2)).shape == (3, 3, 2)


# Zero-sized images gave NaN statistics (one batch) or ZeroDivisionError (several).
def test_adapt_skips_empty_batches_and_fails_clearly_when_all_are_empty():
    norm = pp.Normalization()
    for batch_size in (None, 2):
        with pytest.raises(ValueError, match="data has no elements"):
            norm.adapt(np.zeros((5, 3, 0, 0)), batch_size=batch_size)
    data = np.random.default_rng(1).random((6, 3, 4, 4))
    norm.adapt([np.zeros((0, 3, 4, 4)), data[:3], np.zeros((0, 3, 4, 4)), data[3:]])
    np.testing.assert_allclose(norm.mean.flatten(), data.mean(axis=(0, 2, 3)), rtol=1e-6)


# A negative variance gave NaN outputs at call time.
@pytest.mark.parametrize(
    ("mean", "variance", "message"),
    [(0.0, -1.0, "variance must be finite and >= 0"), (float("nan"), 1.0, "mean must be finite")],
)
def test_normalization_rejects_bad_fixed_statistics(mean, variance, message):
    with pytest.raises(ValueError, match=message):
        pp.Normalization(mean=mean, variance=variance)


# A dict element (or any non-array) failed with torch's "can't convert np.ndarray of
# type numpy.object_", which names neither the layer nor what an element may be.
def test_adapt_names_the_accepted_element_forms():
    with pytest.raises(ValueError, match="Normalization.adapt: an element must be an image"):
        pp.Normalization().adapt([{"image": np.zeros((3, 2, 2))}])
