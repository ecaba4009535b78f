"""TextVectorization: standardize, split and n-grams, and against Keras 3 (standardize x
split x ngrams x modes).

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

from __future__ import annotations

import numpy as np
import pytest
from _layer_helpers import assert_same, keras_outcomes

import preprocessing as pp

CORPUS = np.array(
    [
        "The quick brown fox.",
        "jumped over the LAZY dog!!",
        "Ünïcode ÄÖ café, déjà-vu\u00a0nbsp",
        "  spaces\tand\nnewlines  ",
        "the the the fox",
        "",
        "x's y_z (a+b) [c] {d} @e #f",
    ]
)
QUERIES = np.array(["the fox and the dog", "unknown words here", "Ünïcode café", "", "a+b c"])


def test_text_vectorization_standardize_split_and_ngrams():
    layer = pp.TextVectorization(ngrams=(1, 2), split="whitespace")
    # ASCII-only lowering (tf.strings.lower), Keras's punctuation, ASCII whitespace only.
    assert layer.tokenize("Hello, ÄB\u00a0x!  y") == [
        "hello",
        "Äb\u00a0x",
        "y",
        "hello Äb\u00a0x",
        "Äb\u00a0x y",
    ]
    chars = pp.TextVectorization(split="character", standardize=None)
    assert chars.tokenize("añ b") == ["a", "ñ", " ", "b"]
    custom = pp.TextVectorization(standardize=str.upper, split=lambda s: s.split("-"))
    assert custom.tokenize("a-b") == ["A", "B"]
    with pytest.raises(ValueError, match="callable standardize/split"):
        custom.get_config()
    assert "standardize='upper'" in repr(custom)


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda: pp.TextVectorization(output_mode="count", output_sequence_length=3),
            "output_sequence_length",
        ),
        (lambda: pp.TextVectorization(split=None, ngrams=2), "ngrams"),
    ],
)
def test_bad_arguments_name_the_argument(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize(
    "standardize", ["lower_and_strip_punctuation", "lower", "strip_punctuation", None]
)
@pytest.mark.parametrize("split", ["whitespace", "character"])
@pytest.mark.parametrize("ngrams", [None, 2, (1, 3)])
def test_text_vectorization_adapted(ref, standardize, split, ngrams):
    for mode, osl, max_tokens in [
        ("int", None, None),
        ("int", 3, 8),
        ("int", 12, None),
        ("multi_hot", None, 8),
        ("count", None, None),
        ("tf_idf", None, 8),
    ]:
        kw = dict(
            standardize=standardize,
            split=split,
            ngrams=ngrams,
            output_mode=mode,
            max_tokens=max_tokens,
            output_sequence_length=osl,
        )
        ours = pp.TextVectorization(**kw)
        ours.adapt(CORPUS)
        theirs = ref(keras_outcomes, "TextVectorization", kw, [QUERIES], CORPUS)
        assert ours.get_vocabulary() == theirs["vocabulary"]
        assert_same(theirs["outcomes"][0], ours(QUERIES).numpy(), atol=1e-6)


def test_text_vectorization_given_vocabulary_and_unsplit(ref):
    def check(kw, inputs):
        theirs = ref(keras_outcomes, "TextVectorization", kw, inputs)["outcomes"]
        for x, expected in zip(inputs, theirs, strict=True):
            assert_same(expected, pp.TextVectorization(**kw)(x).numpy())

    check(
        dict(
            max_tokens=20,
            pad_to_max_tokens=True,
            output_mode="multi_hot",
            vocabulary=["the", "fox"],
        ),
        [QUERIES],
    )
    check(
        dict(output_mode="tf_idf", vocabulary=["the", "fox", "dog"], idf_weights=[0.1, 0.2, 0.3]),
        [QUERIES],
    )
    unsplit = [
        np.array([["a"], ["c"], ["B"]]),
        np.array(["a", "c"]),
        np.array([["a", "b"], ["c", "a"]]),
    ]
    for mode in ["int", "one_hot", "multi_hot", "count"]:
        check(dict(split=None, output_mode=mode, vocabulary=["a", "b"]), unsplit)
