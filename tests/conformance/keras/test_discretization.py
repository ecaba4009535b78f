"""Keras 3's ``discretization_test.py`` (keras/src/layers/preprocessing/), translated.

Upstream's symbolic-shape tests (``compute_output_shape``, ``Input``) become eager calls
with a batch of 2: the shapes they assert are the eager output's shapes.
"""

import numpy as np
import pytest
import torch

import datapipe as dp
import preprocessing as pp

from ._util import assert_values


def test_discretization_basics():
    """discretization_test.py::test_discretization_basics: (2, 3) in, (2, 3) int32 out, no
    trainable state (the boundaries are one buffer, in state_dict)."""
    layer = pp.Discretization(bin_boundaries=[0.0, 0.5, 1.0])
    out = layer(torch.rand(2, 3))
    assert out.shape == (2, 3) and out.dtype == torch.int32
    assert list(layer.parameters()) == []
    assert list(layer.state_dict()) == ["bin_boundaries"]


def test_adapt_flow():
    """discretization_test.py::test_adapt_flow."""
    layer = pp.Discretization(num_bins=4)
    layer.adapt(np.random.default_rng(0).random((32, 3)))
    out = layer(np.array([[0.0, 0.1, 0.3]]))
    assert out.dtype == torch.int32
    assert len(layer.bin_boundaries) == 3


def test_adapt_with_generator():
    """discretization_test.py::test_adapt_with_generator."""
    rng = np.random.default_rng(1)

    def data_gen():
        for _ in range(5):
            yield rng.uniform(0, 10, size=(20,))

    layer = pp.Discretization(num_bins=4)
    layer.adapt(data_gen())
    assert len(layer.bin_boundaries) == 3
    assert layer(np.array([[1.0, 5.0, 9.0]])).shape == (1, 3)


def test_adapt_with_infinite_generator_and_steps():
    """discretization_test.py::test_adapt_with_infinite_generator_and_steps."""
    rng = np.random.default_rng(2)
    seen = []

    def data_gen():
        while True:
            seen.append(1)
            yield rng.uniform(0, 10, size=(20,))

    layer = pp.Discretization(num_bins=4)
    layer.adapt(data_gen(), steps=5)
    assert len(layer.bin_boundaries) == 3
    assert len(seen) == 5  # steps batches read, no more


def test_adapt_with_list_of_arrays():
    """discretization_test.py::test_adapt_with_list_of_arrays: a list of two batches
    (Keras reads each array as a batch; here a list of arrays is one array-like batch of
    shape (2, 3), which gives the same six values)."""
    layer = pp.Discretization(num_bins=3)
    layer.adapt([np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0])])
    assert len(layer.bin_boundaries) == 2


def test_adapt_with_grain_dataset():
    """discretization_test.py::test_adapt_with_grain_dataset: a batched random-access
    source, here a datapipe Dataset of 10 windows of 10 values, batched by 5."""
    raw = np.random.default_rng(3).uniform(0, 10, size=(100,)).astype("float32")
    ds = dp.range(10).map(lambda i: raw[int(i) : int(i) + 10]).batch(5)
    layer = pp.Discretization(num_bins=4)
    layer.adapt(ds)
    assert len(layer.bin_boundaries) == 3


CORRECTNESS = [
    ("int", [[-1.0, 0.0, 0.1, 0.8, 1.2]], [[0, 1, 1, 2, 3]]),
    ("one_hot", [0.1, 0.8], [[0, 1, 0, 0], [0, 0, 1, 0]]),
    ("multi_hot", [[0.1, 0.8]], [[0, 1, 1, 0]]),
    (
        "one_hot",
        [[[0.15, 0.75], [0.85, 0.45]]],
        [
            [
                [[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]],
                [[0.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0]],
            ]
        ],
    ),
    ("multi_hot", [[[0.15, 0.75], [0.85, 0.45]]], [[[0.0, 1.0, 1.0, 0.0], [0.0, 1.0, 1.0, 0.0]]]),
    ("count", [[0.1, 0.8, 0.9]], [[0, 1, 2, 0]]),
]
IDS = ["int", "one_hot_rank_1", "multi_hot_rank_2", "one_hot_rank_3", "multi_hot_rank_3", "count"]


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("output_mode,input_array,expected", CORRECTNESS, ids=IDS)
def test_correctness(output_mode, input_array, expected, sparse):
    """discretization_test.py::test_correctness (every case, dense and sparse; upstream
    skips int with sparse, which raises: checked here)."""
    kwargs = dict(bin_boundaries=[0.0, 0.5, 1.0], output_mode=output_mode, sparse=sparse)
    if output_mode == "int" and sparse:
        with pytest.raises(ValueError, match="sparse needs output_mode other than 'int'"):
            pp.Discretization(**kwargs)
        return
    out = pp.Discretization(**kwargs)(np.array(input_array))
    assert out.is_sparse == sparse
    assert_values(out, expected)


def test_tf_data_compatibility():
    """discretization_test.py::test_tf_data_compatibility: fixed bins eagerly and in a
    pipeline's map, then an adapted layer in a pipeline."""
    layer = pp.Discretization(bin_boundaries=[0.0, 0.35, 0.5, 1.0], dtype="float32")
    x = np.array([[-1.0, 0.0, 0.1, 0.2, 0.4, 0.5, 1.0, 1.2, 0.98]])
    expected = [[0, 1, 1, 1, 2, 3, 4, 4, 3]]
    assert_values(layer(x), expected)
    out = next(iter(dp.from_tensor_slices(x).batch(1).map(layer)))
    assert_values(out, expected)
    adapted = pp.Discretization(num_bins=4)
    adapted.adapt(np.random.default_rng(4).random((32, 3)))
    ds = dp.from_tensor_slices(np.array([[0.0, 0.1, 0.3]])).batch(1).map(adapted)
    assert next(iter(ds)).shape == (1, 3)


def test_serialization():
    """discretization_test.py::test_serialization: before adapt, adapted below and at
    num_bins, and with bin_boundaries: get_config -> from_config -> the same config."""
    layer = pp.Discretization(num_bins=5)
    configs = [layer.get_config()]
    layer.adapt(np.array([0.0, 1.0, 5.0]))
    configs.append(layer.get_config())
    layer.adapt(np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]))
    configs.append(layer.get_config())
    configs.append(pp.Discretization(bin_boundaries=[0.0, 0.35, 0.5, 1.0]).get_config())
    for config in configs:
        assert pp.Discretization.from_config(config).get_config() == config
    assert configs[0]["bin_boundaries"] is None
    assert len(configs[2]["bin_boundaries"]) == 4


def test_saving(tmp_path):
    """discretization_test.py::test_saving: a ``.keras`` file there; the torch equivalent
    here, ``state_dict`` through ``torch.save`` into a layer rebuilt from its config."""
    x = np.array([[-1.0, 0.0, 0.1, 0.2, 0.4, 0.5, 1.0, 1.2, 0.98]])
    fixed = pp.Discretization(bin_boundaries=[0.0, 0.35, 0.5, 1.0])
    adapted = pp.Discretization(num_bins=4)
    adapted.adapt(np.random.default_rng(5).random((32, 3)))
    ref = adapted(np.random.default_rng(6).random((1, 2)))
    for layer, inputs, want in [(fixed, x, [[0, 1, 1, 1, 2, 3, 4, 4, 3]]), (adapted, None, ref)]:
        torch.save(layer.state_dict(), tmp_path / "layer.pt")
        restored = (
            pp.Discretization(num_bins=4)
            if inputs is None
            else pp.Discretization(bin_boundaries=[0.0])
        )
        restored.load_state_dict(torch.load(tmp_path / "layer.pt"))
        got = restored(x if inputs is not None else np.random.default_rng(6).random((1, 2)))
        assert_values(got, want)


def test_init_num_bins_and_bin_boundaries_raises():
    """discretization_test.py::test_init_num_bins_and_bin_boundaries_raises."""
    with pytest.raises(ValueError, match="exactly one of the two must be set"):
        pp.Discretization(num_bins=3, bin_boundaries=[0.0, 1.0])
    with pytest.raises(ValueError, match="exactly one of the two must be set"):
        pp.Discretization()


def test_call_before_adapt_raises():
    """discretization_test.py::test_call_before_adapt_raises."""
    with pytest.raises(ValueError, match="call adapt"):
        pp.Discretization(num_bins=3)([[0.1, 0.8, 0.9]])


def test_model_call_vs_predict_consistency():
    """discretization_test.py::test_model_call_vs_predict_consistency: the layer inside a
    model, eager and exported (torch.export), gives the same int values and dtype."""
    layer = pp.Discretization(bin_boundaries=[-0.5, 0, 0.1, 0.2, 3], output_mode="int")
    x = torch.tensor([[0.0, 0.15, 0.21, 0.3], [0.0, 0.17, 0.451, 7.8]])
    model = torch.nn.Sequential(layer).eval()
    eager = model(x)
    exported = torch.export.export(model, (x,)).module()(x)
    assert eager.dtype == exported.dtype == torch.int32
    assert_values(eager, [[2, 3, 4, 4], [2, 3, 4, 5]])
    assert_values(exported, eager)


SHAPES = [  # (output_mode, boundaries, per-sample input shape, per-sample output shape)
    ("int", [0.0, 1.0, 2.0, 5.0], (3, 4), (3, 4)),
    ("one_hot", [0.0, 1.0, 2.0, 5.0], (3, 4), (3, 4, 5)),
    ("multi_hot", [0.0, 1.0, 2.0, 5.0], (3, 4), (4, 5)),
    ("count", [0.0, 1.0, 2.0, 5.0], (3, 4), (4, 5)),
]


@pytest.mark.parametrize("output_mode,bounds,sample,expected", SHAPES)
def test_symbolic_tensor_output_shape(output_mode, bounds, sample, expected):
    """discretization_test.py::test_symbolic_tensor_output_shape: the eager shapes of a
    batch of 2 (Keras's rank-3 rule: multi_hot/count reduce axis 1)."""
    layer = pp.Discretization(bin_boundaries=bounds, output_mode=output_mode)
    x = np.random.default_rng(7).uniform(0, 3, size=(2, *sample))
    assert tuple(layer(x).shape) == (2, *expected)


@pytest.mark.parametrize(
    "output_mode,expected",
    [("int", (3, 4)), ("one_hot", (3, 4, 3)), ("multi_hot", (4, 3)), ("count", (4, 3))],
)
def test_compute_output_shape_modes(output_mode, expected):
    """discretization_test.py::test_compute_output_shape_modes, eagerly on (2, 3, 4)."""
    layer = pp.Discretization(bin_boundaries=[0.0, 1.0], output_mode=output_mode)
    assert tuple(layer(np.zeros((2, 3, 4))).shape) == (2, *expected)


def test_compute_output_shape_edge_cases():
    """discretization_test.py::test_compute_output_shape_edge_cases: a trailing axis of 1
    is replaced by the one-hot depth; a scalar gives (depth,) for multi_hot (Keras's
    ``compute_output_shape(())``); one_hot of a scalar is (1, depth), as Keras's call."""
    layer = pp.Discretization(bin_boundaries=[0.0, 1.0], output_mode="one_hot")
    assert tuple(layer(np.zeros((2, 5, 1))).shape) == (2, 5, 3)
    assert tuple(layer(np.array(0.5)).shape) == (1, 3)
    multi = pp.Discretization(bin_boundaries=[0.0, 1.0], output_mode="multi_hot")
    assert tuple(multi(np.array(0.5)).shape) == (3,)


def test_compute_output_spec_method():
    """discretization_test.py::test_compute_output_spec_method: one_hot of (2, 3, 4) is
    (2, 3, 4, 4) float32 (Keras's output_dtype for encodings)."""
    layer = pp.Discretization(bin_boundaries=[0.0, 1.0, 2.0], output_mode="one_hot")
    out = layer(np.zeros((2, 3, 4)))
    assert tuple(out.shape) == (2, 3, 4, 4) and out.dtype == torch.float32


@pytest.mark.parametrize("batch_size", [1, 3, 5, 10])
def test_batch_dimension_consistency(batch_size):
    """discretization_test.py::test_batch_dimension_consistency."""
    layer = pp.Discretization(bin_boundaries=[0.0, 1.0, 2.0], output_mode="one_hot")
    x = np.random.default_rng(batch_size).uniform(0, 3, size=(batch_size, 4, 3))
    out = layer(x)
    assert tuple(out.shape) == (batch_size, 4, 3, 4)
    assert_values(out.sum(-1), np.ones((batch_size, 4, 3)))  # one bin per value


@pytest.mark.parametrize(
    "num_bins,output_mode,sample,expected",
    [
        (3, "int", (5, 4), (5, 4)),
        (4, "one_hot", (3, 2), (3, 2, 4)),
        (5, "multi_hot", (6, 3), (3, 5)),
        (6, "count", (4, 2), (2, 6)),
    ],
)
def test_compute_output_shape_num_bins(num_bins, output_mode, sample, expected):
    """discretization_test.py::test_compute_output_shape_num_bins: adapted on enough
    distinct values to reach num_bins, then called on a batch of 2."""
    layer = pp.Discretization(num_bins=num_bins, output_mode=output_mode)
    layer.adapt(np.linspace(0.0, 1.0, 100))
    assert len(layer.bin_boundaries) == num_bins - 1
    x = np.random.default_rng(8).random((2, *sample))
    assert tuple(layer(x).shape) == (2, *expected)
