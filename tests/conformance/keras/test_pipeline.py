"""Keras 3's ``pipeline_test.py`` (keras/src/layers/preprocessing/), translated."""

import numpy as np
import pytest
import torch

import datapipe as dp
import preprocessing as pp
from preprocessing.base import call_training

from ._util import assert_values


def test_basics():
    """pipeline_test.py::test_basics: AutoContrast then RandomBrightness(0.1) on
    (8, 3, 4, 3) keeps the shape; no weights."""
    layer = pp.Pipeline([pp.AutoContrast(), pp.RandomBrightness(0.1, seed=0)])
    x = torch.rand(8, 3, 4, 3)
    assert tuple(layer(x).shape) == (8, 3, 4, 3)
    assert list(layer.parameters()) == []


class _Canary(pp.Layer):
    """upstream's CanaryLayer: records whether it ran in training mode."""

    _checks_layout = False

    def __init__(self) -> None:
        super().__init__()
        self.seen = None

    def transform_images(self, images, params):
        self.seen = self.training
        return images


@pytest.mark.parametrize("training", [True, False])
def test_correctness(training):
    """pipeline_test.py::test_correctness: every layer of a Pipeline sees its training
    flag (torch's train()/eval(); Keras passes training= to each call). Keras's mask
    argument has no counterpart (no masking here)."""
    pipeline = pp.Pipeline([_Canary(), _Canary()]).train(training)
    x = torch.zeros(1, 1, 1, 1)
    assert torch.equal(pipeline(x), x)
    assert [layer.seen for layer in pipeline.layers] == [training, training]


class _KerasCanary(_Canary):
    """upstream's CanaryLayer as Keras writes it: reads the call's training flag
    (``call_training``: the call's ``training=``, else the module's mode)."""

    def transform_images(self, images, params):
        self.seen = call_training(self)
        return images


@pytest.mark.parametrize("training", [True, False])
def test_correctness_with_keras_training_keyword(training):
    """pipeline_test.py::test_correctness as Keras calls it, ``pipeline(x,
    training=training)``: each layer sees the keyword, whatever train()/eval() say."""
    pipeline = pp.Pipeline([_KerasCanary(), _KerasCanary()]).train(not training)
    x = torch.zeros(1, 1, 1, 1)
    assert torch.equal(pipeline(x, training=training), x)
    assert [layer.seen for layer in pipeline.layers] == [training, training]
    assert pipeline.training is (not training)  # the modules' own mode is untouched


def test_tf_data_compatibility():
    """pipeline_test.py::test_tf_data_compatibility: AutoContrast then CenterCrop(8, 9) in
    a pipeline's map, (2, 3, 10, 12) -> (2, 3, 8, 9) channels-first."""
    layer = pp.Pipeline([pp.AutoContrast(), pp.CenterCrop(8, 9)])
    data = np.random.default_rng(0).random((2, 3, 10, 12)).astype("float32")
    out = next(iter(dp.from_tensor_slices(data).batch(2).map(layer)))
    assert tuple(out.shape) == (2, 3, 8, 9)


def test_from_config():
    """pipeline_test.py::test_from_config: channels_last (2, 10, 12, 3) ones -> (2, 8, 9, 3),
    the restored Pipeline gives the same output."""
    fmt = dict(data_format="channels_last")
    pipeline = pp.Pipeline([pp.AutoContrast(**fmt), pp.CenterCrop(8, 9, **fmt)], **fmt)
    x = np.ones((2, 10, 12, 3), dtype="float32")
    out = pipeline(x)
    restored = pp.Pipeline.from_config(pipeline.get_config())
    assert tuple(out.shape) == (2, 8, 9, 3)
    assert_values(restored(x), out)


@pytest.mark.parametrize("config", [{"name": "test"}, {"layers": None, "name": "test"}])
def test_from_config_malformed_raises_value_error(config):
    """pipeline_test.py::test_from_config_malformed_raises_value_error."""
    with pytest.raises(ValueError, match="layers"):
        pp.Pipeline.from_config(config)


def test_from_config_does_not_mutate_input():
    """pipeline_test.py::test_from_config_does_not_mutate_input."""
    config = pp.Pipeline([pp.AutoContrast()]).get_config()
    serialized = config["layers"]
    copy = [dict(entry) for entry in serialized]
    pp.Pipeline.from_config(config)
    assert config["layers"] is serialized and serialized == copy
