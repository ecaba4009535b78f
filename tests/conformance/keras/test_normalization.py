"""Keras 3's ``normalization_test.py`` (keras/src/layers/preprocessing/), translated.

Keras's ``axis`` counts positions of the batch tensor (``(1, 2)`` of ``(32, 4, 3, 5)``);
here ``axis`` counts axes of one image from its end (``(-3, -2)``), so it means the same
for one image and a batch (D-K-9). The statistics live in ``mean`` / ``variance`` buffers
shaped to broadcast over one image, ``(C, 1, 1)``-like, where Keras's ``build`` gives
``(1, C)``-like shapes with the batch axis.
"""

import numpy as np
import pytest
import torch

import datapipe as dp
import preprocessing as pp

from ._util import assert_values


def _standardized(out, axis):
    out = out.detach().numpy() if isinstance(out, torch.Tensor) else out
    assert_values(np.var(out, axis=axis), np.ones(np.var(out, axis=axis).shape), atol=1e-5)
    assert_values(np.mean(out, axis=axis), np.zeros(np.mean(out, axis=axis).shape), atol=1e-5)


@pytest.mark.parametrize(
    "kwargs,state",
    [
        ({"axis": -1}, ["mean", "variance"]),
        ({"axis": -1, "mean": [0.5, 0.2, -0.1], "variance": [0.1, 0.2, 0.3]}, ["mean", "variance"]),
        (
            {"axis": -1, "mean": [0.5, 0.2, -0.1], "variance": [0.1, 0.2, 0.3], "invert": True},
            ["mean", "variance"],
        ),
    ],
    ids=["adapt", "fixed", "invert"],
)
def test_normalization_basics(kwargs, state):
    """normalization_test.py::test_normalization_basics: (2, 3) in, (2, 3) out, no
    trainable weights, the statistics in state_dict (Keras: 3 non-trainable weights when
    adapted, the count included; the count is not kept here)."""
    layer = pp.Normalization(**kwargs)
    x = torch.rand(2, 3)
    if "mean" not in kwargs:
        layer.adapt(x)
    out = layer(x)
    assert tuple(out.shape) == (2, 3)
    assert list(layer.parameters()) == [] and sorted(layer.state_dict()) == state
    if kwargs.get("invert"):
        want = x * torch.tensor([0.1, 0.2, 0.3]).sqrt() + torch.tensor([0.5, 0.2, -0.1])
    elif "mean" in kwargs:
        want = (x - torch.tensor([0.5, 0.2, -0.1])) / torch.tensor([0.1, 0.2, 0.3]).sqrt()
    else:
        want = (x - x.mean(0)) / x.var(0, unbiased=False).sqrt()
    assert_values(out, want, atol=1e-6, rtol=1e-5)


def _adapt_inputs(input_type, x, batch):
    if input_type == "np":
        return x
    if input_type == "tensor":
        return torch.as_tensor(x)
    return dp.from_tensor_slices(x).batch(batch)


@pytest.mark.parametrize("input_type", ["np", "tensor", "tf.data"])
def test_normalization_adapt(input_type):
    """normalization_test.py::test_normalization_adapt: (32, 4) rows, then (32, 4, 3, 5)
    with axis (1, 2) of the batch, i.e. (-3, -2) of an image (D-K-9); from numpy, a
    tensor, or a pipeline batched by 8."""
    rng = np.random.default_rng(0)
    x = rng.random((32, 4))
    layer = pp.Normalization()
    layer.adapt(_adapt_inputs(input_type, x, 8))
    _standardized(layer(x), 0)
    x = rng.random((32, 4, 3, 5))
    layer = pp.Normalization(axis=(-3, -2))
    layer.adapt(_adapt_inputs(input_type, x, 8))
    _standardized(layer(x), (0, 3))


def test_call_on_meta_device_after_built():
    """normalization_test.py::test_call_on_meta_device_after_built: an adapted layer
    moved to torch's meta device computes shapes without data."""
    layer = pp.Normalization()
    layer.adapt(np.random.default_rng(1).random((32, 4)))
    out = layer.to("meta")(torch.empty(32, 4, device="meta"))
    assert out.device.type == "meta" and tuple(out.shape) == (32, 4)


@pytest.mark.parametrize("kwargs", [{"mean": 0.5}, {"variance": 0.1}])
def test_normalization_with_mean_only_raises_error(kwargs):
    """normalization_test.py::test_normalization_with_mean_only_raises_error and
    ::test_normalization_with_variance_only_raises_error."""
    with pytest.raises(ValueError, match="mean/variance must both be given or both be None"):
        pp.Normalization(**kwargs)


@pytest.mark.parametrize("axis", [3, -4])
def test_normalization_axis_too_high(axis):
    """normalization_test.py::test_normalization_axis_too_high (3 of a (2, 2) input) and
    ::test_normalization_axis_too_low (-4 of (2, 3, 4)): out of range at construction."""
    with pytest.raises(
        ValueError, match=r"axis must be 'channel', None, or negative ints in \[-3, -1\]"
    ):
        pp.Normalization(axis=axis)


def test_normalization_unknown_axis_shape():
    """normalization_test.py::test_normalization_unknown_axis_shape: a kept axis whose
    size changes between batches cannot have statistics."""
    layer = pp.Normalization(axis=-1)
    with pytest.raises(ValueError, match="the kept axes changed size between batches"):
        layer.adapt([np.zeros((2, 3)), np.zeros((2, 4))])


def test_normalization_adapt_with_incompatible_shape():
    """normalization_test.py::test_normalization_adapt_with_incompatible_shape: a layer
    whose statistics have 5 features refuses an input of 3."""
    layer = pp.Normalization(axis=-1)
    layer.adapt(np.random.default_rng(2).random((10, 5)))
    with pytest.raises(ValueError, match="statistics have 5 entries but the input has 3 features"):
        layer(np.random.default_rng(3).random((10, 3)))


def test_tf_data_compatibility():
    """normalization_test.py::test_tf_data_compatibility: built-in values, then adapted,
    mapped over a pipeline batched by 1."""
    x = np.random.default_rng(4).random((32, 3))
    ds = dp.from_tensor_slices(x).batch(1)
    fixed = pp.Normalization(mean=[0.1, 0.2, 0.3], variance=[0.1, 0.2, 0.3], axis=-1)
    out = next(iter(ds.map(fixed)))
    want = (x[:1] - [0.1, 0.2, 0.3]) / np.sqrt([0.1, 0.2, 0.3])
    assert_values(out, want, atol=1e-6)
    adapted = pp.Normalization(axis=-1)
    adapted.adapt(np.random.default_rng(5).random((32, 3)))
    assert tuple(next(iter(ds.map(adapted))).shape) == (1, 3)


def test_normalization_with_scalar_mean_var():
    """normalization_test.py::test_normalization_with_scalar_mean_var."""
    out = pp.Normalization(mean=3.0, variance=2.0)(np.array([[1, 2, 3]], dtype="float32"))
    assert_values(out, (np.array([[1, 2, 3]]) - 3.0) / np.sqrt(2.0), atol=1e-6)


@pytest.mark.parametrize("kind", ["x", "x_and_y", "x_y_and_weights"])
def test_adapt_pydataset_compat(kind):
    """normalization_test.py::test_adapt_pydataset_compat: a random-access dataset of
    (32, 32, 3) images, alone or with labels (and weights): the first component is
    adapted; 3 channels, channels_last."""
    rng = np.random.default_rng(6)

    def element(i):
        x = rng.random((32, 32, 3))
        y = rng.integers(0, 10, size=(1,))
        return {"x": x, "x_and_y": (x, y), "x_y_and_weights": (x, y, y)}[kind]

    layer = pp.Normalization(data_format="channels_last")
    layer.adapt(element(i) for i in range(100))
    assert layer.mean.shape[-1] == 3 and layer.variance.shape[-1] == 3
    assert tuple(layer(rng.random((1, 32, 32, 3))).shape) == (1, 32, 32, 3)


def test_broadcast_non_scalar_middle_axis():
    """normalization_test.py::test_broadcast_non_scalar_middle_axis: statistics along the
    width of (2, 4, 5, 3) channels_last images (axis 2 there, -2 here) broadcast as
    (1, 5, 1) per image (Keras: (1, 1, 5, 1) with the batch axis)."""
    mean = np.arange(1, 6, dtype="float32")
    layer = pp.Normalization(
        axis=-2, mean=mean, variance=np.ones(5, "float32"), data_format="channels_last"
    )
    assert tuple(layer.mean.shape) == (1, 5, 1)
    assert_values(layer.mean[0, :, 0], mean)
    x = np.random.default_rng(7).random((2, 4, 5, 3))
    assert_values(layer(x), x - mean.reshape(1, 1, 5, 1), atol=1e-6)


def test_broadcast_multiple_axes():
    """normalization_test.py::test_broadcast_multiple_axes: (height, width) kept, (10, 13)."""
    layer = pp.Normalization(
        axis=(-3, -2),
        mean=np.zeros((10, 13)),
        variance=np.ones((10, 13)),
        data_format="channels_last",
    )
    assert tuple(layer.mean.shape) == (10, 13, 1)


def test_broadcast_partial_keep_axis():
    """normalization_test.py::test_broadcast_partial_keep_axis: Keras aligns a 1-D mean
    with the last kept axis and broadcasts over the other; here the statistics must have
    one dim per kept axis (a (1, 5) mean broadcasts over height), and a 1-D mean for two
    kept axes is refused (D-K-9)."""
    with pytest.raises(ValueError, match="must be a number or have 2 dims"):
        pp.Normalization(axis=(-3, -2), mean=np.arange(1.0, 6.0), variance=np.ones(5))
    mean = np.arange(1.0, 6.0).reshape(1, 5)
    layer = pp.Normalization(
        axis=(-3, -2), mean=mean, variance=np.ones((1, 5)), data_format="channels_last"
    )
    x = np.random.default_rng(8).random((2, 7, 5, 3))
    assert_values(layer(x), x - mean.reshape(1, 1, 5, 1), atol=1e-6)


def test_scalar_broadcast():
    """normalization_test.py::test_scalar_broadcast: a scalar mean broadcasts to every
    feature of (3, 7) rows."""
    layer = pp.Normalization(axis=-1, mean=5.0, variance=1.0)
    x = np.random.default_rng(9).random((3, 7))
    assert_values(layer(x), x - 5.0, atol=1e-6)
    assert layer.mean.numel() == 1


def _adapted_on(batches, **kwargs):
    layer = pp.Normalization(**kwargs)
    layer.adapt(batches)
    return layer


def test_adapt_list_of_batches():
    """normalization_test.py::test_adapt_list_of_batches: a list of four (8, 4) batches
    (a list of arrays is read as one batch here, the same 32 rows)."""
    x = np.random.default_rng(10).random((32, 4)).astype("float32")
    _standardized(_adapted_on([x[:8], x[8:16], x[16:24], x[24:32]], axis=-1)(x), 0)


def test_adapt_generator():
    """normalization_test.py::test_adapt_generator."""
    x = np.random.default_rng(11).random((32, 4)).astype("float32")
    _standardized(_adapted_on((x[i : i + 8] for i in range(0, 32, 8)), axis=-1)(x), 0)


def test_adapt_iterable_same_result_as_ndarray():
    """normalization_test.py::test_adapt_iterable_same_result_as_ndarray."""
    x = np.random.default_rng(12).random((64, 5)).astype("float32")
    batches = _adapted_on(iter([x[i : i + 16] for i in range(0, 64, 16)]), axis=-1)
    whole = _adapted_on(x, axis=-1)
    assert_values(batches(x[:10]), whole(x[:10]), atol=1e-5)


def test_adapt_iterable_with_tuples():
    """normalization_test.py::test_adapt_iterable_with_tuples: (x, y) elements."""
    x = np.random.default_rng(13).random((24, 3)).astype("float32")
    layer = _adapted_on(iter([(x[i : i + 8], np.zeros(8)) for i in range(0, 24, 8)]), axis=-1)
    _standardized(layer(x), 0)


def test_adapt_iterable_axis_none():
    """normalization_test.py::test_adapt_iterable_axis_none: one scalar mean/variance of
    (20, 2, 3) rows (a rank-3 batch is one image here: the batches are given as rank-4,
    (5, 1, 2, 3), the same values)."""
    x = np.random.default_rng(14).random((20, 2, 3)).astype("float32")
    layer = _adapted_on(iter([x[i : i + 5, None] for i in range(0, 20, 5)]), axis=None)
    out = layer(x[:, None]).numpy()
    assert_values(np.var(out), 1.0, atol=1e-5)
    assert_values(np.mean(out), 0.0, atol=1e-5)


@pytest.mark.parametrize("data", [[], (b for b in ())], ids=["list", "generator"])
def test_adapt_empty_iterable_raises(data):
    """normalization_test.py::test_adapt_empty_iterable_raises and
    ::test_adapt_empty_generator_raises."""
    with pytest.raises(ValueError, match="data has no elements"):
        pp.Normalization(axis=-1).adapt(iter(data) if isinstance(data, list) else data)


def test_adapt_iterable_incompatible_shape_raises():
    """normalization_test.py::test_adapt_iterable_incompatible_shape_raises."""

    def bad_gen():
        yield np.zeros((8, 4), "float32")
        yield np.zeros((8, 6), "float32")

    with pytest.raises(ValueError, match="kept axes changed size between batches"):
        pp.Normalization(axis=-1).adapt(bad_gen())


def test_adapt_iterable_batch_without_shape_raises():
    """normalization_test.py::test_adapt_iterable_batch_without_shape_raises (Keras: a
    TypeError about ``.shape``; here a ValueError naming the expected ranks: D-K-3)."""

    def gen_no_shape():
        yield 42

    with pytest.raises(ValueError, match="expected rank-1/2 rows of features"):
        pp.Normalization(axis=-1).adapt(gen_no_shape())


def test_adapt_iterable_single_batch():
    """normalization_test.py::test_adapt_iterable_single_batch."""
    x = np.random.default_rng(15).random((16, 4)).astype("float32")
    _standardized(_adapted_on(iter([x]), axis=-1)(x), 0)


def test_adapt_iterable_high_dim_axis_tuple():
    """normalization_test.py::test_adapt_iterable_high_dim_axis_tuple ((1, 2) -> (-3, -2))."""
    x = np.random.default_rng(16).random((32, 4, 3, 5)).astype("float32")
    layer = _adapted_on(iter([x[i : i + 8] for i in range(0, 32, 8)]), axis=(-3, -2))
    _standardized(layer(x), (0, 3))


def test_adapt_iterator_of_batches():
    """normalization_test.py::test_adapt_iterator_of_batches."""
    x = np.random.default_rng(17).random((24, 3)).astype("float32")
    _standardized(_adapted_on(iter([x[i : i + 6] for i in range(0, 24, 6)]), axis=-1)(x), 0)


def test_adapt_grain_dataset():
    """normalization_test.py::test_adapt_grain_dataset (a datapipe Dataset batched by 8)."""
    x = np.random.default_rng(18).random((24, 3)).astype("float32")
    _standardized(_adapted_on(dp.from_tensor_slices(x).batch(8), axis=-1)(x), 0)


def test_adapt_tf_dataset_with_labels():
    """normalization_test.py::test_adapt_tf_dataset_with_labels: (x, y) batches; constant
    features have mean 1 and variance 0."""
    x, y = np.ones((32, 3), "float32"), np.ones((32,), "int32")
    layer = _adapted_on(dp.from_tensor_slices((x, y)).batch(8))
    assert_values(layer.mean.squeeze(), np.ones(3))
    assert_values(layer.variance.squeeze(), np.zeros(3))
