"""Discretization: bins of fixed and adapted boundaries, checkpoint checks, and against
Keras 3.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _layer_helpers import assert_same, keras_outcomes, pp_dataset

import preprocessing as pp


def test_discretization_values():
    layer = pp.Discretization(bin_boundaries=[0.0, 1.0])
    assert layer(torch.tensor([-0.5, 0.0, 0.99, 1.0, 7.0])).tolist() == [0, 1, 1, 2, 2]
    assert layer(torch.tensor([0.5])).dtype == torch.int32
    # An adapted config holds num_bins and the learnt boundaries; the boundaries win.
    adapted = pp.Discretization(num_bins=3)
    adapted.adapt(np.arange(100.0))
    config = adapted.get_config()
    assert config["num_bins"] == 3 and len(config["bin_boundaries"]) == 2
    assert pp.Discretization.from_config(config).bin_boundaries.tolist() == config["bin_boundaries"]


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: pp.Discretization(), "exactly one"),
        (lambda: pp.Discretization(bin_boundaries=[2.0, 1.0]), "sorted"),
    ],
)
def test_bad_arguments_name_the_argument(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("mode", ["int", "one_hot", "multi_hot", "count"])
def test_discretization_fixed(ref, mode):
    inputs = [
        np.array([[-1.0, 0.0, 0.5, 1.0, 2.0, 3.0]]),
        np.array([0.5, 2.0]),
        np.array([[0.0], [2.5]]),
    ]
    kw = dict(bin_boundaries=[0.0, 1.0, 2.0], output_mode=mode)
    theirs = ref(keras_outcomes, "Discretization", kw, inputs)["outcomes"]
    for x, expected in zip(inputs, theirs, strict=True):
        got = pp.Discretization(**kw)(x).numpy()
        assert expected.dtype == got.dtype
        assert_same(expected, got)


@pytest.mark.parametrize("num_bins", [2, 4, 10])
@pytest.mark.parametrize("epsilon", [0.01, 0.1])
def test_discretization_adapt(ref, num_bins, epsilon):
    data = np.random.default_rng(0).normal(size=(1000, 3)).astype(np.float32)
    kw = dict(num_bins=num_bins, epsilon=epsilon)
    theirs = ref(keras_outcomes, "Discretization", kw, [], data)
    ours = pp.Discretization(**kw)
    ours.adapt(data)
    # Boundaries are float32 arithmetic on values |x| < 5 (Keras's summary merges in its
    # own order): within 8 float32 ulps of 4, not bit for bit across CPUs.
    bound = 8 * float(np.spacing(np.float32(4.0)))
    np.testing.assert_allclose(ours.bin_boundaries.numpy(), theirs["bin_boundaries"], 0, bound)
    # Streaming: the same batches give the same sketch.
    theirs = ref(keras_outcomes, "Discretization", kw, [], data, 128)
    ours = pp.Discretization(**kw)
    ours.adapt(pp_dataset(data).batch(128), progress=False)
    np.testing.assert_allclose(ours.bin_boundaries.numpy(), theirs["bin_boundaries"], 0, bound)


def test_discretization_refuses_bad_boundaries_from_a_checkpoint():
    layer = pp.Discretization(bin_boundaries=[0.0, 1.0])
    for bad in ([0.0, float("nan")], [2.0, 1.0]):
        with pytest.raises(ValueError, match=r"Discretization: state_dict\['bin_boundaries'\]"):
            layer.load_state_dict({"bin_boundaries": torch.tensor(bad)})
        assert layer.bin_boundaries.tolist() == [0.0, 1.0]
