"""CategoryEncoding: counts with weights, and every output mode against Keras 3.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _layer_helpers import assert_same, keras_outcomes

import preprocessing as pp


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: pp.CategoryEncoding(), "num_tokens"),
    ],
)
def test_bad_arguments_name_the_argument(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("mode", ["one_hot", "multi_hot", "count"])
def test_category_encoding(ref, mode):
    inputs = [np.array(2), np.array([0, 1, 2]), np.array([[0, 1], [2, 2]]), np.array([[1], [0]])]
    kw = dict(num_tokens=3, output_mode=mode)
    theirs = ref(keras_outcomes, "CategoryEncoding", kw, inputs)["outcomes"]
    for x, expected in zip(inputs, theirs, strict=True):
        assert_same(expected, pp.CategoryEncoding(**kw)(x).numpy())
    if mode == "count":
        x, w = np.array([[0, 1, 1], [2, 2, 2]]), np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 0.5]])
        call_kw = dict(count_weights=w)
        expected = ref(keras_outcomes, "CategoryEncoding", kw, [x], None, None, call_kw)
        expected = expected["outcomes"][0]
        got = pp.CategoryEncoding(3, "count")(x, count_weights=w)
        assert got.dtype == torch.float32
        assert_same(expected, got.numpy())


def test_category_encoding_count_values():
    enc = pp.CategoryEncoding(num_tokens=3, output_mode="count")
    assert enc(
        torch.tensor([[0, 2, 2]]), count_weights=torch.tensor([[0.5, 1.0, 2.0]])
    ).tolist() == [[0.5, 0.0, 3.0]]
